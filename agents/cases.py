"""The challenging-behaviour case protocol (scenario kind `cases`), after TutorCaseBench, plus a live continuation.

An episode replays a case's dialogue prefix (recorded as turns with no model: nobody wrote them in this run),
ending in the student's challenging behaviour, and asks the tutor one task, named by the condition:

* `task: open` — the tutor's `response: immediate` (what to say or do right now) or `response: long_term`
  (a plan over weeks), from the minimal context and the dialogue only; with `reference: retrieved` the prompt
  also lists the strategies that worked and those that failed (labelled so) in the most similar *unrelated*
  cases (never the same student or scenario family; the ranking is fixed when the cases are loaded, see
  `personas.case_retrieval`). The reply is the judged turn (the checklist judge).
* `task: mcq4` — one MCQ per effective strategy of the case (condition `strategy: 1, 2, ...`, the paper's
  "each strategy is a separate correct option"): that strategy and, as distractors, effective strategies of
  three unrelated cases, one per case, most similar case first, the candidate of each closest in length to the
  correct option, rejecting any whose TF-IDF cosine with the correct option (or another effective strategy of
  this case) exceeds `distractor_max_similarity` (a reworded correct answer is no distractor). `task: binary`
  — the same strategy against the ineffective strategy of this case closest to it in length. Options are
  shuffled with the episode seed; a dataset's own MCQs (public TutorCaseBench) are used, the n-th for
  `strategy: n`, when the case carries them. Scored exactly, against chance 1/options. `meta.mcq_strategy`
  names the correct option's text. With `mcq_construction: model` the scenario's first judge model selects the
  distractors (or the binary pair's ineffective side) and rewrites the options' surface, as the paper did
  (`agents.case_mcq_build`); the heuristic above is the default and the fallback, and each record says which
  built its options (`meta.mcq_construction`).
* `task: interactive` — the immediate response, judged the same way, then the persona student goes on for
  `turns` turns (the `case_persona` student's option) with tutor replies between them, and the conversation
  is judged for de-escalation.

The `casebench` design generates these conditions; every key is paired, so all conditions of a case share
its seed and the reference gain is a paired difference per case. A case that lacks the material for a task
(e.g. no ineffective strategy for a binary item) is recorded with `skipped` set and no score.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine import (
    DESIGNS,
    PROTOCOLS,
    STUDENTS,
    TUTORS,
    BuiltScenario,
    CallEstimate,
    Episode,
    EpisodeContext,
    RequestContext,
    Utterance,
    judge_calls,
)
from personas.cases import Case, ResponseType, case_of

from .case_mcq_build import McqConstruction, construct_mcq
from .case_tasks import (
    CASE_TASKS,
    DEFAULT_SYSTEM,
    DISTRACTOR_MAX_SIMILARITY,
    MCQ,
    CaseTask,
    Reference,
    build_mcq,
    parse_choice,
    reference_strategies,
    task_prompt,
)

__all__ = (
    "CASE_TASKS",
    "DISTRACTOR_MAX_SIMILARITY",
    "MCQ",
    "CaseDesign",
    "CaseStudent",
    "CaseTutor",
    "CasesProtocol",
    "Reference",
    "build_mcq",
    "parse_choice",
    "reference_strategies",
    "task_prompt",
)

_BOTH_RESPONSES: list[ResponseType] = ["immediate", "long_term"]
_TYPICAL_CALL = {"tutor": 300, "judge": 355, "student": 370}
"""Tokens per call as the simulator measures them."""


class CaseDesign:
    """Conditions `{task, response, reference, strategy}`; every key is paired so a case's conditions share one seed.

    `strategy` numbers the MCQ of a case (1, 2, ...: its n-th effective strategy); it is `-` for the other tasks.
    A case with fewer effective strategies records the extra MCQ conditions as skipped.
    """

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        tasks: list[CaseTask] = Field(default_factory=lambda: list(CASE_TASKS), min_length=1)
        responses: list[ResponseType] = Field(default_factory=lambda: _BOTH_RESPONSES.copy(), min_length=1)
        reference: bool = True
        """Also run open tasks with strategies of similar cases in the prompt (the paired reference gain)."""
        mcq_strategies: int = Field(default=3, ge=1, le=20)
        """MCQs per case and response type: one per effective strategy, up to this many."""
        distractor_max_similarity: float = Field(default=DISTRACTOR_MAX_SIMILARITY, gt=0.0, le=1.0)
        """Reject a distractor whose TF-IDF cosine with a right answer of the case exceeds this."""
        mcq_construction: McqConstruction = "heuristic"
        """`model`: the first judge model selects and rewrites the options, as the paper did (needs a judge model;
        without one the heuristic builds them and the record says why); `heuristic` (the default) otherwise."""

    paired_factors = ("task", "response", "reference", "strategy")
    min_items = 1

    def __init__(self, options: Options) -> None:
        self.options = options

    def conditions(self) -> list[dict[str, str]]:
        found: list[dict[str, str]] = []
        for task in dict.fromkeys(self.options.tasks):
            for response in dict.fromkeys(self.options.responses):
                if task == "interactive" and response != "immediate":
                    continue  # the student reacts to what the tutor says now, not to a plan
                levels = ("none", "retrieved") if task == "open" and self.options.reference else ("none",)
                mcq = task in ("mcq4", "binary")
                numbers = [str(n) for n in range(1, self.options.mcq_strategies + 1)] if mcq else ["-"]
                found += [
                    {"task": task, "response": response, "reference": level, "strategy": number}
                    for level in levels
                    for number in numbers
                ]
        return found

    def extras(self, episode: Episode, /) -> dict[str, Any]:
        return {
            "challenge_type": episode.item.domain,
            "distractor_max_similarity": self.options.distractor_max_similarity,
            "mcq_construction": self.options.mcq_construction,
        }


def _condition(ctx: EpisodeContext) -> tuple[str, ResponseType, bool]:
    response: ResponseType = "long_term" if ctx.condition.get("response") == "long_term" else "immediate"
    return ctx.condition.get("task", "open"), response, ctx.condition.get("reference") == "retrieved"


class CaseTutor:
    """The tutor for case tasks (`agent: case`): the task prompt first, then plain chat in a continuation."""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        system_prompt: str = DEFAULT_SYSTEM

    def __init__(self, options: Options) -> None:
        self.options = options

    def preflight(self, episode: Episode, /) -> None:
        case_of(episode.item)

    async def respond(self, ctx: EpisodeContext, /) -> Utterance:
        item = ctx.episode.item
        case = case_of(item)
        task, response, with_reference = _condition(ctx)
        prefix = len(case.dialogue)
        mcq = ctx.meta.get("mcq_shown")
        if isinstance(mcq, MCQ):
            messages = [{"role": "user", "content": mcq.prompt(case, response)}]
            data: dict[str, Any] = {"letters": list(mcq.letters), "correct": mcq.letters[mcq.correct]}
            kind = "case_mcq"
        elif len(ctx.turns) == prefix:
            references = reference_strategies(item, response) if with_reference else []
            messages = [{"role": "user", "content": task_prompt(case, response, references)}]
            data = {
                "response": response,
                "effective": case.strategies.effective(response),
                "ineffective": list(case.strategies.ineffective),
                "reference": bool(references),
            }
            kind = "case_response"
        else:
            system = f"{self.options.system_prompt}\n\nSituation: {case.minimal_context}"
            messages = [{"role": "system", "content": system}]
            for turn in ctx.visible_turns():
                messages.append({"role": "user" if turn.role == "student" else "assistant", "content": turn.text})
            data = {"effective": [*case.strategies.immediate_effective, *case.strategies.long_term_effective]}
            kind = "case_chat"
        if kind != "case_chat":
            messages.insert(0, {"role": "system", "content": self.options.system_prompt})
        reply, latency = await ctx.clients["tutor"].complete(
            messages,
            context=RequestContext(
                role="tutor", item=item, task=kind, condition=ctx.condition, data=data, episode_id=ctx.episode.id
            ),
            seed=ctx.episode.seed_for("tutor", len(ctx.turns), task),
        )
        return Utterance(reply.text, model=reply.model, usage=reply.usage, latency_s=latency)


class CaseStudent:
    """The case's student played on after the tutor's response (`strategy: case_persona`); needs a student model."""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        turns: int = Field(default=2, ge=1, le=10)
        """Student turns after the tutor's response in `task: interactive` (tutor replies come between them)."""

    def __init__(self, options: Options) -> None:
        self.options = options

    @property
    def turns(self) -> int:
        return self.options.turns

    async def respond(self, ctx: EpisodeContext, /) -> Utterance | None:
        client = ctx.clients.get("student")
        if client is None:
            raise RuntimeError("the case_persona student needs a student model: set `models.student`")
        case = case_of(ctx.episode.item)
        full = case.full_context
        system = "\n\n".join(
            [
                f"You are a student in a tutoring session. Who you are: {case.student.description}",
                f"The task: {full.task}\nThe setting: {full.context}\nWhat just upset you: {full.trigger}",
                "Stay in role. React to the tutor's last message as this student realistically would: if it "
                "meets what you actually need, you may calm down gradually; if it does not, stay as you are. "
                "Reply in one or two short sentences of plain speech (actions in brackets are fine); never act "
                "as the tutor and never mention that this is a simulation.",
            ]
        )
        messages = [{"role": "system", "content": system}]
        for turn in ctx.visible_turns():
            messages.append({"role": "user" if turn.role == "tutor" else "assistant", "content": turn.text})
        prefix = len(case.dialogue)
        last_tutor = next((t.text for t in reversed(ctx.turns) if t.role == "tutor"), "")
        data = {
            "effective": [*case.strategies.immediate_effective, *case.strategies.long_term_effective],
            "ineffective": list(case.strategies.ineffective),
            "challenge_type": case.challenge_type,
            "last_tutor": last_tutor,
            "continued": [t.text for t in ctx.turns[prefix:] if t.role == "student"],
        }
        reply, latency = await client.complete(
            messages,
            context=RequestContext(role="student", item=ctx.episode.item, task="case_continue", data=data),
            seed=ctx.episode.seed_for("student", len(ctx.turns)),
        )
        text = reply.text.strip()
        return Utterance(text, model=reply.model, usage=reply.usage, latency_s=latency) if text else None


