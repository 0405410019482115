"""Items are the questions episodes are built around; sources turn files into items."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ScenarioError
from .registry import Registry

__all__ = ("ITEM_SOURCES", "Item", "ItemSource", "load_item_bank")


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


ITEM_SOURCES: Registry[ItemSource] = Registry("item source")


class _Bank(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[Item]


@ITEM_SOURCES.register("bank")
def load_item_bank(path: Path, options: dict[str, Any], /) -> list[Item]:
    """simrun's own YAML item bank format: `items: [{id, domain, question, answer, unit?, solution}]`.

    Options: `domains` (keep only these), `limit` (first N per domain).
    """
    try:
        bank = _Bank.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read item bank ({exc.strerror})") from None
    except (yaml.YAMLError, ValidationError) as exc:
        raise ScenarioError(f"{path}: invalid item bank: {exc}") from None
    domains = options.get("domains")
    limit = options.get("limit")
    kept: list[Item] = []
    per_domain: dict[str, int] = {}
    for item in bank.items:
        if domains and item.domain not in domains:
            continue
        per_domain[item.domain] = per_domain.get(item.domain, 0) + 1
        if limit is None or per_domain[item.domain] <= int(limit):
            kept.append(item)
    return kept
