"""`judge_agreement` in every summary: how far the judge specs of a run agree with each other, kind-agnostic.

Computed from the records' judgments alone (vote `i` came from judge spec `i % specs`, the order
`collect_votes` asks them in); see `engine.stats._agreement.judge_agreement` for the statistics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.core._format import format_estimate
from engine.core._records import EpisodeRecord
from engine.core._seeds import derive_seed
from engine.report._blocks import SIMRUN_ADDITION, Block, Note, Section, Table
from engine.stats._agreement import (
    AgreementEstimate,
    JudgeAgreement,
    PairKappa,
    judge_agreement,
    spec_labels,
    voted_units,
)

__all__ = ("judge_agreement_blocks", "run_judge_agreement")


def _judge_specs(manifest: Mapping[str, Any]) -> list[Mapping[str, Any] | str]:
    resolved = ((manifest.get("scenario") or {}).get("models") or {}).get("judge")
    if isinstance(resolved, list) and resolved:
        return [s if isinstance(s, Mapping | str) else str(s) for s in resolved]
    named = (manifest.get("models") or {}).get("judge") or []
    return [str(m) for m in (named if isinstance(named, list) else [named])]


def run_judge_agreement(records: Sequence[EpisodeRecord], manifest: Mapping[str, Any]) -> JudgeAgreement:
    """Agreement between the run's judge specs over the ok records' judgments (clusters: episodes)."""
    labels = spec_labels(_judge_specs(manifest))
    if len(labels) < 2:
        return judge_agreement([], labels, seed=0)
    units = voted_units(
        ((record.id, judgment) for record in records if record.status == "ok" for judgment in record.judgments),
        len(labels),
    )
    return judge_agreement(units, labels, seed=derive_seed(manifest.get("seed") or 0, "judge_agreement", bits=32))


def _value(cell: AgreementEstimate | PairKappa) -> str:
    if cell.value is None:
        return "not estimable"
    return format_estimate(cell.value, cell.low, cell.high)


def _rows(block: JudgeAgreement) -> tuple[tuple[str, str, int, str, str], ...]:
    rows = []
    for metric in block.metrics:
        kappas = "; ".join(f"{' ~ '.join(k.judges)}: {_value(k)}" for k in metric.kappa)
        rows.append((metric.metric, metric.level, metric.units, _value(metric.alpha), kappas))
    return tuple(rows)


_INTRO = (
    "Judge specs as coders, judged units as units: Krippendorff's α over every spec's vote and Cohen's κ per pair, "
    "95% intervals from resampling whole episodes."
)


_PROVENANCE = f"{SIMRUN_ADDITION} (the papers compare their judges with human labels, not with each other)"


def judge_agreement_blocks(found: JudgeAgreement | Mapping[str, Any] | None) -> list[Block]:
    """The report section every kind shows in report.md, report.html and on the terminal; none when fewer than
    two judge specs voted. `found` is the result, or summary.json's block as read back."""
    if not found:
        return []
    block = found if isinstance(found, JudgeAgreement) else JudgeAgreement.model_validate(found)
    if len(block.judges) < 2:
        return []
    table = Table(
        ("metric", "level", "units", "α [95% CI]", "pairwise κ [95% CI]"),
        _rows(block),
        title="Agreement between judge models",
        key="judge-agreement",
        left=("level", "pairwise κ [95% CI]"),
    )
    intro = Note(_INTRO + " Judges: " + ", ".join(f"`{j}`" for j in block.judges) + ".")
    return [Section("Agreement between judge models", (intro, table), key="judge-agreement", provenance=_PROVENANCE)]
