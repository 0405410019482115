"""The SafeTutors risk taxonomy as data, and a reader for the SafeTutors JSONL release.

Dimension and sub-risk names are SafeTutors' labels; descriptions, pressure ladders and requests are ours.
The public files spell names inconsistently (en dashes, a Cyrillic letter, trailing newlines, casing), so
names are matched after NFKC normalisation, case folding and a small alias map.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field

from engine import ITEM_SOURCES, CountedItems, Intake, Item, ScenarioError, read_input_bytes

__all__ = (
    "Dimension",
    "SubRisk",
    "Taxonomy",
    "load_safetutors",
    "normalise_name",
    "taxonomy",
)

_TAXONOMY_FILE = Path(__file__).with_name("safetutors_taxonomy.yaml")
_LOOKALIKES = str.maketrans({"С": "C", "с": "c", "–": "-", "—": "-", "’": "'"})
_PLAIN_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_DOMAINS = {"math": "mathematics", "physics": "physics", "chem": "chemistry"}


def normalise_name(name: str) -> str:
    """A comparison key for taxonomy names as the public data spells them."""
    text = " ".join(unicodedata.normalize("NFKC", name).translate(_LOOKALIKES).casefold().split())
    return text.removesuffix(" risk")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SubRisk(_Model):
    name: str
    description: str


class Dimension(_Model):
    id: str
    name: str
    aliases: list[str] = Field(default_factory=list)
    description: str
    objective: str
    subrisks: list[SubRisk]
    pressure: list[str] = Field(min_length=1)
    """An escalation ladder, mildest first: the simulated student's pressure lines."""
    single_turn_requests: list[str] = Field(min_length=1)


class Taxonomy(_Model):
    dimensions: list[Dimension]

    def dimension(self, key: str) -> Dimension:
        """Look a dimension up by id, name or any spelling of its name in the public data."""
        wanted = normalise_name(key)
        for dimension in self.dimensions:
            names = [dimension.id.replace("_", " "), dimension.name, *dimension.aliases]
            if key == dimension.id or wanted in {normalise_name(name) for name in names}:
                return dimension
        raise KeyError(key)

    def subrisk(self, dimension: Dimension, name: str) -> SubRisk | None:
        wanted = normalise_name(name)
        return next((s for s in dimension.subrisks if normalise_name(s.name) == wanted), None)

    @property
    def ids(self) -> list[str]:
        return [dimension.id for dimension in self.dimensions]


@cache
def taxonomy() -> Taxonomy:
    """The built-in taxonomy (11 dimensions), read once."""
    return Taxonomy.model_validate(yaml.safe_load(_TAXONOMY_FILE.read_text(encoding="utf-8")))


def _final_answer(solution: str) -> str:
    """GSM8K-style solutions end with the bare answer on the last line; other solutions have no short answer."""
    last = solution.strip().splitlines()[-1].strip().replace(",", "") if solution.strip() else ""
    return last if _PLAIN_NUMBER.match(last) else ""


def load_safetutors(path: Path, options: dict[str, Any], /) -> list[Item]:
    """Items from a SafeTutors `{math,physics,chem}_{single,multi}_combined.jsonl` file.

    Each record becomes an item pinned to its dimension and format whose `data.script` holds the student's
    utterances (one for single-turn records), ready for the `scripted` strategy. Options: `limit` (first N).
    """
    stem = path.name.split("_")[0]
    domain = options.get("domain") or _DOMAINS.get(stem, stem)
    fmt = "single" if "_single" in path.name else "multi"
    limit = options.get("limit")
    tax = taxonomy()
    items: list[Item] = []
    intake = Intake()
    lines = read_input_bytes(path, "SafeTutors file").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            intake.skip("blank line")
            continue
        intake.read = (intake.read or 0) + 1
        if limit is not None and len(items) >= int(limit):
            intake.skip("past the source's limit")
            continue
        try:
            record = orjson.loads(line)
            dimension = tax.dimension(record["parent_risk"])
            script = [record["modified_question"]] if fmt == "single" else record["student_utterances"]
            if not script or not isinstance(script, list) or not all(isinstance(u, str) and u for u in script):
                raise TypeError("the student's utterances must be a non-empty list of strings")
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise ScenarioError(f"{path}:{number}: not a SafeTutors {fmt}-turn record ({exc!r})") from None
        subrisk = tax.subrisk(dimension, str(record.get("subrisk_name", "")))
        items.append(
            Item(
                id=f"st-{stem}-{fmt}-{number:03d}",
                domain=domain,
                question=script[0],
                answer=_final_answer(str(record.get("solution", ""))),
                solution=str(record.get("solution", "")),
                fixed={"dimension": dimension.id, "format": fmt},
                data={
                    "script": script,
                    "subrisk": subrisk.name if subrisk else str(record.get("subrisk_name", "")).strip(),
                    "student_profile": record.get("student_profile"),
                },
            )
        )
    return CountedItems(items, intake)


class SafeTutorsSource:
    """Item source `safetutors`: `load_safetutors`, with the public dataset named for a user who lacks it."""

    dataset = "SafeTutors (https://github.com/RadiantCrystal/SafeTutors, its *_combined.jsonl files)"

    def __call__(self, path: Path, options: dict[str, Any], /) -> list[Item]:
        return load_safetutors(path, options)


ITEM_SOURCES.add("safetutors", SafeTutorsSource())
