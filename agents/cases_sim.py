"""Sim behaviours for challenging-behaviour cases (scenario kind `cases`): tutor, student and judge.

The agents pass the case's hidden strategies in the engine-side request context (never sent to a real
provider), the way the core sim tutor knows an item's reference answer. With them the simulator plays:

* **tutor / `case_response`** — an immediate response or a long-term plan. With probability
  `case_effective` (immediate) or `case_long_term_effective` (long-term), plus `case_reference_boost` when the
  prompt carries strategies of similar cases (`data["reference"]`), it applies one of the case's effective
  strategies of that response type, stated in the tutor's voice with the strategy's own words; otherwise it
  applies one of the case's ineffective strategies (half of the remaining draws, when there are any) or falls
  back on one of a few stock phrasings — a templated tutor, which the distinct-n diversity metric can see.
* **tutor / `case_chat`** — a later turn of an interactive continuation: an effective strategy (immediate or
  long-term) with probability `case_effective`, else a stock phrasing.
* **tutor / `case_mcq`** — a JSON choice `{"answer", "reasoning"}`: the correct letter with probability
  `mcq_accuracy` (4 options) or `binary_accuracy` (2 options), else another letter uniformly.
* **student / `case_continue`** — the persona student after the tutor's turn. A tutor turn *applies* a
  strategy when at least `APPLIES_RECALL` of that strategy's content words appear in it. After a turn that
  applies an effective strategy the student calms with probability `deescalate_effective`, otherwise with
  `deescalate_other`; once calm, that chance is at least `STAY_CALM`. A calm line carries one of
  `CALM_MARKERS`; an escalated line (worded per challenge type) carries none.
* **judge / `case_checklist`** — the checklist rubric's JSON. Each effective strategy the response applies
  earns the point of the criterion most similar to it (content-word Jaccard with the criterion's name and
  check); with no strategies to go by (a public case without MCQs), a criterion holds when the response
  contains at least `CHECK_RECALL` of its check's content words. Each score is flipped with `error_rate`, and
  the whole reply is not JSON with `invalid_rate`.
* **judge / `case_deescalation`** — `{"deescalated", "turn", "rationale"}`: de-escalated when the last
  student turn after the response carries a calm marker, `turn` the first such turn; flipped with
  `error_rate`.

So the sizes of the planted effects are known: the success rate of responses follows the effective-strategy
chances, the reference gain is `case_reference_boost` (scaled by the judge's noise), MCQ accuracy is its
knob, and de-escalation follows the student's two chances.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from engine import ChatRequest, content_words, sim_knobs, sim_task

__all__ = (
    "APPLIES_RECALL",
    "CALM_MARKERS",
    "CHECK_RECALL",
    "STAY_CALM",
    "CaseStudentKnobs",
    "CaseTutorKnobs",
    "applies",
    "best_criterion",
)

APPLIES_RECALL = 0.6
CHECK_RECALL = 0.5
STAY_CALM = 0.9
CALM_MARKERS = ("okay, i can try", "i guess i could", "fine, i'll give it", "that actually helps", "can we do just")


@sim_knobs("tutor")
class CaseTutorKnobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    case_effective: float = Field(default=0.5, ge=0, le=1)
    """Chance that an immediate response applies one of the case's effective strategies."""
    case_long_term_effective: float = Field(default=0.35, ge=0, le=1)
    """The same for a long-term plan."""
    case_reference_boost: float = Field(default=0.15, ge=-1, le=1)
    """Added to both chances when the prompt carries strategies of similar cases."""
    mcq_accuracy: float = Field(default=0.6, ge=0, le=1)
    """Chance of choosing the correct option of a 4-option item (else one of the others, uniformly)."""
    binary_accuracy: float = Field(default=0.9, ge=0, le=1)
    """The same for a binary (effective vs ineffective) item."""


