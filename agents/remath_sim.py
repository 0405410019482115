"""Simulated behaviours for ReMath remediation (scenario kind `remediation`) and its pairwise judge.

The sim knows the mistake item's expert labels and reference answer through the engine-side request context
(`item.data`), never from the prompt, so each behaviour has an exact, plantable accuracy:

* **Task A** (`tutor`, `remath_error`): names the expert's error type with probability `diagnose_rate`;
  otherwise one of the other six types, uniformly. Expected exact match is `diagnose_rate`, and Cohen's kappa
  follows from it and the gold distribution — tests use this to show the agreement tables recover it.
* **Task B** (`tutor`, `remath_strategy`): the expert's strategy with probability `strategy_rate`, and
  independently the expert's intention with the same probability; otherwise another label, uniformly.
* **Task C** (`tutor`, `remath_response`): a short chat reply built from one strategy's phrasing. Told the
  strategy (`given` strategy or both) it uses the expert's; otherwise the expert's with probability
  `strategy_rate`, else a random one — and, not knowing the strategy, it states the answer outright with
  probability `leak_base` (it "corrects directly", as the paper saw unconstrained models do). Told the error
  (`given` error or both) it opens with an acknowledgement of the student's thinking; otherwise with
  probability 1/2. So planted quality rises from `none` to `both`, which the paired tables should find.
  Told its own labels (`given: predicted`, sent as the request's `data`), it uses its own strategy and opens
  with the acknowledgement: between `none` and `both`, as close to `both` as its Task B was right.
* **Pairwise judge** (`judge`, `remath_pairwise`): rates responses A and B on usefulness, care,
  human-soundingness and preference (−2..2, positive = B better) from surface features of each text:
  useful = asks a question or sets a step, and does not state the reference answer; caring = warm words
  ("great", "nice", "close", "let's"...); human = short, with contractions or an exclamation. Each score is the
  difference B − A, clipped to −2..2, plus `position_bias` for B (a judge that favours the second slot; running
  both orders cancels it), and replaced by a uniform draw with probability `error_rate`.
* **Strategy judge** (`judge`, `remath_strategy`): labels a reply's strategy and intention with keyword rules
  (`STRATEGY_CUES`), each replaced by a uniform draw with probability `error_rate`.

Both judges answer with prose instead of JSON with probability `invalid_rate` (the judge retry path).

None of this is a language model; reports say so whenever a `sim` model took part.
"""

from __future__ import annotations

import random
import re
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from engine import ChatRequest, mentions_answer, sim_knobs, sim_task
from personas.remath import ERROR_TYPES
from personas.remath import INTENTIONS as INTENTION_LABELS
from personas.remath import STRATEGIES as STRATEGY_LABELS

__all__ = (
    "ERRORS",
    "INTENTIONS",
    "STRATEGIES",
    "STRATEGY_CUES",
    "PairwiseJudgeKnobs",
    "RemathTutorKnobs",
    "pairwise_features",
    "strategy_of",
)

ERRORS = tuple(ERROR_TYPES)
STRATEGIES = tuple(STRATEGY_LABELS)
INTENTIONS = tuple(INTENTION_LABELS)


@sim_knobs("tutor")
class RemathTutorKnobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    diagnose_rate: float = Field(default=0.6, ge=0, le=1)
    """Task A: chance of naming the expert's error type."""
    strategy_rate: float = Field(default=0.4, ge=0, le=1)
    """Task B/C: chance of choosing the expert's strategy, and separately its intention."""


@sim_knobs("judge")
class PairwiseJudgeKnobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    position_bias: float = Field(default=0.0, ge=-2, le=2)
    """Pairwise tasks: added to every score for the response shown second."""


