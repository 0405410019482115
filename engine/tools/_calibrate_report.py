"""The calibration report in markdown (calibration.md) and on the terminal, from the result dict alone."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from engine.core._format import format_pct

__all__ = ("failure_notes", "proxy_notes", "render_console", "render_markdown", "unmeasured_rows")


def _f(value: float | None) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"


_COLUMNS = (
    "judge",
    "dimension",
    "n",
    "no verdict",
    "acc [95% CI]",
    "κ [95% CI]",
    "α [95% CI]",
    "lenient acc",
    "lenient κ",
)


def _with_interval(exact: Mapping[str, Any], name: str, *, pct: bool = False) -> str:
    value = exact.get(name)
    shown = format_pct(value) if pct else _f(value)
    bounds = (exact.get("intervals") or {}).get(name) or {}
    if value is None or bounds.get("low") is None or bounds.get("high") is None:
        return shown
    if pct:
        return f"{shown} [{format_pct(bounds['low'])}, {format_pct(bounds['high'])}]"
    return f"{shown} [{bounds['low']:.2f}, {bounds['high']:.2f}]"


def _shown_dimension(row: Mapping[str, Any]) -> str:
    return f"{row['dimension']} (proxy)" if row.get("proxy") else row["dimension"]


def _rows(result: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Measured rows only: a judge × dimension with no unit (n = 0) is in `unmeasured_rows`, never a result."""
    rows: list[tuple[str, ...]] = []
    for name, data in result["judges"].items():
        shown = f"{name} (deterministic)" if data["deterministic"] else name
        for row in data["dimensions"]:
            exact, lenient = row["exact"], row["lenient"] or {}
            if not exact["n"]:
                continue
            kappa = "kappa_quadratic" if row["ordinal"] else "kappa"
            alpha = "alpha_ordinal" if row["ordinal"] else "alpha_nominal"
            rows.append(
                (
                    shown,
                    _shown_dimension(row),
                    str(exact["n"]),
                    str(row["no_verdict"]),
                    _with_interval(exact, "accuracy", pct=True),
                    _with_interval(exact, kappa) + (" quad." if row["ordinal"] else ""),
                    _with_interval(exact, alpha) + (" ord." if row["ordinal"] else ""),
                    format_pct(lenient.get("accuracy")),
                    _f(lenient.get("kappa")),
                )
            )
    return rows


def unmeasured_rows(result: Mapping[str, Any]) -> list[str]:
    return [
        f"{name} · {row['dimension']}"
        for name, data in result["judges"].items()
        for row in data["dimensions"]
        if not row["exact"]["n"]
    ]


def failure_notes(result: Mapping[str, Any]) -> list[str]:
    """One line per failed judge (count of failed judgments, then each kind of error with its first message)."""
    lines = []
    for name, data in result["judges"].items():
        if not data["errors"]:
            continue
        kinds = data.get("errors_by_kind") or {}
        detail = "; ".join(f"{kind} ×{entry['count']}, first: {entry['first'][:300]}" for kind, entry in kinds.items())
        lines.append(
            f"{name}: {data['errors']} of {data.get('judgments', result['examples'])} judgments failed ({detail})"
        )
    return lines


def proxy_notes(result: Mapping[str, Any]) -> list[str]:
    return sorted(
        {
            f"{row['dimension']} ← {row['map']['metric']}: {row['proxy']}"
            for data in result["judges"].values()
            for row in data["dimensions"]
            if row.get("proxy") and row.get("map")
        }
    )


def _confusion_lines(row: Mapping[str, Any]) -> list[str]:
    labels, matrix = row["exact"]["labels"], row["exact"]["confusion"]
    lines = ["| human ↓ / judge → | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    lines += [
        f"| {label} | " + " | ".join(map(str, counts)) + " |" for label, counts in zip(labels, matrix, strict=True)
    ]
    return lines


def _group_lines(row: Mapping[str, Any]) -> list[str]:
    labels = row["exact"]["labels"]
    lines = [
        "| response by | n | accuracy | " + " | ".join(f"human {label} / judge {label}" for label in labels) + " |",
        "|---|---|---|" + "---|" * len(labels),
    ]
    for group in row.get("by_group") or []:
        shares = " | ".join(
            f"{format_pct(group['human'][label])} / {format_pct(group['judge'][label])}" for label in labels
        )
        lines.append(f"| {group['group']} | {group['n']} | {format_pct(group['accuracy'])} | {shares} |")
    return lines