class CasesProtocol:
    """Runs one case task; metrics `task`, `response`, `reference`, and per task `response_turn` or `mcq_*`."""

    retries = 1
    """Extra asks when an MCQ reply names no valid option (the bad reply stays in the record, hidden)."""

    async def run(self, ctx: EpisodeContext, /) -> None:
        case = case_of(ctx.episode.item)
        task, response, with_reference = _condition(ctx)
        for line in case.dialogue:
            await ctx.add_turn(line.speaker, Utterance(line.text))
        ctx.metrics.update(task=task, response=response, reference="retrieved" if with_reference else "none")
        ctx.meta["prefix_turns"] = len(case.dialogue)
        if task in ("mcq4", "binary"):
            await self._mcq(ctx, case, response, task)
            return
        if not case.rubric(response):
            ctx.metrics["skipped"] = f"no {response} rubric"
            return
        reply = await ctx.tutor.respond(ctx)
        if reply is None:
            ctx.metrics["skipped"] = "tutor_quit"
            return
        turn = await ctx.add_turn("tutor", reply)
        ctx.metrics["response_turn"] = turn.index
        ctx.meta["response_turn"] = turn.index
        await ctx.judge(turn.index)
        if task != "interactive":
            return
        rounds = int(getattr(ctx.student, "turns", 2))
        for round_ in range(rounds):
            utterance = await ctx.student.respond(ctx)
            if utterance is None:
                break
            await ctx.add_turn("student", utterance)
            if round_ < rounds - 1:
                follow = await ctx.tutor.respond(ctx)
                if follow is None:
                    break
                await ctx.add_turn("tutor", follow)
        ctx.metrics["continued_turns"] = len(ctx.turns) - turn.index - 1
        await ctx.judge("conversation")

    async def _mcq(self, ctx: EpisodeContext, case: Case, response: ResponseType, variant: str) -> None:
        number = ctx.condition.get("strategy", "1")
        strategy = int(number) - 1 if number.isdigit() and int(number) > 0 else 0
        rng = random.Random(ctx.episode.seed_for("mcq"))
        mcq, construction = await construct_mcq(ctx, case, response, variant, strategy, rng)
        ctx.meta["mcq_construction"] = construction
        if mcq is None:
            ctx.metrics["skipped"] = f"no material for {variant} item {strategy + 1}"
            return
        ctx.meta.update(mcq_shown=mcq)
        try:
            for _ in range(self.retries + 1):
                reply = await ctx.tutor.respond(ctx)
                turn = await ctx.add_turn("tutor", reply or Utterance(""))
                choice = parse_choice(turn.text, mcq.letters)
                if choice is not None:
                    break
                ctx.hide(turn.index)
        finally:
            del ctx.meta["mcq_shown"]  # records hold JSON only
        ctx.meta.update(mcq_options=list(mcq.options), mcq_source=mcq.source, mcq_strategy=mcq.strategy)
        ctx.metrics.update(
            mcq_options=len(mcq.options),
            mcq_correct_letter=mcq.letters[mcq.correct],
            mcq_answer=choice,
            mcq_valid=choice is not None,
            mcq_correct=choice == mcq.letters[mcq.correct],
        )

    def estimate(self, built: BuiltScenario, episode: Episode, /) -> Mapping[str, CallEstimate]:
        """Upper bound: every retry used, generous sizes per call. Expected: no retry, at the call sizes the
        simulator measures (bench/estimate_accuracy.py)."""
        scenario = built.scenario
        task = episode.condition.get("task", "open")
        prompt = 700 if episode.condition.get("reference") == "retrieved" else 550
        if task in ("mcq4", "binary"):
            tries = 1 + self.retries
            guessed = {"tutor": CallEstimate(1, _TYPICAL_CALL["tutor"], tries, (prompt + 150) * tries)}
            if episode.extras.get("mcq_construction") == "model" and scenario.models.judge:
                guessed["judge"] = CallEstimate(1, 470, 2, 2 * 1200)  # a build call per MCQ (sim-measured), one retry
            return guessed
        guesses = {"tutor": CallEstimate(1, _TYPICAL_CALL["tutor"], 1, prompt + 120)}
        judges = judge_calls(built, 1)
        guesses["judge"] = CallEstimate(judges, judges * _TYPICAL_CALL["judge"], judges, judges * (prompt + 600))
        if task == "interactive":
            turns = int(scenario.student.options.get("turns", 2))
            more = turns - 1
            guesses["tutor"] += CallEstimate(more, more * _TYPICAL_CALL["tutor"], more, more * (prompt + 200))
            if scenario.models.student is not None:
                guesses["student"] = CallEstimate(
                    turns, turns * _TYPICAL_CALL["student"], turns, turns * (prompt + 100)
                )
        return guesses


DESIGNS.add("casebench", CaseDesign)
TUTORS.add("case", CaseTutor)
STUDENTS.add("case_persona", CaseStudent)
PROTOCOLS.add("cases", CasesProtocol())
