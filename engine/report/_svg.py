"""Building blocks a scenario kind's HTML section is made of: escaped tables, deterministic inline SVG plots.

Every helper here escapes what it is given unless it is already `Markup`, so a section built from them
cannot let a string from a model or a dataset become markup. Plots are drawn on an `engine.report._svg_draw`
canvas, whose SVG has no dates, no ids and text kept as escaped text, so a report rebuilds byte-identically.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from markupsafe import Markup, escape

from engine.core._format import format_sig
from engine.report._svg_draw import Canvas

__all__ = (
    "Canvas",
    "Cell",
    "Markup",
    "escape",
    "new_figure",
    "paragraph",
    "plot",
    "section",
    "table",
)

Cell = str | int | float | bool | Markup | None
"""A table cell: `Markup` is inserted as is, None shows as "–", anything else is escaped text."""

_KEY = re.compile(r"[^A-Za-z0-9_-]+")
_NUMBER = re.compile(r"[+\-−]?\d[\d,]*(?:\.\d+)?%?")
"""A cell that is one formatted number ("12.4", "+3", "62%", "1,234"): aligned right like a number."""
_HEADER_BREAK = re.compile(r"([_/])(?=\w)")
_POINTS = 72.0


def new_figure(width: float = 7.0, height: float = 4.0) -> Canvas:
    """An empty canvas sized in inches (drawn in points, 72 to the inch)."""
    return Canvas(width * _POINTS, height * _POINTS)


def plot(fig: Canvas, *, key: str, caption: str, numbers: Markup | None = None) -> Markup:
    """A plot with its caption, and the table of the numbers drawn in it below; `key` is unique in the page
    (the SVG itself holds no ids) and the caption also names the SVG for screen readers."""
    parts = Markup('<figure class="plot" id="fig-{}">{}<figcaption>{}</figcaption></figure>').format(
        _KEY.sub("-", key), fig.svg(label=caption), caption
    )
    if numbers:
        parts += Markup('<div class="numbers">{}</div>').format(numbers)
    return parts


def _cell(value: Cell, tag: str) -> Markup:
    if isinstance(value, Markup):
        css = Markup(' class="num"') if tag == "td" and _NUMBER.fullmatch(value.striptags()) else Markup("")
        return Markup("<{0}{1}>{2}</{0}>").format(Markup(tag), css, value)
    if value is None:
        return Markup('<{0} class="empty">–</{0}>').format(Markup(tag))
    if isinstance(value, bool):
        return Markup("<{0}>{1}</{0}>").format(Markup(tag), "yes" if value else "no")
    if isinstance(value, int | float) or tag == "td" and isinstance(value, str) and _NUMBER.fullmatch(value):
        text = format_sig(value) if isinstance(value, float) else str(value)
        return Markup('<{0} class="num">{1}</{0}>').format(Markup(tag), text)
    text = Markup.escape(value)
    if tag == "th":  # a header may break after "_" or "/" ("provide_similar_problem"), never inside a word
        text = Markup(_HEADER_BREAK.sub(r"\1<wbr>", str(text)))
    return Markup("<{0}>{1}</{0}>").format(Markup(tag), text)


def table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Cell]],
    *,
    caption: str | None = None,
    row_classes: Sequence[str] | None = None,
    key: str | None = None,
) -> Markup:
    """An HTML table; `row_classes[i]` (e.g. "violation") marks row i for highlighting."""
    head = Markup("").join(_cell(column, "th") for column in columns)
    body = Markup("")
    for index, row in enumerate(rows):
        css = row_classes[index] if row_classes is not None and index < len(row_classes) else ""
        cells = Markup("").join(_cell(value, "td") for value in row)
        body += Markup('<tr class="{}">{}</tr>').format(css, cells) if css else Markup("<tr>{}</tr>").format(cells)
    # The caption sits above the scrolling box, not in it: a wide table's caption stays readable at any width.
    caption_html = Markup('<p class="table-caption">{}</p>').format(caption) if caption else Markup("")
    table_id = Markup(' id="tbl-{}"').format(_KEY.sub("-", key)) if key else Markup("")
    return Markup(
        '{}<div class="table-wrap"><table class="data"{}><thead><tr>{}</tr></thead><tbody>{}</tbody></table></div>'
    ).format(caption_html, table_id, head, body)


def paragraph(text: str | Markup, *, css: str | None = None) -> Markup:
    if css:
        return Markup('<p class="{}">{}</p>').format(css, text)
    return Markup("<p>{}</p>").format(text)


def section(title: str, *parts: Markup | str, key: str | None = None) -> Markup:
    """A titled block of the kind's results; plain strings among `parts` are escaped as paragraphs."""
    body = Markup("").join(part if isinstance(part, Markup) else paragraph(part) for part in parts)
    anchor = Markup(' id="sec-{}"').format(_KEY.sub("-", key)) if key else Markup("")
    return Markup('<section class="result"{}><h3>{}</h3>{}</section>').format(anchor, title, body)
