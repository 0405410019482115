"""Building blocks a scenario kind's HTML section is made of: escaped tables, deterministic inline SVG plots.

Every helper here escapes what it is given unless it is already `Markup`, so a section built from them
cannot let a string from a model or a dataset become markup. Plots are matplotlib figures saved as SVG with
no date, a per-figure id salt and text kept as text (no embedded fonts), so a report rebuilds byte-identically.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from markupsafe import Markup, escape

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = (
    "Cell",
    "Markup",
    "escape",
    "figure",
    "new_figure",
    "paragraph",
    "plot",
    "section",
    "table",
)

Cell = str | int | float | bool | Markup | None
"""A table cell: `Markup` is inserted as is, None shows as "–", anything else is escaped text."""

_XML_PROLOGUE = re.compile(r"^.*?(?=<svg\b)", re.S)
_COMMENTS = re.compile(r"<!--.*?-->\s*", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_ROOT = re.compile(r"^<svg\b")
_KEY = re.compile(r"[^A-Za-z0-9_-]+")


def new_figure(width: float = 7.0, height: float = 4.0) -> Figure:
    """A pyplot-free figure (no global backend or state), sized in inches."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def figure(fig: Figure, *, key: str) -> Markup:
    """`fig` as inline SVG markup; `key` must be unique in the page (it salts the ids inside the SVG).

    Matplotlib escapes the figure's text itself; math parsing is off so a `$` in a label stays a `$`.
    """
    import matplotlib

    safe_key = _KEY.sub("-", key)
    buffer = io.StringIO()
    with matplotlib.rc_context(
        {
            "svg.hashsalt": f"simrun-{safe_key}",
            "svg.id": f"plot-{safe_key}",
            "svg.fonttype": "none",
            "text.parse_math": False,
        }
    ):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    svg = _METADATA.sub("", _COMMENTS.sub("", _XML_PROLOGUE.sub("", buffer.getvalue(), count=1)))
    svg = _ROOT.sub('<svg class="plot-svg" role="img"', svg, count=1)
    return Markup(svg.strip())  # matplotlib's SVG writer escapes every text node


def plot(fig: Figure, *, key: str, caption: str, numbers: Markup | None = None) -> Markup:
    """A plot with its caption, and the table of the numbers drawn in it below."""
    parts = Markup('<figure class="plot" id="fig-{}">{}<figcaption>{}</figcaption></figure>').format(
        _KEY.sub("-", key), figure(fig, key=key), caption
    )
    if numbers is not None:
        parts += Markup('<div class="numbers">{}</div>').format(numbers)
    return parts


def _cell(value: Cell, tag: str) -> Markup:
    if isinstance(value, Markup):
        return Markup("<{0}>{1}</{0}>").format(Markup(tag), value)
    if value is None:
        return Markup('<{0} class="empty">–</{0}>').format(Markup(tag))
    if isinstance(value, bool):
        return Markup("<{0}>{1}</{0}>").format(Markup(tag), "yes" if value else "no")
    if isinstance(value, int | float):
        text = f"{value:.3g}" if isinstance(value, float) else str(value)
        return Markup('<{0} class="num">{1}</{0}>').format(Markup(tag), text)
    return Markup("<{0}>{1}</{0}>").format(Markup(tag), value)


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
    caption_html = Markup("<caption>{}</caption>").format(caption) if caption else Markup("")
    table_id = Markup(' id="tbl-{}"').format(_KEY.sub("-", key)) if key else Markup("")
    return Markup(
        '<div class="table-wrap"><table class="data"{}>{}<thead><tr>{}</tr></thead><tbody>{}</tbody></table></div>'
    ).format(table_id, caption_html, head, body)


def paragraph(text: str | Markup, *, css: str | None = None) -> Markup:
    if css:
        return Markup('<p class="{}">{}</p>').format(css, text)
    return Markup("<p>{}</p>").format(text)


def section(title: str, *parts: Markup | str, key: str | None = None) -> Markup:
    """A titled block of the kind's results; plain strings among `parts` are escaped as paragraphs."""
    body = Markup("").join(part if isinstance(part, Markup) else paragraph(part) for part in parts)
    anchor = Markup(' id="sec-{}"').format(_KEY.sub("-", key)) if key else Markup("")
    return Markup('<section class="result"{}><h3>{}</h3>{}</section>').format(anchor, title, body)
