"""`simrun compare RUN_A RUN_B [...]`: several runs side by side, paired episode by episode.

Episodes are matched by item, condition and replicate, so each matched episode is a pair and item difficulty
cancels out, as in the fairness tests. Two runs get a paired Wilcoxon test with the rank-biserial r and its
bootstrap interval per metric; three or more get Friedman, then Bonferroni-corrected pairs (engine/paired.py
for both). Runs of different kinds, or with no episode in common, are stated to be not comparable. The
reports (compare.md, compare.html, the console headline) are engine/tools/compare/_report.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.core._errors import ScenarioError
from engine.core._format import nanmean
from engine.core._records import EpisodeRecord
from engine.core._seeds import derive_seed
from engine.report._sections import EpisodeScores, EpisodeVerdict, default_scores, default_verdict
from engine.runtime._modes import mode_of
from engine.runtime._plugins import SUMMARIZERS
from engine.runtime._rundir import RunDir
from engine.scenario._spec import measured
from engine.stats._contrast import ContrastRow
from engine.stats._families import contrast_rows, correct_family

__all__ = ("ALL", "FAMILY_Q", "Comparison", "compare_runs")

ALL = "all conditions"
MAX_CHANGED_VERDICTS = 200
FAMILY_METHOD = "bh"
FAMILY_Q = 0.05
"""Every contrast of a comparison is one family, corrected together: a finding is adjusted p ≤ q."""
EpisodeKey = tuple[str, tuple[tuple[str, str], ...], int]


@dataclass
class RunSide:
    label: str
    path: Path
    manifest: dict[str, Any]
    records: dict[EpisodeKey, EpisodeRecord]
    errors: int
    warnings: list[str] = field(default_factory=list)

    def header(self) -> dict[str, Any]:
        models = self.manifest.get("models") or {}
        return {
            "label": self.label,
            "run": self.path.name,
            "scenario": (self.manifest.get("scenario") or {}).get("name"),
            "kind": self.manifest.get("kind"),
            "scenario_hash": self.manifest.get("scenario_hash"),
            "seed": self.manifest.get("seed"),
            "status": self.manifest.get("status"),
            "ok": len(self.records),
            "error": self.errors,
            "models": {k: v if isinstance(v, str) or v is None else ", ".join(v) for k, v in models.items()},
            "simulated": "sim" in (self.manifest.get("providers") or []),
        }


class CompareContrast(ContrastRow):
    """One contrast of a comparison: a metric in one condition (or all), with each run's mean."""

    metric: str
    condition: str
    means: dict[str, float | None]


@dataclass
class Comparison:
    runs: list[dict[str, Any]]
    comparable: bool
    statements: list[str]
    matched: int
    metrics: list[str] = field(default_factory=list)
    contrasts: list[CompareContrast] = field(default_factory=list)
    changed_verdicts: list[dict[str, Any]] = field(default_factory=list)
    changed_verdicts_total: int = 0
    warnings: list[str] = field(default_factory=list)
    """What reading the runs' records noticed (e.g. a torn last line), `path: warning`; not in compare.json."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "comparable": self.comparable,
            "statements": self.statements,
            "matched": self.matched,
            "metrics": self.metrics,
            "contrasts": [c.model_dump(mode="json") for c in self.contrasts],
            "changed_verdicts": self.changed_verdicts,
            "changed_verdicts_total": self.changed_verdicts_total,
        }


def _key(record: EpisodeRecord) -> EpisodeKey:
    return (record.item_id, tuple(sorted(record.condition.items())), record.replicate)


def _condition_text(key: EpisodeKey) -> str:
    return " · ".join(f"{k}={v}" for k, v in key[1]) or "(none)"


def _load(label: str, path: Path) -> RunSide:
    """A run's current records (the last per planned id; see `RunDir.current_records`)."""
    run = RunDir(path)
    manifest = run.read_manifest()
    mode = mode_of(manifest)
    if mode is not None:
        raise ScenarioError(f"{path} is the run directory of {mode.noun}; compare takes scenario runs")
    current = run.current_records(manifest=manifest)
    records: dict[EpisodeKey, EpisodeRecord] = {}
    errors = 0
    if len({record.tutor for record in current.records}) > 1:
        raise ScenarioError(
            f"{path} holds a study of several tutors: its report compares them; to add runs of other tutors, "
            "join them with `simrun compare --tutors`"
        )
    for record in current.records:
        if record.status == "ok":
            records[_key(record)] = record
        else:
            errors += 1
    return RunSide(label, path, manifest, records, errors, [f"{path}: {w}" for w in current.warnings])


_ABSENT = object()


def _changed(old: Any, new: Any, prefix: str = "") -> tuple[list[str], list[str]]:
    """(keys whose values differ, keys present on one side only — written by another simrun version)."""
    if old is _ABSENT or new is _ABSENT:
        return [], [prefix.rstrip(".")]
    if isinstance(old, dict) and isinstance(new, dict):
        pairs = [
            (f"{prefix}{key}.", old.get(key, _ABSENT), new.get(key, _ABSENT)) for key in sorted(set(old) | set(new))
        ]
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        pairs = [(f"{prefix}{index}.", a, b) for index, (a, b) in enumerate(zip(old, new, strict=True))]
    else:
        return ([] if old == new else [prefix.rstrip(".")]), []
    differ: list[str] = []
    one_sided: list[str] = []
    for path, a, b in pairs:
        d, o = _changed(a, b, path)
        differ += d
        one_sided += o
    return differ, one_sided


