"""Small multiples of shaded matrices: one small matrix of means per panel (e.g. per metric) sharing its row and
column labels, each panel shaded on its own scale, since panels may measure different things."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from markupsafe import Markup

from engine.report._svg import new_figure, plot

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from engine.report._blocks import Table

__all__ = ("GridPanel", "HeatGrid", "heat_grid_html")


@dataclass(frozen=True)
class GridPanel:
    """One matrix, rows × columns; None marks a cell with no value."""

    title: str
    values: tuple[tuple[float | None, ...], ...]


@dataclass(frozen=True)
class HeatGrid:
    """Panels of small matrices, `columns` panels to a row; `numbers` is the table shown under the plot (and
    instead of it in text outputs)."""

    row_labels: tuple[str, ...]
    column_labels: tuple[str, ...]
    panels: tuple[GridPanel, ...]
    numbers: Table
    key: str
    caption: str
    columns: int = 3


def _shade(ax: Axes, panel: GridPanel, block: HeatGrid) -> None:
    values = [[math.nan if v is None else v for v in row] for row in panel.values]
    ax.imshow(values, cmap="Blues", aspect="auto")
    finite = [v for row in values for v in row if not math.isnan(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            dark = not math.isnan(v) and high > low and v > (low + high) / 2
            text = "–" if math.isnan(v) else f"{v:.3g}"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
    ax.set_title(panel.title, fontsize=8)
    ax.set_xticks(range(len(block.column_labels)), block.column_labels, fontsize=7)
    ax.set_yticks(range(len(block.row_labels)), block.row_labels, fontsize=7)


def heat_grid_html(block: HeatGrid, numbers: Markup) -> Markup:
    """The panels as one inline SVG figure, with `numbers` (the block's table, as HTML) below it."""
    rows = max(math.ceil(len(block.panels) / block.columns), 1)
    fig = new_figure(7.5, 2.1 * rows + 0.4)
    axes = fig.subplots(rows, block.columns, squeeze=False)
    for index, ax in enumerate(axes.flat):
        if index < len(block.panels):
            _shade(ax, block.panels[index], block)
        else:
            ax.set_axis_off()
    return plot(fig, key=block.key, caption=block.caption, numbers=numbers)
