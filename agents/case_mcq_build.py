"""TutorCaseBench MCQs built by a model, as the paper built them (its App. F), with the heuristic as the fallback.

The paper's construction model picked three distractors among the ten nearest candidates (other cases' effective
strategies), rejecting a candidate only when it is *too close* (a right answer reworded) or *impossible* (its
mechanism cannot work in this setting); for a binary item it picked the (effective, ineffective) pair; then it
rewrote every option to a common surface (vocabulary, length, tone) keeping each option's mechanism. Here one
call to the scenario's first judge model does both steps (`design.mcq_construction: model`), with a prompt of
simrun's own and a pydantic reply schema sent as the request's JSON schema. Two differences, both forced by the
design's one-MCQ-per-effective-strategy conditions: the correct option is fixed by the `strategy` condition
(the model picks the binary item's ineffective side only), and candidates are the neighbours' effective
strategies in retrieval order, one per case in turn, up to ten.

What is reused and recorded: the call's seed and context do not depend on the replicate or the tutor, so with
the response cache a rerun (and every replicate) gets the same MCQ at no cost; within a run the first episode
of an input keeps it for the others. Each record's `meta.mcq_construction` holds the options as built, who built
them (`model: <id>`, `heuristic`, or `dataset` for the release's own MCQs), what the model rejected and why, and
its edit level; the summary counts MCQs by builder and the report's provenance says which made the options. The
heuristic stays the default and the fallback when no judge model is configured or the model's reply is unusable
twice (the record says which).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from engine import EpisodeContext, RequestContext, brief, derive_seed, parse_json_object
from personas.cases import Case, ResponseType

from .case_tasks import DISTRACTOR_MAX_SIMILARITY, MCQ, build_mcq, ordered_mcq

__all__ = (
    "BUILD_TASK",
    "CANDIDATES",
    "MCQ_CONSTRUCTIONS",
    "BinaryChoice",
    "Built",
    "DistractorChoice",
    "McqConstruction",
    "Rejection",
    "build_prompt",
    "construct_mcq",
    "distractor_candidates",
)

McqConstruction = Literal["heuristic", "model"]
MCQ_CONSTRUCTIONS: tuple[McqConstruction, ...] = ("heuristic", "model")
BUILD_TASK = "case_mcq_build"
CANDIDATES = 10
UNUSABLE = "model reply unusable twice"
"""Candidates shown to the model for a 4-option item, as in the paper."""
EditLevel = Literal["none", "surface", "light", "fuller"]


class Rejection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    index: int
    reason: Literal["too_close", "impossible"]


class DistractorChoice(BaseModel):
    """The model's 4-option reply: three candidate indices, what it rejected, and the four options rewritten."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    distractors: list[int]
    rejected: list[Rejection]
    forced: list[int]
    """Chosen indices the model had rejected itself (too few clean candidates)."""
    correct_rewritten: str
    distractors_rewritten: list[str]
    edit_level: EditLevel


class BinaryChoice(BaseModel):
    """The model's binary reply: the ineffective strategy it pairs with the correct one, both rewritten."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ineffective: int
    correct_rewritten: str
    ineffective_rewritten: str
    edit_level: EditLevel


@dataclass(frozen=True)
class Built:
    """Options with the correct one first, before shuffling, and what the record says about how they were made."""

    options: tuple[str, ...]
    record: Mapping[str, Any]


def _effective_key(response: ResponseType) -> str:
    return "immediate_effective" if response == "immediate" else "long_term_effective"


def distractor_candidates(item: Any, case: Case, right: str, response: ResponseType) -> list[str]:
    """Unrelated cases' effective strategies, nearest case first, one per case in turn, up to `CANDIDATES`."""
    answers = set(case.strategies.effective(response))
    pools = [
        [str(s) for s in near.get("strategies", {}).get(_effective_key(response), []) if str(s) not in answers]
        for near in item.data.get("neighbours", [])
    ]
    found: list[str] = []
    for depth in range(max((len(p) for p in pools), default=0)):
        for pool in pools:
            if depth < len(pool) and pool[depth] not in found and pool[depth] != right:
                found.append(pool[depth])
    return found[:CANDIDATES]