def _statements(sides: Sequence[RunSide], matched: int) -> tuple[bool, list[str]]:
    base = sides[0]
    notes: list[str] = []
    kinds = {side.manifest.get("kind") for side in sides}
    if len(kinds) > 1:
        return False, [f"Not comparable: the runs are of different scenario kinds ({', '.join(map(str, kinds))})."]
    if matched == 0:
        return False, ["Not comparable: no episode matches by item, condition and replicate (different plans)."]
    for side in sides[1:]:
        if side.manifest.get("scenario_hash") == base.manifest.get("scenario_hash"):
            notes.append(
                f"{side.label} and {base.label} have the same scenario hash: they measure the same thing, so "
                "differences are run-to-run variation (none at all on the deterministic sim provider)."
            )
            continue
        differ, one_sided = _changed(
            measured(base.manifest.get("scenario") or {}), measured(side.manifest.get("scenario") or {})
        )
        changed = [key for key in differ if key not in ("name", "description")]
        notes.append(
            f"{side.label} and {base.label} have different scenario hashes; they differ in: "
            f"{', '.join(changed) or 'no setting both runs record'}. The paired differences measure the effect of "
            "these changes."
        )
        if one_sided:
            notes.append(
                f"Settings recorded by only one of {side.label} and {base.label} (written by different simrun "
                f"versions): {', '.join(one_sided)}."
            )
        if any(k.startswith(("judges", "models.judge", "judge_votes")) for k in changed):
            notes.append(
                f"Caution: the judges differ between {side.label} and {base.label}, so a difference can come from the "
                "judge rather than the tutor."
            )
    for side in sides:
        unmatched = len(side.records) - matched
        if unmatched:
            notes.append(
                f"Plans differ: {unmatched} ok episodes of {side.label} have no match in every other run and are left "
                f"out; the comparison uses the {matched} matched episodes."
            )
        if side.errors:
            notes.append(f"{side.label} has {side.errors} error episodes; they are left out.")
    return True, notes


def _scores(summarizer: object, record: EpisodeRecord) -> Mapping[str, float]:
    if isinstance(summarizer, EpisodeScores):
        return summarizer.episode_scores(record)
    return default_scores(record)


def _verdict(summarizer: object, record: EpisodeRecord) -> str:
    return summarizer.episode_verdict(record) if isinstance(summarizer, EpisodeVerdict) else default_verdict(record)


def _rows_for(
    labels: Sequence[str], columns: Mapping[str, list[float]], *, metric: str, condition: str, seed: int
) -> list[CompareContrast]:
    means = {label: nanmean(values) for label, values in columns.items()}
    cell_seed = derive_seed(seed, "compare", metric, condition)
    # two runs: the later against the first, so a positive difference reads "B is higher"
    family = {label: columns[label] for label in (reversed(labels) if len(labels) == 2 else labels)}
    rows = contrast_rows(family, seed=cell_seed)
    return [CompareContrast(metric=metric, condition=condition, means=means, **row.model_dump()) for row in rows]


def compare_runs(paths: Sequence[Path]) -> Comparison:
    """Match the runs' ok episodes and compute the paired differences; runs are labelled A, B, C, ..."""
    if len(paths) < 2:
        raise ScenarioError("compare needs at least two run directories")
    if len(paths) > 26:
        raise ScenarioError("compare takes at most 26 run directories")
    sides = [_load(chr(ord("A") + i), Path(path)) for i, path in enumerate(paths)]
    keys = sorted(set.intersection(*(set(side.records) for side in sides)))
    comparable, statements = _statements(sides, len(keys))
    result = Comparison([side.header() for side in sides], comparable, statements, len(keys))
    result.warnings = [warning for side in sides for warning in side.warnings]
    if not comparable:
        return result
    summarizer = SUMMARIZERS.get(str(sides[0].manifest.get("kind")))
    scores = [{key: _scores(summarizer, side.records[key]) for key in keys} for side in sides]
    metrics: list[str] = []
    for table_ in scores:
        for values in table_.values():
            metrics += [m for m in values if m not in metrics]
    result.metrics = metrics
    seed = int(sides[0].manifest.get("seed") or 0)
    labels = [side.label for side in sides]
    groups: dict[str, list[EpisodeKey]] = {ALL: keys}
    for key in keys:
        groups.setdefault(_condition_text(key), []).append(key)
    for condition, members in groups.items():
        for metric in metrics:
            columns = {
                side.label: [float(scores[i][k].get(metric, math.nan)) for k in members] for i, side in enumerate(sides)
            }
            if all(math.isnan(v) for values in columns.values() for v in values):
                continue  # the metric does not apply in this condition (e.g. backtracks of single-turn dialogues)
            result.contrasts += _rows_for(labels, columns, metric=metric, condition=condition, seed=seed)
    result.contrasts = correct_family(result.contrasts, method=FAMILY_METHOD, q=FAMILY_Q, family="comparison")
    changed = []
    for key in keys:
        verdicts = [_verdict(summarizer, side.records[key]) for side in sides]
        if len(set(verdicts)) > 1:
            changed.append({"episode": sides[0].records[key].id, **dict(zip(labels, verdicts, strict=True))})
    result.changed_verdicts_total = len(changed)
    result.changed_verdicts = changed[:MAX_CHANGED_VERDICTS]
    return result