def _judge_agreement_lines(result: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    for name, data in result["judges"].items():
        block = data.get("judge_agreement")
        if not block or not block.get("metrics"):
            continue
        lines += ["", f"### Agreement between the judge models of {name}", ""]
        lines += ["| metric | units | α [95% CI] |", "|---|---|---|"]
        for metric in block["metrics"]:
            alpha = metric["alpha"]
            shown = _f(alpha["value"]) + (
                f" [{alpha['low']:.2f}, {alpha['high']:.2f}]" if alpha["low"] is not None else ""
            )
            lines.append(f"| {metric['metric']} | {metric['units']} | {shown} |")
    return lines


def render_markdown(result: Mapping[str, Any]) -> str:
    """The calibration report: agreement with intervals, errors, proxies, per-group tables, confusion matrices."""
    lines = [
        f"# Judge calibration: {result['label_set']} ({result['examples']} labelled responses)",
        "",
        "Accuracy, Cohen's κ (quadratic-weighted for ordinal scales), Krippendorff's α (ordinal where the scale is), "
        "with 95% intervals from resampling whole conversations; lenient = labels collapsed (e.g. Yes + To some "
        "extent). Deterministic judges are the baseline an LLM judge must beat. A (proxy) row scores the dimension "
        "from a judge metric that asks a related but different question.",
        "",
        "| " + " | ".join(_COLUMNS) + " |",
        "|---|---|" + "---|" * (len(_COLUMNS) - 2),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(result)]
    if unmeasured := unmeasured_rows(result):
        lines += ["", "Not measured (no response had both a human label and a judge verdict): " + ", ".join(unmeasured)]
    if problems := failure_notes(result):
        lines += ["", "**Failed judgments** (left out of every row above):", ""] + [f"- {line}" for line in problems]
    if proxies := proxy_notes(result):
        lines += ["", "Proxy rows:", ""] + [f"- {line}" for line in proxies]
    annotators = result.get("annotator_agreement")
    if annotators and annotators.get("metrics"):
        lines += [
            "",
            "## Agreement between human annotators",
            "",
            "| dimension | units | α [95% CI] |",
            "|---|---|---|",
        ]
        for metric in annotators["metrics"]:
            alpha = metric["alpha"]
            bounds = f" [{alpha['low']:.2f}, {alpha['high']:.2f}]" if alpha["low"] is not None else ""
            lines.append(f"| {metric['metric']} | {metric['units']} | {_f(alpha['value'])}{bounds} |")
    lines += _judge_agreement_lines(result)
    for name, data in result["judges"].items():
        for row in data["dimensions"]:
            if not row["exact"]["n"]:
                continue
            lines += ["", f"### {name} · {_shown_dimension(row)}", ""] + _confusion_lines(row)
            if len(row.get("by_group") or []) > 1:
                lines += ["", "Label rates per response author (human / judge):", ""] + _group_lines(row)
    return "\n".join(lines) + "\n"


def render_console(result: Mapping[str, Any], *, confusion: bool) -> RenderableType:
    """What `simrun calibrate` prints: the agreement table and notes, with `confusion` every matrix too."""
    table = Table(title=Text(f"Judge calibration on {result['label_set']} ({result['examples']} responses)"))
    for column in _COLUMNS:
        table.add_column(column, justify="left" if column in ("judge", "dimension") else "right")
    rows = _rows(result)
    for row in rows:
        table.add_row(*map(Text, row))
    parts: list[RenderableType] = [table] if rows else [Text("No judge × dimension was measured.", style="bold")]
    if unmeasured := unmeasured_rows(result):
        parts.append(Text("Not measured (no unit with both labels): " + ", ".join(unmeasured)))
    for line in proxy_notes(result):
        parts.append(Text(f"proxy: {line}"))
    for name, data in result["judges"].items():
        block = data.get("judge_agreement") or {}
        shown = [
            f"{m['metric']} α {_f(m['alpha']['value'])}"
            + (f" [{m['alpha']['low']:.2f}, {m['alpha']['high']:.2f}]" if m["alpha"]["low"] is not None else "")
            for m in block.get("metrics", [])
        ]
        if shown:
            parts.append(Text(f"agreement between the judge models of {name}: " + "; ".join(shown)))
    for line in failure_notes(result):
        parts.append(Text(f"FAILED {line}", style="bold red"))
    if confusion:
        for name, data in result["judges"].items():
            for row in data["dimensions"]:
                if not row["exact"]["n"]:
                    continue
                labels = row["exact"]["labels"]
                matrix = Table(title=Text(f"{name} · {row['dimension']} (rows: human, columns: judge)"))
                matrix.add_column("")
                for label in labels:
                    matrix.add_column(Text(label), justify="right")
                for label, counts in zip(labels, row["exact"]["confusion"], strict=True):
                    matrix.add_row(Text(label), *(Text(str(c)) for c in counts))
                parts.append(matrix)
    return Group(*parts)