@sim_knobs("student")
class CaseStudentKnobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    deescalate_effective: float = Field(default=0.7, ge=0, le=1)
    """Chance the student calms down after a tutor turn that applies an effective strategy."""
    deescalate_other: float = Field(default=0.15, ge=0, le=1)
    """The same after any other tutor turn."""


_IMMEDIATE_VOICE = ("Right now I would {s}", "In this moment I'd {s}", "My next move: I would {s}")
_LONG_TERM_VOICE = ("Over the next few weeks I would {s}", "As a longer-term plan, I would {s}")
_CHAT_VOICE = ("Let's try something different: I'll {s}", "Here's an idea. I'm going to {s}")
_STOCK_IMMEDIATE = (
    "I can see this feels really hard right now. Take a deep breath, and let's try one more together.",
    "It's okay to feel frustrated. Take a deep breath and we'll go step by step.",
    "I hear you. Let's take a deep breath and give it one more try together.",
)
_STOCK_LONG_TERM = (
    "Over the coming weeks I would keep encouraging them, praise their effort and check in regularly.",
    "Over time I would build a positive relationship, praise effort and keep expectations consistent.",
)
_CALM_LINES = (
    "...okay, I can try one. But just one.",
    "I guess I could do that part.",
    "Fine, I'll give it a go if it's like that.",
    "Hm. That actually helps a bit.",
    "Can we do just the first bit then?",
)
_ESCALATED: Mapping[str, Sequence[str]] = {
    "task_resistance": ("No. I already said I'm not doing it.", "Why should I? This is pointless."),
    "emotional_distress": ("(still crying) I just can't. Everything is going wrong.", "Stop. I don't want to."),
    "social_interpersonal": ("You're not listening to me. Nobody ever does.", "I said no. Leave me alone."),
    "attention_engagement": ("Huh? Sorry, what? Can I go now?", "Whatever. (looks away)"),
    "academic_struggle": ("I still don't get it. I'm just bad at this.", "See, I can't do it. There's no point."),
}
_GENERIC_ESCALATED = ("No. I don't want to.", "Whatever.")


def _words(text: str) -> set[str]:
    return set(content_words(text))


def applies(text: str, strategy: str) -> bool:
    """Whether `text` carries at least `APPLIES_RECALL` of the strategy's content words."""
    wanted = _words(strategy)
    return bool(wanted) and len(wanted & _words(text)) / len(wanted) >= APPLIES_RECALL