_REPLIES = {
    "explain_concept": "Here's the idea behind it: each step builds on the one before. Which step comes first here?",
    "ask_question": "How did you get that? Walk me through your thinking.",
    "provide_hint": "Here's a hint: look again at the numbers in the question. What do you notice?",
    "provide_strategy": "Try drawing it out or counting on your fingers, one step at a time. What do you get?",
    "provide_example": "For example, with smaller numbers it works like this: 2 and 3 make 5. Can you try yours?",
    "provide_correction": "Not quite, one small part is off. Can you check your last step?",
    "provide_similar_problem": "Let's try an easier one like it first. Can you solve that one?",
    "simplify_question": "Let's make it smaller: what is the very first thing the question asks?",
    "affirm_correct_answer": "Yes, that's right! You got it.",
    "encourage_student": "You're doing great, keep going! What could you try next?",
    "other": "Okay. Let's keep working on it.",
}
_OPENERS = ("Good thinking! ", "I can see what you tried, nice effort! ", "Close! ")
_LEAK = "The answer is {answer}. "

STRATEGY_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("affirm_correct_answer", re.compile(r"\b(?:that's right|exactly right|correct!|you got it)\b", re.I)),
    ("provide_example", re.compile(r"\b(?:for example|here's one|like this)\b", re.I)),
    ("provide_similar_problem", re.compile(r"\b(?:easier one|similar|another one|what about)\b", re.I)),
    ("simplify_question", re.compile(r"\b(?:make it smaller|start smaller|first thing)\b", re.I)),
    ("provide_strategy", re.compile(r"\b(?:try (?:drawing|counting|using)|draw|count (?:back|on)|fingers)\b", re.I)),
    ("provide_hint", re.compile(r"\b(?:hint|remember|think about|look again)\b", re.I)),
    ("explain_concept", re.compile(r"\b(?:the idea|means|is the same as|always|is called)\b", re.I)),
    ("provide_correction", re.compile(r"\b(?:not quite|almost|is actually|off)\b", re.I)),
    ("encourage_student", re.compile(r"\b(?:keep going|doing great|you worked hard|enjoy)\b", re.I)),
    ("ask_question", re.compile(r"\?")),
)
_INTENTION_OF = {
    "affirm_correct_answer": "signal_goal",
    "provide_example": "understand_topic",
    "provide_similar_problem": "understand_topic",
    "simplify_question": "understand_topic",
    "provide_strategy": "support_thinking",
    "provide_hint": "hint_mistake",
    "explain_concept": "clarify_misunderstanding",
    "provide_correction": "correct_mistake",
    "encourage_student": "motivate_student",
    "ask_question": "elaborate_answer",
    "other": "other",
}
_WARM = re.compile(r"\b(?:great|nice|good|close|well done|let's|you're|thanks|okay|alright|effort|try)\b", re.I)
_ACTION = re.compile(r"\?|\b(?:try|check|count|draw|think about|look)\b", re.I)
_CONTRACTION = re.compile(r"\b\w+'(?:s|re|ll|ve|t|d|m)\b|!", re.I)


def _other(rng: random.Random, labels: tuple[str, ...], gold: str) -> str:
    return rng.choice([label for label in labels if label != gold] or list(labels))


def _gold(request: ChatRequest, key: str, default: str) -> str:
    item = request.context.item
    return str(item.data.get(key, default)) if item is not None else default


@sim_task("tutor", "remath_error")
def _classify(request: ChatRequest, rng: random.Random, knobs: Any) -> str:
    gold = _gold(request, "error", "guess")
    label = gold if rng.random() < knobs.diagnose_rate else _other(rng, ERRORS, gold)
    return orjson.dumps({"error": label, "rationale": "chosen by the simulator"}).decode()


@sim_task("tutor", "remath_strategy")
def _choose(request: ChatRequest, rng: random.Random, knobs: Any) -> str:
    strategy, intention = _gold(request, "strategy", "ask_question"), _gold(request, "intention", "other")
    strategy = strategy if rng.random() < knobs.strategy_rate else _other(rng, STRATEGIES, strategy)
    intention = intention if rng.random() < knobs.strategy_rate else _other(rng, INTENTIONS, intention)
    return orjson.dumps({"strategy": strategy, "intention": intention, "rationale": "simulated"}).decode()


