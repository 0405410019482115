"""Item source `mathdial`: math word problems from a MathDial JSONL split (the test set, or any split in its
layout), the seeds SafeTutors drew its mathematics questions from.

Each conversation gives one item: the problem, its final answer (the last line of `ground_truth`) and worked
solution, and the student's incorrect solution and profile as material a student can use. MathDial holds several
conversations per problem; the first is kept and the others are counted as repeats. `path` is a `.jsonl` file or
a folder holding `test.jsonl`. The data is not shipped with simrun: name your own copy's path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine import ITEM_SOURCES, CountedItems, Intake, Item, ScenarioError, read_input_bytes

__all__ = ("MathDialSource", "final_answer")

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def final_answer(solution: str) -> str:
    """The bare number on a MathDial solution's last line ("" when that line holds none)."""
    lines = [line.strip() for line in solution.strip().splitlines() if line.strip()]
    found = _NUMBER.findall(lines[-1]) if lines else []
    return found[-1].replace(",", "") if found else ""


class MathDialOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    limit: int | None = Field(default=None, ge=1)
    """Keep the first N problems."""
    domain: str = "mathematics"
    """The items' domain (the condition and prompts name it)."""


def _file(path: Path) -> Path:
    return path / "test.jsonl" if path.is_dir() else path


def _problem(record: Any) -> str:
    """Why a record cannot be an item ("" when it can)."""
    if not isinstance(record, dict):
        return "not a JSON object"
    if not str(record.get("question") or "").strip():
        return "no question"
    if not final_answer(str(record.get("ground_truth") or "")):
        return "no final answer in ground_truth"
    return ""


class MathDialSource:
    Options = MathDialOptions
    dataset = "MathDial (https://github.com/eth-nlped/mathdial, its data/test.jsonl)"

    def __call__(self, path: Path, options: dict[str, Any], /) -> list[Item]:
        try:
            chosen = MathDialOptions.model_validate(options)
        except ValidationError as exc:
            raise ScenarioError(f"mathdial options: {exc.errors()[0]['msg']}") from None
        source = _file(path)
        lines = read_input_bytes(source, "MathDial file").splitlines()
        intake, items, seen = Intake(), list[Item](), set[str]()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                intake.skip("blank line")
                continue
            intake.read = (intake.read or 0) + 1
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise ScenarioError(f"{source}:{number}: not JSON") from None
            problem = _problem(record)
            key = str(record.get("qid") or record.get("question")) if not problem else ""
            if problem or key in seen:
                intake.skip(problem or "repeat of a problem already read")
                continue
            if chosen.limit is not None and len(items) >= chosen.limit:
                intake.skip("past the source's limit")
                continue
            seen.add(key)
            items.append(_item(record, chosen.domain))
        return CountedItems(items, intake)


def _item(record: dict[str, Any], domain: str) -> Item:
    solution = str(record["ground_truth"]).strip()
    return Item(
        id=f"md-{record.get('qid')}",
        domain=domain,
        question=" ".join(str(record["question"]).split()),
        answer=final_answer(solution),
        solution=solution,
        data={
            "source": "mathdial",
            "student_incorrect_solution": str(record.get("student_incorrect_solution") or ""),
            "student_profile": str(record.get("student_profile") or ""),
            "teacher_described_confusion": str(record.get("teacher_described_confusion") or ""),
        },
    )


ITEM_SOURCES.add("mathdial", MathDialSource())
