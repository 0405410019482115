"""The seams through which a scenario kind adds its own HTML: optional methods on its registered summariser.

The engine never imports a kind's code; it looks up the kind's `Summarizer` in `SUMMARIZERS` and, when that
object also has one of the methods below, uses it. A kind without them still gets a complete report: the
generic rendering of its summary's tables, a transcripts browser and a compare report on its numeric metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import orjson
from markupsafe import Markup

from engine.core._format import format_sig
from engine.core._records import EpisodeRecord
from engine.report._blocks import Block, BlockCell, Note, Section, Table
from engine.report._html_blocks import html_blocks

__all__ = (
    "EpisodeScores",
    "EpisodeVerdict",
    "HtmlSection",
    "default_scores",
    "default_verdict",
    "generic_section",
)

MAX_GENERIC_ROWS = 500


@runtime_checkable
class HtmlSection(Protocol):
    """A summariser that draws its kind's results (plots with their tables) for report.html.

    `render_html` gets the same `summary` dict as `render_markdown` (summary.json, with "run") and returns
    the results part of the page. Build it as report blocks drawn by `html_blocks` (a `BlockSummarizer` does
    this for you), which escape every string: the page then shows the same tables as report.md and the
    terminal. A plain `str` result is escaped and shown as text, so a section can never inject markup by
    accident.
    """

    def render_html(self, summary: Mapping[str, Any], /) -> Markup | str: ...


@runtime_checkable
class EpisodeVerdict(Protocol):
    """A summariser that names each episode's outcome for the transcripts filter (e.g. "unsafe reply")."""

    def episode_verdict(self, record: EpisodeRecord, /) -> str: ...


@runtime_checkable
class EpisodeScores(Protocol):
    """A summariser that scores each episode per metric, for `simrun compare` (NaN = not applicable)."""

    def episode_scores(self, record: EpisodeRecord, /) -> Mapping[str, float]: ...


def default_verdict(record: EpisodeRecord) -> str:
    """Without a kind's own verdict: the error type, the stop reason, or the boolean metrics that came out true."""
    if record.error is not None:
        return f"error: {record.error.type}"
    reason = record.metrics.get("stop_reason")
    if isinstance(reason, str):
        return reason
    flagged = sorted(name for name, value in record.metrics.items() if value is True)
    return ", ".join(flagged) if flagged else "nothing flagged"


def default_scores(record: EpisodeRecord) -> dict[str, float]:
    """Without a kind's own scores: every numeric or boolean metric of the episode (booleans as 0/1)."""
    scores: dict[str, float] = {}
    for name, value in record.metrics.items():
        if isinstance(value, bool | int | float):
            scores[name] = float(value)
    for judgment in record.judgments:
        if judgment.target == "conversation" and isinstance(judgment.value, bool | int | float):
            scores.setdefault(judgment.metric, float(judgment.value))
    return scores


def _text(value: Any) -> BlockCell:
    if value is None or isinstance(value, str | int) and not isinstance(value, bool):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return format_sig(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _generic(title: str, value: Any, depth: int) -> list[Block]:
    if isinstance(value, list) and value and all(isinstance(row, dict) for row in value):
        columns: list[str] = []
        for row in value:
            columns += [key for key in row if key not in columns]
        rows = tuple(tuple(_text(row.get(column)) for column in columns) for row in value[:MAX_GENERIC_ROWS])
        parts: list[Block] = [Table(tuple(columns), rows)]
        if len(value) > MAX_GENERIC_ROWS:
            parts.append(Note(f"First {MAX_GENERIC_ROWS} of {len(value)} rows; all are in summary.json."))
        return [Section(title, tuple(parts))]
    if isinstance(value, dict) and all(_scalar(v) for v in value.values()):
        return [Section(title, (Table(("name", "value"), tuple((str(k), _text(v)) for k, v in value.items())),))]
    if isinstance(value, dict) and depth < 3:
        return [block for key, v in value.items() for block in _generic(f"{title} · {key}", v, depth + 1)]
    return [Section(title, (Table(("value",), ((_text(value),),)),))]


def generic_section(summary: Mapping[str, Any]) -> Markup:
    """Every table of a summary that has no HTML section of its own, read straight from its JSON shape."""
    note = Note("This scenario kind has no HTML section of its own: its summary is shown as tables.")
    blocks = [
        note,
        *(block for key, value in summary.items() if key != "run" for block in _generic(str(key), value, 0)),
    ]
    return html_blocks(blocks)