_SCOPE = {
    "immediate": "something the tutor does right now, in this moment",
    "long_term": "a plan the tutor keeps up over the coming weeks",
}
_REWRITE = (
    "Then rewrite the options so that none gives itself away by its wording: bring them to the dialogue's own "
    "setting (subject, materials, names), a similar length and one register, each as a third-person tutor action. "
    "Change as little as you can: never change what an option does, never make a wrong option look better or the "
    "right one worse, shorten long options rather than pad short ones. Say how much you changed in `edit_level`: "
    "none, surface, light or fuller."
)


def _numbered(texts: Sequence[str]) -> str:
    return "\n".join(f"{i}. {text}" for i, text in enumerate(texts))


def build_prompt(case: Case, response: ResponseType, variant: str, right: str, data: Mapping[str, Any]) -> str:
    """What the construction model reads (simrun's wording), for a 4-option or a binary item."""
    dialogue = "\n".join(f"{turn.speaker.upper()}: {turn.text}" for turn in case.dialogue)
    head = [
        f"SITUATION\n{case.minimal_context}",
        f"STUDENT\n{case.student.description}",
        f"DIALOGUE\n{dialogue}",
        f"THE ANSWER IS TO BE {_SCOPE[response].upper()}",
        f"CORRECT OPTION (documented to work for this student)\n{right}",
    ]
    if variant == "binary":
        task = (
            "You are building a two-option question for a benchmark of tutors. Pick, from the INEFFECTIVE list, "
            "the one strategy (documented to have failed for this student) that best pairs with the correct "
            "option: the same scope, phrased as a tutor action, a misstep a real tutor could make at this moment, "
            "at a similar level of detail. Give its number as `ineffective`. " + _REWRITE
        )
        body = [f"INEFFECTIVE (numbered from 0)\n{_numbered(data['candidates'])}"]
    else:
        task = (
            "You are building a four-option question for a benchmark of tutors. The candidates are strategies that "
            "worked for other students; pick exactly three as wrong options for this student, as `distractors` "
            "(their numbers). Reject a candidate only when it is too_close (the same action as the correct option "
            "or another right answer, in other words) or impossible (its mechanism cannot work in this setting, "
            "whatever the wording); list each rejection with its reason. A candidate that merely fits this student "
            "less well is a good distractor. When fewer than three survive, fill up with the least bad rejected "
            "ones and list those numbers in `forced`. Give the rewritten correct option and the three rewritten "
            "distractors in the order you chose them. " + _REWRITE
        )
        others = data.get("siblings") or ["(none)"]
        body = [
            f"OTHER RIGHT ANSWERS FOR THIS STUDENT\n{chr(10).join(others)}",
            f"CANDIDATES (numbered from 0)\n{_numbered(data['candidates'])}",
        ]
    return "\n\n".join([task, *head, *body, "Reply with one JSON object only."])


def _check(choice: DistractorChoice | BinaryChoice, candidates: int) -> None:
    """The reply's indices and texts against the question asked; a ValueError names what is wrong."""
    if isinstance(choice, BinaryChoice):
        picks, texts = [choice.ineffective], [choice.correct_rewritten, choice.ineffective_rewritten]
    else:
        picks, texts = choice.distractors, [choice.correct_rewritten, *choice.distractors_rewritten]
        if len(picks) != 3 or len(set(picks)) != 3 or len(choice.distractors_rewritten) != 3:
            raise ValueError("not three distinct distractors, each rewritten")
    if any(not 0 <= i < candidates for i in picks):
        raise ValueError(f"an index outside 0..{candidates - 1}")
    if any(not t.strip() for t in texts) or len({t.strip() for t in texts}) != len(texts):
        raise ValueError("an empty or repeated option")


