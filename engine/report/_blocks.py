"""What a scenario kind shows, said once: blocks a kind builds from its typed summary, drawn by the engine
as report.md, the terminal and report.html.

A kind that writes three renderers over a string-keyed dict lets them drift apart; a kind that returns blocks
gets the same tables and numbers in every output. Cells are pre-formatted text (the kind knows its numbers'
precision); `Strong` marks a cell for emphasis. Plots (`Forest`, `Heatmap`) carry the table of the numbers they
draw, which is all a text output shows of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.report._dots import Dots
from engine.report._grid import HeatGrid
from engine.report._histogram import Histogram
from engine.report._survival import Survival
from engine.report._svg_draw import Canvas

__all__ = (
    "Block",
    "BlockCell",
    "FINDING_MARK",
    "Brief",
    "Bullets",
    "Figure",
    "Forest",
    "ForestPanel",
    "Heatmap",
    "Interval",
    "Note",
    "SIMRUN_ADDITION",
    "Section",
    "Strong",
    "Table",
    "provenance_of",
    "tables_of",
    "unlabelled",
)

SIMRUN_ADDITION = "simrun's addition, beyond the paper"
"""The provenance of a section no paper reports: a reader must be able to tell it from a reproduction."""


@dataclass(frozen=True)
class Strong:
    """A cell to emphasise (bold in every output), e.g. the diagonal of a confusion matrix."""

    text: str


@dataclass(frozen=True)
class Brief:
    """A cell with a shorter form for the terminal, whose tables must fit a narrow screen."""

    text: str
    short: str


BlockCell = str | int | Strong | Brief | None
"""A table cell: None shows as "–"; numbers are formatted by the kind, so every output shows the same digits."""


@dataclass(frozen=True)
class Note:
    """A paragraph of explanation; the terminal leaves notes out unless `console` is set."""

    text: str
    console: bool = False


@dataclass(frozen=True)
class Table:
    """A table. `title` names it where no heading does (the terminal); `console_columns` picks the columns the
    terminal shows (None: all, empty: the table is left out there); `row_classes[i]` (e.g. "violation",
    "total") highlights row i in HTML."""

    columns: tuple[str, ...]
    rows: tuple[tuple[BlockCell, ...], ...]
    title: str = ""
    caption: str = ""
    key: str = ""
    row_classes: tuple[str, ...] = ()
    console_columns: tuple[str, ...] | None = None
    left: tuple[str, ...] = ()
    """Columns the terminal aligns left besides the first (labels rather than numbers)."""
    findings: tuple[bool, ...] = ()
    """`findings[i]`: row i is a finding; every output marks it with FINDING_MARK before its first cell."""
    decided_by: str = ""
    """The column holding the p that decided the findings (e.g. `p (BH)`); the caption names its method."""

    def shown_rows(self) -> tuple[tuple[BlockCell, ...], ...]:
        """The rows with each finding's first cell marked, so report.md, the terminal and the HTML agree."""
        return tuple(
            (_marked(row[0]), *row[1:]) if row and index < len(self.findings) and self.findings[index] else row
            for index, row in enumerate(self.rows)
        )

    def shown_caption(self) -> str:
        """The caption, with what the mark means when a row carries it."""
        if not any(self.findings):
            return self.caption
        legend = f"{FINDING_MARK} marks a finding, decided by the column “{self.decided_by}”."
        return f"{self.caption} {legend}".strip()

    def console_shown(self) -> tuple[str, ...]:
        """The terminal's columns: the kind's choice, plus the deciding p wherever a finding is shown."""
        shown = self.columns if self.console_columns is None else self.console_columns
        if shown and any(self.findings) and self.decided_by and self.decided_by not in shown:
            shown = (*shown, self.decided_by)
        return shown


FINDING_MARK = "◆"
"""How every output marks a row that is a finding."""


def _marked(cell: BlockCell) -> BlockCell:
    if isinstance(cell, Strong):
        return Strong(f"{FINDING_MARK} {cell.text}")
    if isinstance(cell, Brief):
        return Brief(f"{FINDING_MARK} {cell.text}", f"{FINDING_MARK} {cell.short}")
    return f"{FINDING_MARK} {'–' if cell is None else cell}"


