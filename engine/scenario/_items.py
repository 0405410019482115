"""Items are the questions episodes are built around; sources turn files into items."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.core._errors import ScenarioError
from engine.core._inputs import load_yaml_file
from engine.core._registry import Registry
from engine.scenario._intake import CountedItems, Intake

__all__ = ("ITEM_SOURCES", "Item", "ItemBank", "ItemSource", "load_item_bank")


class Item(BaseModel):
    """One question with its reference answer.

    `fixed` pins condition factors for this item (a replayed SafeTutors script belongs to one risk dimension
    and one format); `data` carries source-specific material such as scripted student utterances.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    domain: str
    question: str
    answer: str
    unit: str | None = None
    solution: str = ""
    fixed: dict[str, str] = Field(default_factory=dict)
    data: dict[str, Any] = Field(default_factory=dict)


class ItemSource(Protocol):
    """Reads items from a path (resolved against the scenario's folder) with source-specific options."""

    def __call__(self, path: Path, options: dict[str, Any], /) -> list[Item]: ...


ITEM_SOURCES: Registry[ItemSource] = Registry("item source", "item_sources")


class _Bank(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[Item]


class ItemBank:
    """simrun's own YAML item bank format: `items: [{id, domain, question, answer, unit?, solution}]`."""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        domains: list[str] | None = None
        """Keep only items of these domains."""
        limit: int | None = Field(default=None, ge=1)
        """Keep the first N items of each domain."""

    def __call__(self, path: Path, options: dict[str, Any], /) -> list[Item]:
        chosen = self.Options.model_validate(options)
        data = load_yaml_file(path, "item bank")
        try:
            bank = _Bank.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)[:5]
            )
            raise ScenarioError(f"{path}: invalid item bank: {problems}") from None
        kept: list[Item] = []
        per_domain: dict[str, int] = {}
        skipped: dict[str, int] = {}
        for item in bank.items:
            if chosen.domains is not None and item.domain not in chosen.domains:
                skipped["domain not selected"] = skipped.get("domain not selected", 0) + 1
                continue
            per_domain[item.domain] = per_domain.get(item.domain, 0) + 1
            if chosen.limit is None or per_domain[item.domain] <= chosen.limit:
                kept.append(item)
            else:
                skipped["past the source's limit per domain"] = skipped.get("past the source's limit per domain", 0) + 1
        return CountedItems(kept, Intake(read=len(bank.items), skipped=skipped))


load_item_bank = ItemBank()
ITEM_SOURCES.add("bank", load_item_bank)
