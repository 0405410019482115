"""What `simrun calibrate` reports, once for calibration.md, the terminal and calibration.html: agreement
with the human labels (with intervals), what was not measured or failed, proxies, agreement between
annotators and between judge models, then one confusion heatmap per judge × dimension.

Confusion matrices put the human label on the rows and the judge's on the columns.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.core._format import format_estimate, format_fixed, format_interval, format_pct
from engine.report._blocks import Block, BlockCell, Bullets, Heatmap, Note, Section, Strong, Table
from engine.tools.calibrate._model import (
    AgreementStats,
    CalibrationReport,
    DimensionRow,
    JudgeAgreementSummary,
    JudgeResult,
)

__all__ = ("agreement_blocks", "confusion_blocks")

_INTRO = (
    "Accuracy, Cohen's κ (quadratic-weighted for ordinal scales), Krippendorff's α (ordinal where the scale is), "
    "with 95% intervals from resampling whole conversations; lenient = labels collapsed (e.g. Yes + To some "
    "extent). Deterministic judges are the baseline an LLM judge must beat. A (proxy) row scores the dimension "
    "from a judge metric that asks a related but different question."
)
_COLUMNS = (
    "judge",
    "dimension",
    "n",
    "no verdict",
    "acc [95% CI]",
    "κ [95% CI]",
    "α [95% CI]",
    "macro-F1",
    "lenient acc",
    "lenient κ",
)


def _f(value: float | None) -> str:
    return format_fixed(value)


def _pct1(value: float | None) -> str:
    return format_pct(value, 1)


def _with_interval(stats: AgreementStats, name: str, *, pct: bool = False) -> str:
    value = stats.value(name)
    shown = format_pct(value) if pct else _f(value)
    bounds = stats.intervals.get(name)
    if value is None or bounds is None or bounds.low is None or bounds.high is None:
        return shown
    if pct:
        return f"{shown} [{format_pct(bounds.low)}, {format_pct(bounds.high)}]"
    return f"{shown} {format_interval(bounds.low, bounds.high)}"


def _row(name: str, data: JudgeResult, row: DimensionRow) -> tuple[BlockCell, ...]:
    exact = row.exact
    kappa = "kappa_quadratic" if row.ordinal else "kappa"
    alpha = "alpha_ordinal" if row.ordinal else "alpha_nominal"
    return (
        f"{name} (deterministic)" if data.deterministic else name,
        row.shown,
        exact.n,
        row.no_verdict,
        _with_interval(exact, "accuracy", pct=True),
        _with_interval(exact, kappa) + (" quad." if row.ordinal else ""),
        _with_interval(exact, alpha) + (" ord." if row.ordinal else ""),
        _f(exact.macro_f1),
        format_pct(row.lenient.accuracy if row.lenient else None),
        _f(row.lenient.kappa if row.lenient else None),
    )


def _measured(report: CalibrationReport) -> list[tuple[str, JudgeResult, DimensionRow]]:
    """Judge × dimension rows with units; one with n = 0 is named as unmeasured, never shown as a result."""
    return [(name, data, row) for name, data in report.judges.items() for row in data.dimensions if row.exact.n]


def _failures(report: CalibrationReport) -> list[str]:
    """One line per failed judge: its failed judgments, then each kind of error with its first message."""
    lines = []
    for name, data in report.judges.items():
        if not data.errors:
            continue
        kinds = "; ".join(f"{kind} ×{e.count}, first: {e.first[:300]}" for kind, e in data.errors_by_kind.items())
        judgments = data.judgments if data.judgments is not None else report.examples
        lines.append(
            f"{name}: {data.errors} of {judgments} judgments failed"
            + (f" ({kinds})" if kinds else "")
            + f" — {data.errors} examples gave a judge or provider error and are left out of every row above"
        )
    return lines


def _notes(report: CalibrationReport) -> list[Block]:
    unmeasured = [f"{n} · {row.dimension}" for n, d in report.judges.items() for row in d.dimensions if not row.exact.n]
    blocks: list[Block] = []
    if unmeasured:
        text = "Not measured (no response had both a human label and a judge verdict): " + ", ".join(unmeasured)
        blocks.append(Note(text, console=True))
    if failures := _failures(report):
        blocks.append(Bullets(tuple(failures), console=True, lead="Failed judgments"))
    proxies = sorted(
        {
            f"{row.dimension} ← {row.map.metric}: {row.proxy}"
            for data in report.judges.values()
            for row in data.dimensions
            if row.proxy and row.map
        }
    )
    if proxies:
        blocks.append(Bullets(tuple(proxies), console=True, lead="Proxy rows"))
    return blocks


def _alpha_table(block: JudgeAgreementSummary, first: str, *, title: str, key: str) -> Table:
    rows: list[tuple[BlockCell, ...]] = []
    for metric in block.metrics:
        alpha = metric.alpha
        rows.append((metric.metric, metric.units, format_estimate(alpha.value, alpha.low, alpha.high)))
    return Table((first, "units", "α [95% CI]"), tuple(rows), title=title, key=key)


def _between(report: CalibrationReport) -> list[Block]:
    """Agreement between the human annotators, and between the judge models of each judge that voted."""
    blocks: list[Block] = []
    annotators = report.annotator_agreement
    if annotators and annotators.metrics:
        title = "Agreement between human annotators"
        table = _alpha_table(annotators, "dimension", title=title, key="calibration-annotators")
        blocks.append(Section(title, (table,), key="annotators"))
    for index, (name, data) in enumerate(report.judges.items()):
        if data.judge_agreement and data.judge_agreement.metrics:
            title = f"Agreement between the judge models of {name}"
            table = _alpha_table(data.judge_agreement, "metric", title=title, key=f"judge-models-{index}")
            blocks.append(Section(title, (table,), key=f"judge-models-{index}"))
    return blocks


def agreement_blocks(report: CalibrationReport) -> list[Block]:
    """The agreement table with its notes, then agreement between annotators and between judge models."""
    models = sorted({m for data in report.judges.values() for m in data.models})
    intro = Note(
        f"{_INTRO} Judge models: {', '.join(models) or 'none'}; {report.calls.get('requests', 0)} model calls."
    )
    rows = tuple(_row(name, data, row) for name, data, row in _measured(report))
    measured: Block = Table(
        _COLUMNS,
        rows,
        title=f"Judge calibration on {report.label_set} ({report.examples} responses)",
        key="calibration-agreement",
        console_columns=tuple(c for c in _COLUMNS if c != "macro-F1"),
        left=("dimension",),
    )
    if not rows:
        measured = Note("No judge × dimension was measured.", console=True)
    return [intro, measured, *_notes(report), *_between(report)]


def _counts(
    labels: Sequence[str], matrix: Sequence[Sequence[int]], key: str, caption: str, *, title: str = ""
) -> Table:
    """Counts with row totals; titled tables are the ones the terminal prints (rows: human, columns: judge)."""
    body = tuple(
        (label, *(Strong(str(c)) if i == j and c else c for j, c in enumerate(counts)), sum(counts))
        for i, (label, counts) in enumerate(zip(labels, matrix, strict=True))
    )
    columns = ("human ↓ / judge →", *labels, "total")
    return Table(columns, body, title=title, caption=caption, key=key, console_columns=None if title else ())


def _confusion(name: str, row: DimensionRow, key: str, *, console: bool) -> Section:
    exact, lenient = row.exact, row.lenient
    title = f"{name} · {row.shown}"
    caption = "Counts, exact labels; bold: judge and humans agree."
    numbers = [_counts(exact.labels, exact.confusion, key, caption, title=f"{title} (rows: human, columns: judge)")]
    if lenient:
        caption = f"Lenient labels: accuracy {format_pct(lenient.accuracy)}, κ {_f(lenient.kappa)}."
        numbers.append(_counts(lenient.labels, lenient.confusion, f"{key}-lenient", caption))
    kappa = exact.kappa_quadratic if row.ordinal else exact.kappa
    heatmap = Heatmap(
        tuple(exact.labels),
        tuple(exact.labels),
        tuple(tuple(counts) for counts in exact.confusion),
        tuple(numbers),
        key=key,
        caption=f"{name} · {row.dimension}: human labels (rows) against the judge's (columns), {exact.n} "
        f"responses; accuracy {_pct1(exact.accuracy)}, "
        f"{'quadratic ' if row.ordinal else ''}κ {format_fixed(kappa)}.",
        xlabel="judge's label",
        ylabel="human label",
        colorbar="responses",
        console=console,
        cmap="Purples",
    )
    parts: list[Block] = [heatmap]
    if len(row.by_group) > 1:
        parts.append(_groups(row, key.replace("cm-", "groups-", 1)))
    return Section(title, tuple(parts), key=key)


def _groups(row: DimensionRow, key: str) -> Table:
    labels = row.exact.labels
    return Table(
        ("response by", "n", "accuracy", *(f"{label} (human / judge)" for label in labels)),
        tuple(
            (g.group, g.n, format_pct(g.accuracy))
            + tuple(f"{format_pct(g.human[label])} / {format_pct(g.judge[label])}" for label in labels)
            for g in row.by_group
        ),
        caption="Per response author: label rates of the humans next to the judge's",
        key=key,
        console_columns=(),
    )


def confusion_blocks(report: CalibrationReport, *, console: bool = False) -> list[Block]:
    """One section per measured judge × dimension; `console`: the terminal prints their counts too."""
    return [
        _confusion(name, row, f"cm-{index}-{number}", console=console)
        for index, (name, data) in enumerate(report.judges.items())
        for number, row in enumerate(data.dimensions)
        if row.exact.n
    ]