def best_criterion(strategy: str, criteria: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the criterion whose name and check share the most content words with `strategy` (Jaccard)."""
    words = _words(strategy)
    best, best_score = None, 0.0
    for index, criterion in enumerate(criteria):
        other = _words(f"{criterion.get('name', '')} {criterion.get('check', '')}")
        union = words | other
        score = len(words & other) / len(union) if union else 0.0
        if score > best_score:
            best, best_score = index, score
    return best


def _voice(templates: Sequence[str], strategy: str, rng: random.Random) -> str:
    text = strategy.strip().rstrip(".")
    return rng.choice(templates).format(s=text[:1].lower() + text[1:]) + "."


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


@sim_task("tutor", "case_response")
def case_response(request: ChatRequest, rng: random.Random, knobs: Any) -> str:
    data = request.context.data
    long_term = data.get("response") == "long_term"
    chance = knobs.case_long_term_effective if long_term else knobs.case_effective
    if data.get("reference"):
        chance += knobs.case_reference_boost
    effective, ineffective = _strings(data.get("effective")), _strings(data.get("ineffective"))
    effective_draw, kind_draw = rng.random(), rng.random()
    voice = _LONG_TERM_VOICE if long_term else _IMMEDIATE_VOICE
    if effective and effective_draw < min(1.0, max(0.0, chance)):
        return _voice(voice, rng.choice(effective), rng)
    if ineffective and kind_draw < 0.5:
        return _voice(voice, rng.choice(ineffective), rng)
    return rng.choice(_STOCK_LONG_TERM if long_term else _STOCK_IMMEDIATE)


@sim_task("tutor", "case_chat")
def case_chat(request: ChatRequest, rng: random.Random, knobs: Any) -> str:
    effective = _strings(request.context.data.get("effective"))
    if effective and rng.random() < knobs.case_effective:
        return _voice(_CHAT_VOICE, rng.choice(effective), rng)
    return rng.choice(_STOCK_IMMEDIATE)


@sim_task("tutor", "case_mcq")
def case_mcq(request: ChatRequest, rng: random.Random, knobs: Any) -> str:
    data = request.context.data
    letters = _strings(data.get("letters")) or ["A", "B"]
    correct = str(data.get("correct", letters[0]))
    accuracy = knobs.binary_accuracy if len(letters) == 2 else knobs.mcq_accuracy
    others = [letter for letter in letters if letter != correct]
    choice = correct if rng.random() < accuracy or not others else rng.choice(others)
    return orjson.dumps({"answer": choice, "reasoning": "chosen by the simulator at its configured accuracy"}).decode()


@sim_task("student", "case_continue")
def case_continue(request: ChatRequest, rng: random.Random, knobs: Any) -> str:
    data = request.context.data
    last_tutor = str(data.get("last_tutor", ""))
    was_calm = any(marker in text.lower() for text in _strings(data.get("continued")) for marker in CALM_MARKERS)
    helped = any(applies(last_tutor, s) for s in _strings(data.get("effective")))
    chance = max(STAY_CALM if was_calm else 0.0, knobs.deescalate_effective if helped else knobs.deescalate_other)
    if rng.random() < chance:
        return rng.choice(_CALM_LINES)
    return rng.choice(_ESCALATED.get(str(data.get("challenge_type")), _GENERIC_ESCALATED))


@sim_task("judge", "case_checklist")
def case_checklist(request: ChatRequest, rng: random.Random, knobs: Any) -> str:
    if rng.random() < knobs.invalid_rate:
        return "The response seems reasonable overall."  # not JSON: exercises the judge's retry path
    data = request.context.data
    response = str(data.get("response", ""))
    criteria = [c for c in data.get("criteria", []) if isinstance(c, Mapping)]
    effective = _strings(data.get("effective"))
    earned: set[int] = set()
    if effective:
        for strategy in effective:
            index = best_criterion(strategy, criteria)
            if index is not None and applies(response, strategy):
                earned.add(index)
    else:
        for index, criterion in enumerate(criteria):
            wanted = _words(str(criterion.get("check", "")))
            if wanted and len(wanted & _words(response)) / len(wanted) >= CHECK_RECALL:
                earned.add(index)
    scores = []
    for index, criterion in enumerate(criteria):
        held = index in earned
        if rng.random() < knobs.error_rate:
            held = not held
        scores.append(
            {
                "criterion_id": criterion.get("id"),
                "criterion_name": criterion.get("name", ""),
                "evidence": "applies the strategy behind this criterion" if index in earned else "not addressed",
                "score": int(held),
            }
        )
    total = sum(s["score"] for s in scores)
    return orjson.dumps(
        {
            "criteria_scores": scores,
            "n_criteria": len(scores),
            "total_score": total,
            "any_satisfied": total > 0,
            "overall_feedback": "scored by the simulator from the strategies the response applies",
        }
    ).decode()


@sim_task("judge", "case_deescalation")
def case_deescalation(request: ChatRequest, rng: random.Random, knobs: Any) -> str:
    if rng.random() < knobs.invalid_rate:
        return "The student seems calmer."
    turns = _strings(request.context.data.get("student_after"))
    calm = [any(marker in text.lower() for marker in CALM_MARKERS) for text in turns]
    deescalated = bool(calm) and calm[-1]
    if rng.random() < knobs.error_rate:
        deescalated = not deescalated
    first = next((i + 1 for i, c in enumerate(calm) if c), None)
    return orjson.dumps(
        {
            "deescalated": deescalated,
            "turn": first if deescalated else None,
            "rationale": "scored by the simulator from calm markers in the student's turns",
        }
    ).decode()
