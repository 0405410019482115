"""The seams plug-ins implement — tutors, students, judges, dialogue protocols, summarisers — and their registries.

A scenario *kind* (e.g. `crescendo`) names a dialogue protocol in `PROTOCOLS` and a summariser in
`SUMMARIZERS`; the engine runs every kind the same way.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import orjson
from pydantic import BaseModel
from rich.console import RenderableType

from engine.core._errors import Unjudged
from engine.core._records import EpisodeRecord, Judgment, Turn, Usage
from engine.core._registry import NoOptions, Registry, options_model
from engine.models._client import ModelClient
from engine.scenario._plan import Episode
from engine.scenario._spec import Scenario

if TYPE_CHECKING:
    from engine.runtime._build import BuiltScenario

T = TypeVar("T")

__all__ = (
    "JUDGES",
    "JUDGE_OUTPUTS",
    "PROTOCOLS",
    "STUDENTS",
    "SUMMARIZERS",
    "TUTORS",
    "UNJUDGED",
    "Agent",
    "AgentFactory",
    "CallEstimate",
    "DialogueProtocol",
    "EpisodeContext",
    "InputMemo",
    "Judge",
    "JudgeFactory",
    "NoOptions",
    "Summarizer",
    "Utterance",
    "judge_calls",
    "options_model",
    "planning_notes",
)


@dataclass(frozen=True)
class Utterance:
    text: str
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0


class Agent(Protocol):
    """A participant: reads the episode so far, says its next message (a student may return None: done)."""

    async def respond(self, ctx: EpisodeContext, /) -> Utterance | None: ...


class AgentFactory(Protocol):
    """Builds an agent from its validated options (a class with an `Options` model fits)."""

    def __call__(self, options: Any, /) -> Agent: ...


class Judge(Protocol):
    """Scores one tutor turn (`target` = its index) or the whole conversation."""

    @property
    def name(self) -> str: ...

    @property
    def scope(self) -> Literal["turn", "conversation"]: ...

    async def __call__(self, ctx: EpisodeContext, target: int | Literal["conversation"], /) -> list[Judgment]: ...


class JudgeFactory(Protocol):
    def __call__(self, options: Any, /) -> Judge: ...


@dataclass(frozen=True)
class CallEstimate:
    """Model calls and tokens a run is expected to use, and the most it can use (`max_*`; 0: as expected).

    The expected figure is what a researcher plans with; the upper bound (every dialogue at its longest) is
    what a spending limit must be able to absorb."""

    calls: int = 0
    tokens: int = 0
    max_calls: int = 0
    max_tokens: int = 0

    @property
    def upper_calls(self) -> int:
        return max(self.max_calls, self.calls)

    @property
    def upper_tokens(self) -> int:
        return max(self.max_tokens, self.tokens)

    def __add__(self, other: CallEstimate) -> CallEstimate:
        return CallEstimate(
            self.calls + other.calls,
            self.tokens + other.tokens,
            self.upper_calls + other.upper_calls,
            self.upper_tokens + other.upper_tokens,
        )


def judge_calls(built: BuiltScenario, judged_turns: int) -> int:
    """Upper bound of model calls the scenario's judges make on one episode with `judged_turns` tutor turns."""
    return built.judge_calls(judged_turns)


class DialogueProtocol(Protocol):
    """Who speaks when and when to stop; fills the context with turns, judgments and metrics."""

    async def run(self, ctx: EpisodeContext, /) -> None: ...

    def estimate(self, built: BuiltScenario, episode: Episode, /) -> Mapping[str, CallEstimate]:
        """Expected model calls and tokens per role for one episode, with their upper bound (for `--dry-run`);
        `built` holds the scenario, its validated plug-ins and `judge_calls`."""
        ...


class Summarizer(Protocol):
    """Turns a run's records into its tables; must use the records alone, so reports can be rebuilt.

    `summarize` returns the kind's part of summary.json, or a pydantic model whose JSON it is (what an
    `engine.BlockSummarizer` returns, drawing its three renderings from blocks).
    """

    def summarize(
        self, records: Sequence[EpisodeRecord], manifest: Mapping[str, Any], /
    ) -> Mapping[str, Any] | BaseModel: ...

    def render_markdown(self, summary: Mapping[str, Any], /) -> str: ...

    def render_console(self, summary: Mapping[str, Any], /) -> RenderableType:
        """The headline table the command line prints when a run ends."""
        ...


def planning_notes(scenario: Scenario, episodes: Sequence[Episode], *, power_r: float | None = None) -> list[str]:
    """What the kind's summariser can say about a plan before anything is spent (`simrun validate`,
    `--dry-run`): e.g. how small an effect each cell can detect. A summariser opts in with a
    `plan_notes(scenario, episodes, power_r=None) -> list[str]` method; kinds without one say nothing. `power_r`
    (`simrun validate --power R`) asks also for the items per cell that detect |r| = R, a slower search."""
    hook = getattr(SUMMARIZERS.get(scenario.kind), "plan_notes", None)
    return list(hook(scenario, episodes, power_r=power_r)) if callable(hook) else []


