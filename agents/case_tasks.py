"""What a case asks the tutor: the open task's prompt (with retrieved reference strategies), the MCQs built from
the strategies of a case and of unrelated cases, and how a reply names its option. See `agents.cases`."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from engine import Item, parse_json_object
from personas.case_retrieval import tfidf_similarity
from personas.cases import Case, ResponseType

__all__ = (
    "CASE_TASKS",
    "DEFAULT_SYSTEM",
    "DISTRACTOR_MAX_SIMILARITY",
    "LETTERS",
    "MCQ",
    "CaseTask",
    "Reference",
    "build_mcq",
    "ordered_mcq",
    "parse_choice",
    "reference_strategies",
    "task_prompt",
)

CaseTask = Literal["open", "mcq4", "binary", "interactive"]
CASE_TASKS: tuple[CaseTask, ...] = ("open", "mcq4", "binary", "interactive")
LETTERS = "ABCD"

DEFAULT_SYSTEM = (
    "You are an experienced tutor who supports students with learning, emotional and behavioural difficulties. "
    "You respond to the particular student in front of you, not to a generic one."
)
_IMMEDIATE = (
    "The student has just shown challenging behaviour. What would you, as the tutor, say or do right now? "
    "Give your direct response for this moment in two or three sentences. Do not describe a multi-step plan or "
    "what you will do later. Output only your response."
)
_LONG_TERM = (
    "The student has just shown challenging behaviour. Which sustained interventions and support structures "
    "would you put in place for this student over the coming weeks or months? Describe them in two or three "
    "sentences as a plan, not as immediate actions. Output only the plan."
)
_MCQ = (
    "Based on the dialogue, which intervention is most appropriate for this student in this situation, as "
    "{scope}? Reply with one JSON object and nothing else: "
    '{{"answer": "<option letter>", "reasoning": "<one sentence on why it fits this student>"}}'
)
_SCOPE = {"immediate": "the tutor's next move", "long_term": "a plan over the coming weeks"}


def _dialogue(case: Case) -> str:
    return "\n".join(f"{turn.speaker.upper()}: {turn.text}" for turn in case.dialogue)


@dataclass(frozen=True)
class Reference:
    """One retrieved case as a reference prompt lists it: what worked for its student and what failed."""

    case_id: str
    worked: tuple[str, ...]
    failed: tuple[str, ...]


def _effective_key(response: ResponseType) -> str:
    return "immediate_effective" if response == "immediate" else "long_term_effective"


def reference_strategies(item: Item, response: ResponseType) -> list[Reference]:
    """The `references` most similar unrelated cases that worked for `response`, with their failed strategies."""
    k = int(item.data.get("references", 2))
    found: list[Reference] = []
    for near in item.data.get("neighbours", []):
        if len(found) >= k:
            break
        strategies = near.get("strategies", {})
        worked = tuple(str(s) for s in strategies.get(_effective_key(response), []))
        if worked:
            failed = tuple(str(s) for s in strategies.get("ineffective", []))
            found.append(Reference(str(near.get("id")), worked, failed))
    return found


def task_prompt(case: Case, response: ResponseType, references: Sequence[Reference] = ()) -> str:
    """The open-ended task as the tutor reads it: minimal context, dialogue, optional references, instruction;
    or, without references, the dataset's own prompt for the case when it ships one."""
    if not references and case.prompts.get(response):
        return case.prompts[response]
    parts = [f"SITUATION\n{case.minimal_context}", f"DIALOGUE\n{_dialogue(case)}"]
    if references:
        blocks = []
        for number, ref in enumerate(references, 1):
            lines = [f"Similar case {number}", "Worked:", *(f"- {s}" for s in ref.worked)]
            if ref.failed:
                lines += ["Did not work:", *(f"- {s}" for s in ref.failed)]
            blocks.append("\n".join(lines))
        parts.append(
            "REFERENCE\nStrategies documented to have worked or failed for similar but different students, most "
            "similar case first. They are not a script and were not written for this student: adapt, combine or "
            "ignore them as fits.\n\n" + "\n\n".join(blocks)
        )
    parts.append(_IMMEDIATE if response == "immediate" else _LONG_TERM)
    return "\n\n".join(parts)


