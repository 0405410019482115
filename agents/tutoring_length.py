"""How long a tutor-led (fairness) dialogue is expected to run, for the dry run's estimate.

A dialogue can stop early: the tutor states the answer, or the student states it and the tutor confirms. How
often a real model does either cannot be known before it is called, so with a real tutor the expected figure
keeps the protocol's old assumptions (every tutor turn; the student midway through its budget) and the dry run
says it is an upper bound. The `sim` tutor and student are different: their documented knobs *are* their stop
rates (`leak_base`, `leak_per_turn`, `leak_max`, `cue_bias` for the tutor's giving the answer away, `solve_rate`
for the student's solving it alone), so the chance that each turn is played follows from the knobs by the same
rules the sim applies. Nothing here is fitted to measured runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine import PROVIDERS, BuiltScenario, Episode, ModelSpec, leak_chance

from .persona import PersonaStudent
from .persona_sim import PersonaKnobs
from .tutor import ModelTutor, system_prompt_for

__all__ = ("TurnOdds", "sim_turn_odds")


@dataclass(frozen=True)
class TurnOdds:
    """The chance that each student call and each tutor call of the budget is made (in the order they come)."""

    student: tuple[float, ...]
    tutor: tuple[float, ...]


def _sim_knobs(spec: ModelSpec | None) -> Any:
    """The validated knobs of a `sim` model spec, as the sim reads them; None for any other model."""
    if spec is None or spec.provider != "sim":
        return None
    knobs = PROVIDERS.get("sim")().params_model(spec)
    return None if knobs is None else knobs.model_validate(spec.params)


def _tutor_spec(built: BuiltScenario, episode: Episode) -> ModelSpec:
    models = built.scenario.models
    labelled = dict(models.labelled_tutors())
    return labelled.get(episode.tutor, models.tutors[0])


def _tutor_system(built: BuiltScenario, episode: Episode, knobs: Any) -> str:
    """This episode's tutor system prompt, where the sim's `cue_bias` looks for its cues (rendered only then)."""
    if not knobs.cue_bias:
        return ""
    tutor = built.make_tutor()
    return system_prompt_for(episode, tutor.options.system_prompt) if isinstance(tutor, ModelTutor) else ""


def sim_turn_odds(
    built: BuiltScenario, episode: Episode, *, opening_by_model: bool, student_calls: int, tutor_replies: int
) -> TurnOdds | None:
    """Each turn's chance of being played when the tutor is the `sim` (None for any other tutor).

    The sequence is the protocol's: [a model-written opening,] then student call k (k = 1..`student_calls`),
    each followed by a tutor reply while k <= `tutor_replies`. A student who states the answer gets one more
    tutor reply and the dialogue ends; so does one who restates an opening that gave the answer away (the
    protocol checks no reveal in the opening itself). Otherwise the tutor's reply after student call k gives the
    answer away with the sim's own chance after k student turns (`engine.leak_chance`). A student that is not
    the sim's persona is taken never to solve alone (its rate is unknown), which can only lengthen the dialogue."""
    knobs = _sim_knobs(_tutor_spec(built, episode))
    if knobs is None:
        return None
    student_spec = built.scenario.models.student
    solve = 0.0
    if isinstance(built.make_student(), PersonaStudent) and _sim_knobs(student_spec) is not None:
        assert student_spec is not None
        fields = PersonaKnobs.model_fields
        solve = PersonaKnobs.model_validate({k: v for k, v in student_spec.params.items() if k in fields}).solve_rate
    system = _tutor_system(built, episode, knobs)
    alive = 1.0
    tutor: list[float] = []
    students: list[float] = []
    restates = 0.0
    if opening_by_model:
        tutor.append(1.0)
        restates = leak_chance(knobs, 0, system)  # the opening is not tutor-led: the sim's leak at no pressure
    for k in range(1, student_calls + 1):
        students.append(alive)
        if k > tutor_replies:
            break
        tutor.append(alive)
        states = restates if k == 1 else 0.0
        states += (1 - states) * solve
        alive *= (1 - states) * (1 - leak_chance(knobs, k, system))
    return TurnOdds(tuple(students), tuple(tutor))