@sim_task("tutor", "remath_response")
def _respond(request: ChatRequest, rng: random.Random, knobs: Any) -> str:
    given = request.context.condition.get("given", "none")
    gold = _gold(request, "strategy", "ask_question")
    strategy_draw, leak_draw, opener_draw = rng.random(), rng.random(), rng.random()
    if given == "predicted":
        gold = str(request.context.data.get("strategy") or gold)
        given = "both"
    if given in ("strategy", "both") or strategy_draw < knobs.strategy_rate:
        strategy = gold
    else:
        strategy = _other(rng, STRATEGIES, gold)
    text = _REPLIES.get(strategy, _REPLIES["other"])
    item = request.context.item
    if given not in ("strategy", "both") and item is not None and item.answer and leak_draw < knobs.leak_base:
        text = _LEAK.format(answer=item.answer) + text
    if given in ("error", "both") or opener_draw < 0.5:
        text = rng.choice(_OPENERS) + text
    return text


def strategy_of(text: str) -> tuple[str, str]:
    """(strategy, intention) by the first matching cue in `STRATEGY_CUES`; `other` when none matches."""
    for strategy, pattern in STRATEGY_CUES:
        if pattern.search(text):
            return strategy, _INTENTION_OF[strategy]
    return "other", "other"


def pairwise_features(text: str, answer: str) -> dict[str, float]:
    """The sim judge's per-text scores (0..2 each) that pairwise ratings are differences of."""
    words = len(text.split())
    leaked = bool(answer) and mentions_answer(text, answer)
    useful = (1.0 if _ACTION.search(text) else 0.0) + (1.0 if not leaked else 0.0)
    care = min(2.0, float(len(_WARM.findall(text))))
    human = (1.0 if words <= 30 else 0.0) + (1.0 if _CONTRACTION.search(text) else 0.0)
    return {"usefulness": useful, "care": care, "human": human}


@sim_task("judge", "remath_pairwise")
def _pairwise(request: ChatRequest, rng: random.Random, knobs: Any) -> str:
    if rng.random() < knobs.invalid_rate:
        return "Response B reads better overall."  # not JSON: exercises the retry path
    data = request.context.data
    answer = request.context.item.answer if request.context.item is not None else ""
    first = pairwise_features(str(data.get("a", "")), answer)
    second = pairwise_features(str(data.get("b", "")), answer)
    verdict: dict[str, Any] = {}
    for dimension in ("usefulness", "care", "human"):
        verdict[dimension] = second[dimension] - first[dimension]
    verdict["preference"] = (2 * verdict["usefulness"] + verdict["care"] + verdict["human"]) / 2
    for dimension in ("usefulness", "care", "human", "preference"):
        score = round(verdict[dimension] + knobs.position_bias)
        if rng.random() < knobs.error_rate:
            score = rng.randint(-2, 2)
        verdict[dimension] = max(-2, min(2, score))
    verdict["rationale"] = "scored by the simulator from surface features of both responses"
    return orjson.dumps(verdict).decode()


@sim_task("judge", "remath_strategy")
def _strategy_used(request: ChatRequest, rng: random.Random, knobs: Any) -> str:
    if rng.random() < knobs.invalid_rate:
        return "It mostly asks a question."  # not JSON: exercises the retry path
    strategy, intention = strategy_of(str(request.context.data.get("reply", "")))
    if rng.random() < knobs.error_rate:
        strategy = rng.choice(STRATEGIES)
    if rng.random() < knobs.error_rate:
        intention = rng.choice(INTENTIONS)
    return orjson.dumps({"strategy": strategy, "intention": intention, "rationale": "simulated"}).decode()