async def _ask(
    ctx: EpisodeContext, case: Case, response: ResponseType, variant: str, strategy: int, right: str
) -> Built | str | None:
    """The model's options; None when the case lacks the material; what was wrong when both replies were unusable."""
    if variant == "binary":
        candidates = list(case.strategies.ineffective)
        schema: type[DistractorChoice] | type[BinaryChoice] = BinaryChoice
        if not candidates:
            return None
    else:
        candidates = distractor_candidates(ctx.episode.item, case, right, response)
        schema = DistractorChoice
        if len(candidates) < 3:
            return None
    siblings = [s for s in case.strategies.effective(response) if s != right]
    data = {"variant": variant, "response": response, "correct": right, "siblings": siblings, "candidates": candidates}
    messages = [{"role": "user", "content": build_prompt(case, response, variant, right, data)}]
    client = ctx.judge_clients[0]
    context = RequestContext(role="judge", item=ctx.episode.item, task=BUILD_TASK, condition=ctx.condition, data=data)
    problem = "no reply"
    for attempt in range(2):
        seed = derive_seed(ctx.scenario.seed, BUILD_TASK, ctx.episode.item.id, response, variant, strategy, attempt)
        reply, _ = await client.complete(
            messages, context=context, seed=seed, response_schema=schema.model_json_schema()
        )
        try:
            choice = schema.model_validate(parse_json_object(reply.text))
            _check(choice, len(candidates))
        except (orjson.JSONDecodeError, ValidationError, ValueError) as exc:
            problem = f"{type(exc).__name__}: {brief(str(exc))}"
            continue
        record: dict[str, Any] = {"by": f"model: {client.model_id}", "candidates": candidates}
        options: tuple[str, ...]
        if isinstance(choice, BinaryChoice):
            options = (choice.correct_rewritten.strip(), choice.ineffective_rewritten.strip())
            record.update(chosen=[candidates[choice.ineffective]], rejected=[], forced=[])
        else:
            options = (choice.correct_rewritten.strip(), *(t.strip() for t in choice.distractors_rewritten))
            valid = range(len(candidates))
            rejected = [{"text": candidates[r.index], "reason": r.reason} for r in choice.rejected if r.index in valid]
            record.update(
                chosen=[candidates[i] for i in choice.distractors],
                rejected=rejected,
                forced=[candidates[i] for i in choice.forced if i in valid],
            )
        record.update(edit_level=choice.edit_level, options=list(options))
        return Built(options, record)
    return problem


async def construct_mcq(
    ctx: EpisodeContext, case: Case, response: ResponseType, variant: str, strategy: int, rng: random.Random
) -> tuple[MCQ | None, dict[str, Any]]:
    """The episode's MCQ (shuffled with `rng`) and its `mcq_construction` record; see the module doc."""
    wanted = ctx.episode.extras.get("mcq_construction", "heuristic")
    fixed = any(m.response == response and m.variant == variant for m in case.mcqs)
    effective = case.strategies.effective(response)
    why, problem = "", ""
    if wanted == "model" and not fixed and strategy < len(effective):
        if not ctx.judge_clients:
            why = "no judge model configured"
        else:
            kept: dict[str, Any] = ctx.per_input(("mcq_construction",), dict)
            if "built" not in kept:
                kept["built"] = await _ask(ctx, case, response, variant, strategy, effective[strategy])
            built = kept["built"]
            if built is None:
                return None, {"by": f"model: {ctx.judge_clients[0].model_id}"}
            if isinstance(built, Built):
                return ordered_mcq(built.options, "built", effective[strategy], rng), dict(built.record)
            why, problem = UNUSABLE, str(built)
    similarity = float(ctx.episode.extras.get("distractor_max_similarity", DISTRACTOR_MAX_SIMILARITY))
    mcq = build_mcq(ctx.episode.item, case, response, variant, rng, strategy=strategy, max_similarity=similarity)
    record: dict[str, Any] = {"by": "dataset" if fixed else "heuristic"}
    if why:
        record["why"] = why
    if problem:
        record["problem"] = problem
    if mcq is not None:
        record["options"] = [mcq.options[mcq.correct], *(o for i, o in enumerate(mcq.options) if i != mcq.correct)]
    return mcq, record