@dataclass(frozen=True)
class Interval:
    """One line of a forest plot: an estimate with its interval (None bounds: a point only)."""

    label: str
    estimate: float | None
    low: float | None = None
    high: float | None = None
    highlight: bool = False


@dataclass(frozen=True)
class ForestPanel:
    title: str
    intervals: tuple[Interval, ...]


@dataclass(frozen=True)
class Forest:
    """Estimates with intervals, one panel per metric sharing the labels; `band` shades |x| < band (e.g. the
    smallest effect worth reporting)."""

    panels: tuple[ForestPanel, ...]
    numbers: Table
    key: str
    caption: str
    xlabel: str
    xlim: tuple[float, float] | None = None
    xticks: tuple[float, ...] | None = None
    band: float | None = None


@dataclass(frozen=True)
class Heatmap:
    """A matrix of counts or rates, rows against columns; `numbers` are the tables shown under it (and instead
    of it in text outputs).

    By default a cell shows its count (none when 0) and the diagonal is bold, as in a confusion matrix;
    `cells` replaces every cell's text (e.g. a rate with its interval; None values: a gap), `vmax` fixes the
    colour scale's top and `light_above` where the text turns white (default: half the largest value).
    """

    row_labels: tuple[str, ...]
    column_labels: tuple[str, ...]
    values: tuple[tuple[float | None, ...], ...]
    numbers: tuple[Table, ...]
    key: str
    caption: str
    xlabel: str
    ylabel: str
    colorbar: str = ""
    console: bool = False
    cells: tuple[tuple[str, ...], ...] | None = None
    cmap: str = "Blues"
    vmax: float | None = None
    light_above: float | None = None
    columns_on_top: bool = False


@dataclass(frozen=True, eq=False)
class Figure:
    """A plot drawn on its own canvas (e.g. a load test's latency over time), for a picture no other block
    draws; `numbers` are the tables under it, and all a text output shows of it."""

    canvas: Canvas
    numbers: tuple[Table, ...]
    key: str
    caption: str
    console: bool = False


@dataclass(frozen=True)
class Bullets:
    """A list of short statements (a markdown list) after an optional bold `lead`; the terminal shows it only
    with `console`."""

    items: tuple[str, ...]
    console: bool = False
    lead: str = ""


@dataclass(frozen=True)
class Section:
    """A titled group of blocks: a heading in report.md and report.html (nested sections go one level down)."""

    title: str
    body: tuple[Block, ...] = field(default_factory=tuple)
    key: str = ""
    provenance: str = ""
    """What the section reproduces (e.g. "SafeTutors Tables 1–2") or `SIMRUN_ADDITION`; every output shows it
    under the heading. A nested section without one inherits its parent's."""


Block = Section | Table | Note | Bullets | Forest | Heatmap | HeatGrid | Survival | Histogram | Dots | Figure


def tables_of(block: Block) -> Sequence[Table]:
    """The tables a text output shows for a block."""
    if isinstance(block, Table):
        return (block,)
    if isinstance(block, Forest):
        return (block.numbers,)
    if isinstance(block, Heatmap | Survival | Histogram | Dots | Figure):
        return block.numbers
    if isinstance(block, HeatGrid):
        return (block.numbers,)
    return ()


def _sections(blocks: Sequence[Block], inherited: str, path: str) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []
    for block in blocks:
        if isinstance(block, Section):
            here = block.provenance or inherited
            title = f"{path} › {block.title}" if path else block.title
            found.append({"section": title, "key": block.key, "provenance": here})
            found += _sections(block.body, here, title)
    return found


def provenance_of(blocks: Sequence[Block]) -> list[dict[str, str]]:
    """Every section with the provenance it carries or inherits ("" when it has none), for summary.json."""
    return _sections(blocks, "", "")


def unlabelled(blocks: Sequence[Block], inherited: str | None = None) -> list[str]:
    """The sections, and blocks outside any section, that carry no provenance, own or inherited: a report must
    have none (a block inside a section is labelled by it)."""
    missing: list[str] = []
    for block in blocks:
        if isinstance(block, Section):
            here = block.provenance or inherited or ""
            if not here:
                missing.append(f"section {block.title!r}")
            missing += unlabelled(block.body, here)
        elif inherited is None:
            missing.append(f"{type(block).__name__} outside any section")
    return missing
