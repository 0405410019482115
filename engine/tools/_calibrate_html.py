"""calibration.html: `simrun calibrate --out`'s agreement tables and confusion heatmaps as one self-contained page.

It reads only the result dict that calibration.json holds (`CalibrationResult.as_dict`), so it needs no judge
code; the confusion matrices put the human label on the rows and the judge's on the columns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from engine.report._page import render_page
from engine.report._svg import Cell, new_figure, paragraph, plot, section, table
from engine.tools._calibrate_report import proxy_notes, unmeasured_rows

__all__ = ("render_calibration_html",)


def _f(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else round(value, 3)


def _pct(value: float | None) -> str | None:
    return None if value is None else f"{value:.1%}"


def _ci(exact: Mapping[str, Any], name: str, *, pct: bool = False) -> str | None:
    value = exact.get(name)
    if value is None:
        return None
    shown = _pct(value) if pct else f"{value:.2f}"
    bounds = (exact.get("intervals") or {}).get(name) or {}
    if bounds.get("low") is None or bounds.get("high") is None:
        return shown
    if pct:
        return f"{shown} [{_pct(bounds['low'])}, {_pct(bounds['high'])}]"
    return f"{shown} [{bounds['low']:.2f}, {bounds['high']:.2f}]"


def _agreement(result: Mapping[str, Any]) -> Markup:
    """Measured rows only; a judge × dimension with n = 0 is named in a note, never shown as a result."""
    rows: list[list[Cell]] = []
    for name, data in result["judges"].items():
        shown = f"{name} (deterministic)" if data["deterministic"] else name
        for row in data["dimensions"]:
            exact, lenient = row["exact"], row["lenient"] or {}
            if not exact["n"]:
                continue
            rows.append(
                [
                    shown,
                    f"{row['dimension']} (proxy)" if row.get("proxy") else row["dimension"],
                    exact["n"],
                    row["no_verdict"],
                    _ci(exact, "accuracy", pct=True),
                    _ci(exact, "kappa"),
                    _ci(exact, "kappa_quadratic") if row["ordinal"] else None,
                    _ci(exact, "alpha_nominal"),
                    _ci(exact, "alpha_ordinal") if row["ordinal"] else None,
                    _f(exact["macro_f1"]),
                    _pct(lenient.get("accuracy")),
                    _f(lenient.get("kappa")),
                ]
            )
    return table(
        (
            "judge",
            "dimension",
            "n",
            "no verdict",
            "accuracy [95% CI]",
            "κ [95% CI]",
            "κ quadratic [95% CI]",
            "α nominal [95% CI]",
            "α ordinal [95% CI]",
            "macro-F1",
            "lenient accuracy",
            "lenient κ",
        ),
        rows,
        key="calibration-agreement",
    )


def _matrix_table(labels: Sequence[str], matrix: Sequence[Sequence[int]], key: str, caption: str) -> Markup:
    body: list[list[Cell]] = []
    for i, (label, counts) in enumerate(zip(labels, matrix, strict=True)):
        cells: list[Cell] = [
            Markup("<strong>{}</strong>").format(c) if i == j and c else c for j, c in enumerate(counts)
        ]
        body.append([label, *cells, sum(counts)])
    return table(("human ↓ / judge →", *labels, "total"), body, caption=caption, key=key)


def _confusion(judge: str, row: Mapping[str, Any], key: str) -> Markup:
    exact = row["exact"]
    labels: list[str] = list(exact["labels"])
    matrix: list[list[int]] = [list(counts) for counts in exact["confusion"]]
    size = max(len(labels), 1)
    fig = new_figure(min(7.5, 0.7 * size + 3.4), min(6.5, 0.5 * size + 2.2))
    ax = fig.add_subplot()
    image = ax.imshow(matrix or [[0]], cmap="Purples", vmin=0, aspect="auto")
    peak = max((v for counts in matrix for v in counts), default=0)
    for i, counts in enumerate(matrix):
        for j, count in enumerate(counts):
            color = "white" if peak and count > peak / 2 else "black"
            ax.text(j, i, str(count), ha="center", va="center", fontsize=8, color=color)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_xlabel("judge's label")
    ax.set_ylabel("human label")
    fig.colorbar(image, ax=ax, label="responses", shrink=0.8)
    numbers = _matrix_table(labels, matrix, key, "Counts, exact labels; bold: judge and humans agree.")
    lenient = row["lenient"]
    if lenient:
        numbers += _matrix_table(
            lenient["labels"],
            lenient["confusion"],
            f"{key}-lenient",
            f"Lenient labels: accuracy {_pct(lenient['accuracy']) or '–'}, κ {_f(lenient['kappa'])}.",
        )
    kappa = exact["kappa_quadratic"] if row["ordinal"] else exact["kappa"]
    return plot(
        fig,
        key=key,
        caption=f"{judge} · {row['dimension']}: human labels (rows) against the judge's (columns), {exact['n']} "
        f"responses; accuracy {_pct(exact['accuracy']) or '–'}, "
        f"{'quadratic ' if row['ordinal'] else ''}κ {'–' if kappa is None else f'{kappa:.2f}'}.",
        numbers=numbers,
    )


def _groups(row: Mapping[str, Any], key: str) -> Markup:
    labels = list(row["exact"]["labels"])
    body: list[list[Cell]] = [
        [
            group["group"],
            group["n"],
            _pct(group["accuracy"]),
            *(f"{_pct(group['human'][label])} / {_pct(group['judge'][label])}" for label in labels),
        ]
        for group in row["by_group"]
    ]
    return table(
        ("response by", "n", "accuracy", *(f"{label} (human / judge)" for label in labels)),
        body,
        caption="Per response author: label rates of the humans next to the judge's",
        key=key,
    )


def _sim_note(models: Sequence[str]) -> Markup:
    if not any(str(m).startswith("sim/") for m in models):
        return Markup("")
    return paragraph(
        Markup(
            "<strong>Simulated verdicts.</strong> A judge model is simrun's <code>sim</code> provider, a "
            "deterministic simulator, not a language model: these numbers test the pipeline, not a judge."
        ),
        css="sim-note",
    )


def _agreement_section(result: Mapping[str, Any], models: Sequence[str]) -> Markup:
    calls = result.get("calls") or {}
    notes: list[Markup] = []
    if unmeasured := unmeasured_rows(result):
        notes.append(paragraph("Not measured (no response had both labels): " + ", ".join(unmeasured), css="note"))
    notes += [paragraph(f"Proxy: {line}", css="note") for line in proxy_notes(result)]
    return section(
        "Agreement with the human labels",
        paragraph(
            "Accuracy, Cohen's κ (quadratic-weighted for ordinal scales), Krippendorff's α (ordinal where the "
            "scale is) and macro-F1; lenient: labels collapsed (e.g. Yes + To some extent). Deterministic judges "
            "are the baseline an LLM judge must beat. "
            f"Judge models: {', '.join(models) or 'none'}; {calls.get('requests', 0)} model calls."
        ),
        _agreement(result),
        *notes,
        key="agreement",
    )


def _matrices(result: Mapping[str, Any]) -> list[Markup]:
    """Per judge × measured dimension its confusion matrix (and author table); then the judge's failures."""
    matrices: list[Markup] = []
    for index, (name, data) in enumerate(result["judges"].items()):
        for number, row in enumerate(data["dimensions"]):
            if not row["exact"]["n"]:
                continue
            parts = [_confusion(name, row, f"cm-{index}-{number}")]
            if len(row.get("by_group") or []) > 1:
                parts.append(_groups(row, f"groups-{index}-{number}"))
            matrices.append(section(f"{name} · {row['dimension']}", *parts, key=f"cm-{index}-{number}"))
        if data["errors"]:
            kinds = data.get("errors_by_kind") or {}
            detail = "; ".join(f"{kind} ×{entry['count']}, first: {entry['first']}" for kind, entry in kinds.items())
            matrices.append(
                paragraph(
                    f"{name}: {data['errors']} examples gave a judge or provider error and were left out"
                    + (f" ({detail})." if detail else "."),
                    css="note",
                )
            )
    return matrices


def render_calibration_html(result: Mapping[str, Any]) -> str:
    """The whole page, deterministic for the same result (no dates, seeded SVG ids)."""
    title = f"Judge calibration: {result['label_set']} ({result['examples']} labelled responses)"
    models = sorted({m for data in result["judges"].values() for m in data["models"]})
    body = (
        _sim_note(models)
        + Markup('<section id="agreement"><h2>Agreement</h2>{}</section>').format(_agreement_section(result, models))
        + Markup('<section id="confusion"><h2>Confusion matrices</h2>{}</section>').format(
            Markup("").join(_matrices(result))
        )
    )
    return render_page(
        title=title, header=None, body=body, nav=[("agreement", "Agreement"), ("confusion", "Confusion matrices")]
    )
