"""A built scenario: checked, its plug-ins resolved and its plan computed, once, for every stage that needs them.

Load → validate → build: after `build`, nothing re-derives anything from the spec. The runner, `--dry-run`,
`simrun validate`, preflight and the estimates all read the same frozen object, so plug-in options are
validated once, judges are built once per run and the plan is computed once. Building reads the item files;
what takes a built scenario (e.g. `Runner`) does no file I/O until it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.core._errors import ScenarioError
from engine.core._templates import TemplateBudget
from engine.runtime._checks import Plugins, check_scenario, load_checked
from engine.runtime._plugins import Agent, CallEstimate, DialogueProtocol, Judge, Summarizer
from engine.runtime._sequential import check_stopping
from engine.scenario._intake import Intake
from engine.scenario._plan import Design, Episode, load_counted_items, plan_designed
from engine.scenario._spec import ModelSpec, Scenario

__all__ = ("BuiltScenario", "build", "load_built", "preflight")


@dataclass(frozen=True)
class BuiltScenario:
    """A scenario ready to run: its resolved plug-ins, its model endpoints by role and its plan."""

    scenario: Scenario
    plugins: Plugins
    episodes: tuple[Episode, ...]
    """The plan, in its run order (see `plan_episodes`)."""
    models: tuple[tuple[str, ModelSpec], ...]
    """Every model endpoint with its role, judges once each (see `ModelsSpec.by_role`)."""
    scenario_hash: str
    """`Scenario.content_hash`, what records and a resume are checked against."""
    tutor: Agent | None = None
    """A tutor given in code instead of the scenario's (embedding, tests), shared by every episode."""
    templates: TemplateBudget = field(default_factory=TemplateBudget, compare=False)
    """The CPU time all template renders of this run share, the pre-run check included."""
    intake: tuple[Intake, ...] = ()
    """Per item source, what it read, kept and skipped (the manifest's "items_intake")."""

    @property
    def protocol(self) -> DialogueProtocol:
        return self.plugins.protocol

    @property
    def summarizer(self) -> Summarizer:
        return self.plugins.summarizer

    @property
    def judges(self) -> tuple[Judge, ...]:
        return self.plugins.judges

    @property
    def design(self) -> Design | None:
        return self.plugins.design

    def make_tutor(self) -> Agent:
        """The tutor of one episode: agents keep per-episode state, so each episode gets its own."""
        return self.tutor or self.plugins.tutor_factory(self.plugins.tutor_options)

    def make_student(self) -> Agent:
        return self.plugins.student_factory(self.plugins.student_options)

    def judge_calls(self, judged_turns: int) -> int:
        """Upper bound of model calls the judges make on one episode with `judged_turns` tutor turns."""
        votes = self.scenario.judge_votes
        return sum(
            getattr(judge, "model_calls", 1) * votes * (judged_turns if judge.scope == "turn" else 1)
            for judge in self.judges
        )

    def estimate(self) -> dict[str, CallEstimate]:
        """Expected model calls and tokens per role over the whole plan, with upper bounds (what `--dry-run` prints)."""
        totals: dict[str, CallEstimate] = {}
        study = self.scenario.models.tutor_labels is not None
        for episode in self.episodes:
            for role, guess in self.protocol.estimate(self, episode).items():
                if role == "tutor" and study and episode.tutor is None:
                    continue  # a tutor-free unit of a study (see `TutorFreeConditions`): no tutor's calls
                role = f"tutor {episode.tutor}" if role == "tutor" and episode.tutor is not None else role
                totals[role] = totals.get(role, CallEstimate()) + guess
        return totals


def build(scenario: Scenario, *, plugins: Plugins | None = None, tutor: Agent | None = None) -> BuiltScenario:
    """Resolve, plan and preflight a checked scenario (reads its item files).

    `plugins` are those `check_scenario` already resolved (see `load_built`); without them the scenario is
    checked here (credentials not required: the providers check them when they are built).
    """
    if plugins is None:
        plugins = check_scenario(scenario, check_credentials=False)
    items, intake = load_counted_items(scenario)
    episodes = plan_designed(scenario, items, plugins.design)
    built = BuiltScenario(
        scenario=scenario,
        plugins=plugins,
        episodes=tuple(episodes),
        models=tuple(scenario.models.by_role()),
        scenario_hash=scenario.content_hash(),
        tutor=tutor,
        templates=TemplateBudget(len(episodes)),
        intake=tuple(intake),
    )
    preflight(built)
    return built


def load_built(
    path: str | Path,
    *,
    overrides: Sequence[str] = (),
    models: Sequence[str] = (),
    check_credentials: bool = True,
) -> BuiltScenario:
    """Load, validate and build a scenario file: what the command line runs, validates and estimates."""
    scenario, plugins = load_checked(path, overrides=overrides, models=models, check_credentials=check_credentials)
    return build(scenario, plugins=plugins)


def preflight(built: BuiltScenario) -> None:
    """Let the agents check every planned episode (e.g. render their templates) so that bad input is a
    `ScenarioError` before any model is called, not an error record in the middle of a run."""
    for role, agent in (("student", built.make_student()), ("tutor", built.make_tutor())):
        check = getattr(agent, "preflight", None)
        if check is None:
            continue
        with built.templates.active():
            for episode in built.episodes:
                try:
                    check(episode)
                except ValueError as exc:
                    raise ScenarioError(f"{role}: {exc} (in episode {episode.id!r})") from None
    check_stopping(built.scenario, built.episodes)