@dataclass(frozen=True)
class MCQ:
    """A multiple-choice item as shown: options in display order, the correct one's index, and provenance."""

    options: tuple[str, ...]
    correct: int
    source: str
    """`built` (from this case's and its neighbours' strategies) or the dataset's MCQ id."""
    strategy: str = ""
    """The correct option's text: the effective strategy this MCQ tests."""

    @property
    def letters(self) -> str:
        return LETTERS[: len(self.options)]

    def prompt(self, case: Case, response: ResponseType) -> str:
        options = "\n".join(f"{letter}. {text}" for letter, text in zip(self.letters, self.options, strict=True))
        return "\n\n".join(
            [
                f"SITUATION\n{case.minimal_context}",
                f"DIALOGUE\n{_dialogue(case)}",
                f"OPTIONS\n{options}",
                _MCQ.format(scope=_SCOPE[response]),
            ]
        )


DISTRACTOR_MAX_SIMILARITY = 0.5
"""Default ceiling on the TF-IDF cosine between a distractor and the correct option (or another effective
strategy of the case): above it the candidate reads as a rewording of a right answer."""


def _length_gap(a: str, b: str) -> int:
    return abs(len(a.split()) - len(b.split()))


def build_mcq(
    item: Item,
    case: Case,
    response: ResponseType,
    variant: str,
    rng: random.Random,
    *,
    strategy: int = 0,
    max_similarity: float = DISTRACTOR_MAX_SIMILARITY,
) -> MCQ | None:
    """The MCQ for effective strategy `strategy` (0-based), or None when the case lacks the material.

    Options are shuffled with `rng` (the episode's). See the module doc for how distractors are chosen.
    """
    fixed = sorted((m for m in case.mcqs if m.response == response and m.variant == variant), key=lambda m: m.id)
    if fixed:
        if strategy >= len(fixed):
            return None
        chosen = fixed[strategy]
        options, correct, source = list(chosen.options), chosen.correct, chosen.id
    else:
        effective = case.strategies.effective(response)
        if strategy >= len(effective):
            return None
        right = effective[strategy]
        if variant == "binary":
            if not case.strategies.ineffective:
                return None
            wrong = min(case.strategies.ineffective, key=lambda s: (_length_gap(s, right), s))
            options = [right, wrong]
        else:
            found = _distractors(item, right, [s for s in effective if s != right], response, max_similarity)
            if found is None:
                return None
            options = [right, *found]
        correct, source = 0, "built"
    return ordered_mcq(options, source, options[correct], rng, correct=correct)


def ordered_mcq(options: Sequence[str], source: str, strategy: str, rng: random.Random, *, correct: int = 0) -> MCQ:
    """The MCQ whose right option is `options[correct]`, shown in an order shuffled with `rng` (the episode's)."""
    order = list(range(len(options)))
    rng.shuffle(order)
    return MCQ(tuple(options[i] for i in order), order.index(correct), source, strategy)


def _distractors(
    item: Item, right: str, siblings: list[str], response: ResponseType, max_similarity: float
) -> list[str] | None:
    """Three distractors, one per unrelated case, nearest case first; None when fewer than three qualify."""
    pools = [
        [str(s) for s in near.get("strategies", {}).get(_effective_key(response), []) if s != right]
        for near in item.data.get("neighbours", [])
    ]
    candidates = list(dict.fromkeys(s for pool in pools for s in pool))
    if not candidates:
        return None
    texts = [right, *siblings, *candidates]
    similarity = tfidf_similarity(texts)
    answers = range(1 + len(siblings))
    too_close = {
        text
        for j, text in enumerate(texts)
        if j > len(siblings) and any(similarity[a, j] > max_similarity for a in answers)
    }
    chosen: list[str] = []
    for pool in pools:
        usable = [s for s in pool if s not in too_close and s not in chosen]
        if usable:
            chosen.append(min(usable, key=lambda s: (_length_gap(s, right), s)))
        if len(chosen) == 3:
            return chosen
    return None


_JSON_ANSWER = re.compile(r"\W*(?:option\s+)?([A-D])\b.*", re.IGNORECASE | re.DOTALL)
_LETTER = re.compile(r"\b(?:answer|option)\b\W*([A-D])\b|^\W*([A-D])\W*$", re.IGNORECASE | re.MULTILINE)


def parse_choice(text: str, letters: str) -> str | None:
    """The option letter a reply chose: JSON `{"answer": "B"}`, or a bare letter / "answer: B" in prose."""
    try:
        data = parse_json_object(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        found = _JSON_ANSWER.fullmatch(str(data.get("answer", "")).strip())
        letter = found.group(1).upper() if found else None
        return letter if letter is not None and letter in letters else None
    match = _LETTER.search(text)
    if match is None:
        return None
    letter = (match.group(1) or match.group(2)).upper()
    return letter if letter in letters else None
