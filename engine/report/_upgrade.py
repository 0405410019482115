"""Reading a summary.json written before contrast rows were typed once (docs/run-directory.md, "Migration").

Older rows carried one `p_adjusted` whose meaning depended on the kind, and `violation` for the verdict. The
meaning is recoverable from the row itself: a row with a `family` key (fairness) held the family-corrected p
there; any other row held Bonferroni within Friedman for a pair after the omnibus test, and the test's own p (or
nothing) otherwise. Everything else of an old file reads unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ("upgrade_summary",)

_BONFERRONI_TESTS = ("wilcoxon (Bonferroni)", "pairwise")


def _old_contrast(row: Mapping[str, Any]) -> bool:
    return "violation" in row and "status" in row and "a" in row and "b" in row and "finding" not in row


def _contrast(row: Mapping[str, Any], method: str | None) -> dict[str, Any]:
    found = {key: value for key, value in row.items() if key not in ("violation", "p_adjusted")}
    found["finding"] = bool(row["violation"])
    found.setdefault("test", "wilcoxon")
    adjusted = row.get("p_adjusted")
    if "family" in row:  # fairness: p_adjusted was the family's p
        found["p_family"] = adjusted if row.get("family") is not None else None
        found["family_method"] = method if row.get("family") is not None else None
    elif found["test"] in _BONFERRONI_TESTS:
        found["p_within"] = adjusted
    if found.get("p_family") is not None and "family" not in row:
        found["family"] = "report"
    return found


def _upgrade(value: Any, method: str | None) -> Any:
    if isinstance(value, list):
        return [_upgrade(item, method) for item in value]
    if not isinstance(value, Mapping):
        return value
    if _old_contrast(value):
        return _contrast(value, method)
    correction = value.get("correction")
    if isinstance(correction, Mapping) and isinstance(correction.get("method"), str):
        method = correction["method"]
    found: dict[str, Any] = {}
    for key, item in value.items():
        if key == "violations" and "contrasts" in value and "findings" not in value:
            key = "findings"  # fairness's list of findings
        found[key] = _upgrade(item, method)
    if "p_adjusted" in found and "metric" in found and "a" not in found:
        found["p_family"] = found.pop("p_adjusted")  # a fairness mechanism's finding, a tutor omnibus row
    return found


def upgrade_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The summary in today's keys; a summary already in them comes back equal."""
    upgraded = _upgrade(summary, None)
    assert isinstance(upgraded, dict)
    return upgraded