class InputMemo:
    """Values kept across a run's episodes per distinct input (item, condition and the design's extras).

    Replicates of one input render the same prompts and scripts, so those are computed once per run, not once
    per episode. The oldest values go past `size` entries, so a design whose extras differ in every episode
    costs no more memory than a bounded cache.
    """

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._kept: dict[tuple[Hashable, int, bytes], tuple[object, Any]] = {}

    def get(self, key: Hashable, episode: Episode, compute: Callable[[], T]) -> T:
        inputs = orjson.dumps([episode.condition, episode.extras], option=orjson.OPT_SORT_KEYS)
        full = (key, id(episode.item), inputs)
        kept = self._kept.get(full)
        if kept is not None and kept[0] is episode.item:  # the item is held here, so its id is not reused
            value: T = kept[1]
            return value
        value = compute()
        if len(self._kept) >= self._size:
            del self._kept[next(iter(self._kept))]
        self._kept[full] = (episode.item, value)
        return value


@dataclass
class EpisodeContext:
    """Everything one episode's protocol, agents and judges share, and the record being built."""

    episode: Episode
    scenario: Scenario
    tutor: Agent
    student: Agent
    judges: Sequence[Judge]
    clients: Mapping[str, ModelClient]
    judge_clients: Sequence[ModelClient]
    on_turn: Callable[[EpisodeContext, Turn], Awaitable[None]] | None = None
    turns: list[Turn] = field(default_factory=list)
    judgments: list[Judgment] = field(default_factory=list)
    metrics: dict[str, float | int | bool | str | None] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    started_at: float = field(default_factory=time.time)
    run_memo: InputMemo = field(default_factory=InputMemo, repr=False, compare=False)
    """Shared by every episode of a run (the runner passes its own); see `per_input`."""
    _memo: dict[Hashable, Any] = field(default_factory=dict, repr=False, compare=False)

    def once(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()` the first time `key` is asked for in this episode, the kept value after: what is fixed
        for an episode (a rendered system prompt, a script) is not redone on every turn."""
        try:
            value: T = self._memo[key]
        except KeyError:
            value = self._memo[key] = compute()
        return value

    def per_input(self, key: Hashable, compute: Callable[[], T]) -> T:
        """Like `once`, but kept for the whole run per distinct input: for a `compute` that depends only on the
        episode's item, condition and extras (a rendered system prompt, a script), never on its seed or turns."""
        return self.once(("per_input", key), lambda: self.run_memo.get(key, self.episode, compute))

    @property
    def condition(self) -> Mapping[str, str]:
        return self.episode.condition

    def visible_turns(self) -> list[Turn]:
        return [turn for turn in self.turns if turn.visible_to_tutor]

    async def add_turn(self, role: Literal["tutor", "student"], utterance: Utterance) -> Turn:
        turn = Turn(
            index=len(self.turns),
            role=role,
            text=utterance.text,
            model=utterance.model,
            usage=utterance.usage,
            latency_s=round(utterance.latency_s, 6),
        )
        self.turns.append(turn)
        if self.on_turn is not None:
            await self.on_turn(self, turn)
        return turn

    def hide(self, *indices: int) -> None:
        """Backtrack: these turns stay in the record but the tutor never sees them again."""
        for index in indices:
            self.turns[index] = self.turns[index].model_copy(update={"visible_to_tutor": False})

    async def judge(self, target: int | Literal["conversation"]) -> list[Judgment]:
        """Run every judge whose scope matches `target` and keep their judgments."""
        scope = "conversation" if target == "conversation" else "turn"
        found: list[Judgment] = []
        for judge in self.judges:
            if judge.scope == scope:
                try:
                    found.extend(await judge(self, target))
                except Unjudged as exc:  # the dialogue is worth keeping: this reply counts as unjudged
                    found.append(
                        Judgment(judge=judge.name, metric=UNJUDGED, target=target, value=None, rationale=f"{exc}")
                    )
        self.judgments.extend(found)
        return found

    def count_judge_output(self, model: str, rubric: str, *, valid: bool) -> None:
        """Tally one answer of a judge model to a rubric, for the parse-failure rate per model × rubric."""
        tally = self.meta.setdefault(JUDGE_OUTPUTS, {}).setdefault(model, {}).setdefault(rubric, {})
        outcome = "valid" if valid else "invalid"
        tally[outcome] = tally.get(outcome, 0) + 1


UNJUDGED = "unjudged"
"""The metric of a judgment that holds no verdict: the judge's output stayed invalid (the reason is its rationale)."""
JUDGE_OUTPUTS = "judge_outputs"
"""The episode-meta key of the judge models' valid and invalid answers, per model and rubric."""

TUTORS: Registry[AgentFactory] = Registry("tutor agent", "tutors")
STUDENTS: Registry[AgentFactory] = Registry("student strategy", "students")
JUDGES: Registry[JudgeFactory] = Registry("judge", "judges")
PROTOCOLS: Registry[DialogueProtocol] = Registry("scenario kind", "protocols")
SUMMARIZERS: Registry[Summarizer] = Registry("summariser", "summarizers")
