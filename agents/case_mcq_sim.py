"""How the `sim` judge builds a TutorCaseBench MCQ (`judge / case_mcq_build`, see `agents.case_mcq_build`).

A fixed rule on the request's data, so a run is reproducible and a test can say what to expect:

* **4 options.** A candidate is `too_close` when its content words overlap those of the correct option or of
  another right answer of the case by `TOO_CLOSE` or more (Jaccard), and `impossible` when the item asks for
  an immediate move and the candidate is a plan over time (it names one of `PLAN_WORDS`). The first three
  candidates not rejected, in the order given (nearest case first), are the distractors; when fewer than three
  remain, the first rejected ones fill up and are listed as `forced`.
* **Binary.** The ineffective strategy closest in word count to the correct option (the lowest index on a tie).
* **Rewriting.** None: every option comes back verbatim (`edit_level: none`). The sim cannot rewrite style; a
  real model's rewrite is tested over HTTP with scripted replies.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

from engine import ChatRequest, content_words, sim_task

from .case_mcq_build import BUILD_TASK

__all__ = ("PLAN_WORDS", "TOO_CLOSE", "overlap", "sim_build")

TOO_CLOSE = 0.5
PLAN_WORDS = frozenset({"weeks", "weekly", "months", "monthly", "semester", "term", "daily"})


def overlap(a: str, b: str) -> float:
    """Jaccard overlap of two texts' content words (0 when either has none)."""
    left, right = set(content_words(a)), set(content_words(b))
    return len(left & right) / len(left | right) if left and right else 0.0


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


@sim_task("judge", BUILD_TASK, markers=("CANDIDATES (numbered from 0)", "INEFFECTIVE (numbered from 0)"))
def sim_build(request: ChatRequest, rng: random.Random, knobs: Any) -> str:
    data = request.context.data
    correct = str(data.get("correct", ""))
    candidates = _strings(data.get("candidates"))
    if data.get("variant") == "binary":
        words = len(correct.split())
        pick = min(range(len(candidates)), key=lambda i: (abs(len(candidates[i].split()) - words), i), default=0)
        chosen = candidates[pick] if candidates else ""
        reply: dict[str, Any] = {
            "ineffective": pick,
            "correct_rewritten": correct,
            "ineffective_rewritten": chosen,
            "edit_level": "none",
        }
        return orjson.dumps(reply).decode()
    answers = [correct, *_strings(data.get("siblings"))]
    immediate = data.get("response") == "immediate"
    rejected: list[dict[str, Any]] = []
    for index, text in enumerate(candidates):
        if any(overlap(text, answer) >= TOO_CLOSE for answer in answers):
            rejected.append({"index": index, "reason": "too_close"})
        elif immediate and PLAN_WORDS & set(text.lower().replace(",", " ").replace(".", " ").split()):
            rejected.append({"index": index, "reason": "impossible"})
    out = {r["index"] for r in rejected}
    clean = [i for i in range(len(candidates)) if i not in out]
    forced = [int(r["index"]) for r in rejected][: max(0, 3 - len(clean))]
    picks = (clean + forced)[:3]
    reply = {
        "distractors": picks,
        "rejected": rejected,
        "forced": forced,
        "correct_rewritten": correct,
        "distractors_rewritten": [candidates[i] for i in picks],
        "edit_level": "none",
    }
    return orjson.dumps(reply).decode()
