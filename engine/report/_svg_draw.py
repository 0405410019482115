"""A small SVG writer for the report's plots: a canvas of shapes and text, and axes with linear scales.

The report draws points with whiskers, shaded cells, step curves, bars and dot strips; a plotting library
cost half a second to import and a third of a second to draw four of them on every run. This writer knows
those shapes and nothing else. Its output depends only on its input: coordinates are rounded to two
decimals, there are no dates and no ids, and every text node and attribute value goes through markupsafe,
so a label from a model or a dataset stays text. Units are points (72 to the inch), text is sans-serif.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from markupsafe import Markup, escape

__all__ = (
    "FRAME",
    "GRID",
    "INK",
    "Axes",
    "Box",
    "Canvas",
    "Legend",
    "Marker",
    "Scale",
    "colormap",
    "fit",
    "legend_at",
    "legend_width",
    "nice_ticks",
    "split",
    "text_width",
    "tick_label",
)

INK, GRID, FRAME = "#344054", "#eaecf0", "#98a2b3"
Anchor = Literal["start", "middle", "end"]
Marker = Literal["o", "D", "s"]
_Attrs = dict[str, str | float | None]

_SEQUENTIAL = {
    "Blues": ("#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"),
    "Reds": ("#fff5f0", "#fee0d2", "#fcbba1", "#fc9272", "#fb6a4a", "#ef3b2c", "#cb181d", "#a50f15", "#67000d"),
    "Purples": ("#fcfbfd", "#efedf5", "#dadaeb", "#bcbddc", "#9e9ac8", "#807dba", "#6a51a3", "#54278f", "#3f007d"),
    "Greens": ("#f7fcf5", "#e5f5e0", "#c7e9c0", "#a1d99b", "#74c476", "#41ab5d", "#238b45", "#006d2c", "#00441b"),
}


_NOT_XML = re.compile("[\x00-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def _clean(text: str) -> str:
    """Control characters (which XML cannot hold, or which a parser rewrites) as spaces: a label is one line."""
    return _NOT_XML.sub(" ", text)


def _n(value: float) -> str:
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def text_width(text: str, size: float) -> float:
    """An estimate of a sans-serif string's width, enough to leave room for labels."""
    return len(text) * size * 0.56


def nice_ticks(low: float, high: float, count: int = 5, *, integer: bool = False) -> list[float]:
    """Round values (1, 2, 2.5 or 5 times a power of ten apart) within [low, high], about `count` of them;
    `integer`: whole numbers only (turns, seconds)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low] if math.isfinite(low) else []
    raw = (high - low) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    steps = (1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)
    step = next(m * magnitude for m in steps if m * magnitude >= raw * (1 - 1e-9))
    step = max(step, 1.0) if integer else step
    first = math.ceil(low / step - 1e-9)
    ticks = []
    k = first
    while k * step <= high + step * 1e-9:
        ticks.append(round(k * step, 12) + 0.0)
        k += 1
    return ticks


def tick_label(value: float, ticks: Sequence[float]) -> str:
    """`value` with as many decimals as its ticks' spacing needs; a minus sign, not a hyphen."""
    step = min((b - a for a, b in zip(ticks, ticks[1:], strict=False)), default=1.0) or 1.0
    decimals = 0
    while decimals < 6 and abs(round(step, decimals) - step) > step * 1e-6:
        decimals += 1
    text = f"{value:.{decimals}f}"
    if text.lstrip("-").strip("0.") == "":
        text = text.lstrip("-")
    return text.replace("-", "\u2212")


def fit(values: Iterable[float | None], *, margin: float = 0.05, floor: float | None = None) -> tuple[float, float]:
    """A data range padded by `margin` of its span on each side (`floor`: the lowest it may go)."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if floor is not None:
        finite.append(floor)
    if not finite:
        return (0.0, 1.0)
    low, high = min(finite), max(finite)
    if high == low:
        low, high = low - 0.5 if low else -1.0, high + 0.5 if high else 1.0
    pad = (high - low) * margin
    return (low - pad if floor is None else max(floor, low - pad), high + pad)


def colormap(name: str, share: float) -> str:
    """The colour at `share` (0–1) of a sequential palette (Blues, Reds, Purples, Greens), light to dark."""
    stops = _SEQUENTIAL.get(name, _SEQUENTIAL["Blues"])
    at = min(max(share, 0.0), 1.0) * (len(stops) - 1)
    i = min(int(at), len(stops) - 2)
    a, b = stops[i], stops[i + 1]
    mix = [round(int(a[k : k + 2], 16) * (1 - (at - i)) + int(b[k : k + 2], 16) * (at - i)) for k in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in mix)


class Box(NamedTuple):
    """A rectangle on the canvas: left, top, right, bottom."""

    left: float
    top: float
    right: float
    bottom: float


def split(
    box: Box,
    count: int,
    *,
    gap: float,
    weights: Sequence[float] | None = None,
    across: bool = True,
    pads: Sequence[float] | None = None,
) -> list[Box]:
    """`box` cut into `count` boxes side by side (`across`) or stacked, sized by `weights`; `pads[i]` is room
    kept before box i (its own tick labels)."""
    weights = list(weights) if weights and len(weights) == count else [1.0] * count
    pads = list(pads) if pads and len(pads) == count else [0.0] * count
    span = (box.right - box.left if across else box.bottom - box.top) - gap * (count - 1) - sum(pads)
    boxes, at = [], box.left if across else box.top
    for weight, pad in zip(weights, pads, strict=True):
        at += pad
        size = max(span, 1.0) * weight / sum(weights)
        boxes.append(Box(at, box.top, at + size, box.bottom) if across else Box(box.left, at, box.right, at + size))
        at += size + gap
    return boxes


@dataclass(frozen=True)
class Scale:
    """A linear map from data `[low, high]` to canvas `[start, end]`; values outside are held at the edge."""

    low: float
    high: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        span = self.high - self.low or 1.0
        share = min(max((value - self.low) / span, 0.0), 1.0)
        return self.start + share * (self.end - self.start)

    def ticks(self, count: int = 5) -> list[float]:
        return nice_ticks(self.low, self.high, count)


class Canvas:
    """Shapes and text in drawing order; `svg()` is the inline `<svg>` element."""

    def __init__(self, width: float, height: float) -> None:
        self.width, self.height = width, height
        self._parts: list[str] = []

    def _add(self, tag: str, attrs: _Attrs, text: str | None = None) -> None:
        """One element; every attribute value and the text go through `escape` (tags and names are ours)."""
        pairs = "".join(
            f' {k.replace("_", "-")}="{_n(v) if isinstance(v, float | int) else escape(v)}"'
            for k, v in attrs.items()
            if v is not None
        )
        self._parts.append(f"<{tag}{pairs}/>" if text is None else f"<{tag}{pairs}>{escape(_clean(text))}</{tag}>")

    def rect(self, x: float, y: float, w: float, h: float, *, fill: str, stroke: str | None = None) -> None:
        self._add("rect", {"x": x, "y": y, "width": max(w, 0.0), "height": max(h, 0.0), "fill": fill, "stroke": stroke})

    def line(
        self, x1: float, y1: float, x2: float, y2: float, *, stroke: str, width: float = 1.0, dash: str | None = None
    ) -> None:
        attrs: _Attrs = {"x1": x1, "y1": y1, "x2": x2, "y2": y2, "stroke": stroke, "stroke_width": width}
        self._add("line", {**attrs, "stroke_dasharray": dash})

    def polyline(
        self, points: Sequence[tuple[float, float]], *, stroke: str, width: float = 1.0, dash: str | None = None
    ) -> None:
        if len(points) > 1:
            path = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
            attrs: _Attrs = {"points": path, "fill": "none", "stroke": stroke, "stroke_width": width}
            self._add("polyline", {**attrs, "stroke_linejoin": "round", "stroke_dasharray": dash})

    def marker(self, x: float, y: float, shape: Marker, *, color: str, size: float = 4.0, hollow: bool = False) -> None:
        fill, r = ("#ffffff" if hollow else color), size / 2
        if shape == "o":
            self._add("circle", {"cx": x, "cy": y, "r": r, "fill": fill, "stroke": color, "stroke_width": 1.0})
            return
        corners = [(x, y - r * 1.3), (x + r * 1.3, y), (x, y + r * 1.3), (x - r * 1.3, y)]
        if shape == "s":
            corners = [(x - r, y - r), (x + r, y - r), (x + r, y + r), (x - r, y + r)]
        points = " ".join(f"{_n(a)},{_n(b)}" for a, b in corners)
        self._add("polygon", {"points": points, "fill": fill, "stroke": color, "stroke_width": 1.0})

    def text(
        self,
        x: float,
        y: float,
        text: str,
        *,
        size: float = 8.0,
        anchor: Anchor = "start",
        color: str = INK,
        bold: bool = False,
        rotate: float = 0.0,
    ) -> None:
        """One text node, vertically centred on `y`; `rotate` turns it about (x, y) in degrees."""
        attrs: _Attrs = {"x": x, "y": y + size * 0.35, "font_size": size}
        attrs |= {"text_anchor": None if anchor == "start" else anchor, "fill": None if color == INK else color}
        attrs |= {"font_weight": "bold" if bold else None}
        attrs["transform"] = f"rotate({_n(rotate)} {_n(x)} {_n(y)})" if rotate else None
        self._add("text", attrs, text)

    def svg(self, *, label: str = "") -> Markup:
        head = Markup(
            '<svg class="plot-svg" role="img" aria-label="{}" xmlns="http://www.w3.org/2000/svg" width="{}pt" '
            'height="{}pt" viewBox="0 0 {} {}" font-family="sans-serif" fill="{}">'
        ).format(_clean(label), _n(self.width), _n(self.height), _n(self.width), _n(self.height), INK)
        background = Markup('<rect width="100%" height="100%" fill="#ffffff"/>')
        return head + background + Markup("".join(self._parts)) + Markup("</svg>")  # each part escaped in _add


@dataclass(frozen=True)
class Legend:
    """One legend entry: a line (`dash`: its SVG dash pattern), a dot, a hollow dot or a square in `color`."""

    label: str
    color: str
    mark: Literal["line", "dot", "rect", "hollow"] = "line"
    width: float = 1.5
    dash: str | None = None


class Axes:
    """A plotting area on a canvas with an x and a y scale; drawing methods take data coordinates."""

    def __init__(self, canvas: Canvas, box: Box, x: tuple[float, float], y: tuple[float, float]) -> None:
        self.canvas, self.box = canvas, box
        self.x = Scale(x[0], x[1], box.left, box.right)
        self.y = Scale(y[0], y[1], box.bottom, box.top)

    def rows(self, count: int) -> None:
        """Makes y a row axis: row 0 at the top, each row one unit high."""
        self.y = Scale(-0.5, count - 0.5, self.box.top, self.box.bottom)

    def line(
        self,
        xs: Sequence[float],
        ys: Sequence[float | None],
        *,
        color: str,
        width: float = 1.5,
        dash: str | None = None,
    ) -> None:
        """A polyline through the points, broken where y is missing."""
        run: list[tuple[float, float]] = []
        for x, y in [*zip(xs, ys, strict=True), (0.0, None)]:
            if y is None or not math.isfinite(y):
                self.canvas.polyline(run, stroke=color, width=width, dash=dash)
                run = []
            else:
                run.append((self.x(x), self.y(y)))

    def step(self, xs: Sequence[float], ys: Sequence[float], *, color: str, width: float = 1.5) -> None:
        """A step curve holding each value until the next x."""
        points: list[tuple[float, float]] = []
        for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
            points.append((self.x(x), self.y(y)))
            if i + 1 < len(xs):
                points.append((self.x(xs[i + 1]), self.y(y)))
        self.canvas.polyline(points, stroke=color, width=width)

    def marker(
        self, x: float, y: float, shape: Marker = "o", *, color: str, size: float = 4.0, hollow: bool = False
    ) -> None:
        self.canvas.marker(self.x(x), self.y(y), shape, color=color, size=size, hollow=hollow)

    def whisker(
        self, at: float, low: float, high: float, *, color: str, across: bool = True, width: float = 1.0
    ) -> None:
        """An interval with end caps: along x at row/height `at` (`across`), else along y at x `at`."""
        cap = 2.0
        if across:
            y, x1, x2 = self.y(at), self.x(low), self.x(high)
            self.canvas.line(x1, y, x2, y, stroke=color, width=width)
            for x in (x1, x2):
                self.canvas.line(x, y - cap, x, y + cap, stroke=color, width=width)
            return
        x, y1, y2 = self.x(at), self.y(low), self.y(high)
        self.canvas.line(x, y1, x, y2, stroke=color, width=width)
        for y in (y1, y2):
            self.canvas.line(x - cap, y, x + cap, y, stroke=color, width=width)

    def area(self, x1: float, x2: float, y1: float, y2: float, *, fill: str, seamless: bool = False) -> None:
        """A filled rectangle between two data corners (a bar, a cell, a band); `seamless` outlines it in its
        own colour, so abutting cells show no hairline gaps."""
        left, right = sorted((self.x(x1), self.x(x2)))
        top, bottom = sorted((self.y(y1), self.y(y2)))
        self.canvas.rect(left, top, right - left, bottom - top, fill=fill, stroke=fill if seamless else None)

    def hline(self, y: float, *, color: str, width: float = 1.0, dash: str | None = None) -> None:
        self.canvas.line(self.box.left, self.y(y), self.box.right, self.y(y), stroke=color, width=width, dash=dash)

    def vline(self, x: float, *, color: str, width: float = 1.0, dash: str | None = None) -> None:
        self.canvas.line(self.x(x), self.box.top, self.x(x), self.box.bottom, stroke=color, width=width, dash=dash)

    def text(self, x: float, y: float, text: str, *, size: float = 8.0, color: str = INK, bold: bool = False) -> None:
        """Text centred on a data point (a cell's value)."""
        self.canvas.text(self.x(x), self.y(y), text, size=size, anchor="middle", color=color, bold=bold)

    def grid(self, *, xs: Sequence[float] = (), ys: Sequence[float] = ()) -> None:
        for x in xs:
            self.vline(x, color=GRID, width=0.8)
        for y in ys:
            self.hline(y, color=GRID, width=0.8)

    def frame(self) -> None:
        left, top, right, bottom = self.box
        self.canvas.polyline([(left, top), (left, bottom), (right, bottom)], stroke=FRAME, width=0.8)

    def xticks(
        self,
        ticks: Sequence[float],
        labels: Sequence[str] | None = None,
        *,
        size: float = 7.0,
        rotate: bool = False,
        top: bool = False,
    ) -> None:
        """Tick marks and labels under the area (or above it, `top`); `rotate` slants long labels."""
        texts = labels if labels is not None else [tick_label(t, ticks) for t in ticks]
        edge = self.box.top if top else self.box.bottom
        for tick, text in zip(ticks, texts, strict=True):
            x = self.x(tick)
            self.canvas.line(x, edge, x, edge + (-3 if top else 3), stroke=FRAME, width=0.8)
            if rotate:
                self.canvas.text(x + 2, edge + 6, text, size=size, anchor="end", rotate=-45)
            else:
                self.canvas.text(x, edge + (-8 if top else 8), text, size=size, anchor="middle")

    def yticks(
        self, ticks: Sequence[float], labels: Sequence[str] | None = None, *, size: float = 7.0, right: bool = False
    ) -> None:
        texts = labels if labels is not None else [tick_label(t, ticks) for t in ticks]
        edge = self.box.right if right else self.box.left
        for tick, text in zip(ticks, texts, strict=True):
            y = self.y(tick)
            self.canvas.line(edge, y, edge + (3 if right else -3), y, stroke=FRAME, width=0.8)
            self.canvas.text(edge + (5 if right else -5), y, text, size=size, anchor="start" if right else "end")

    def xlabel(self, text: str, *, offset: float = 20.0, size: float = 8.0) -> None:
        if text:
            self.canvas.text(
                (self.box.left + self.box.right) / 2, self.box.bottom + offset, text, size=size, anchor="middle"
            )

    def ylabel(self, text: str, *, offset: float = 30.0, size: float = 8.0, right: bool = False) -> None:
        if text:
            x = self.box.right + offset if right else self.box.left - offset
            y = (self.box.top + self.box.bottom) / 2
            self.canvas.text(x, y, text, size=size, anchor="middle", rotate=90 if right else -90)

    def title(self, text: str, *, size: float = 8.5) -> None:
        if text:
            self.canvas.text((self.box.left + self.box.right) / 2, self.box.top - 8, text, size=size, anchor="middle")

    def legend(self, entries: Sequence[Legend], *, outside: bool = True, size: float = 7.0) -> None:
        """The entries listed top down, right of the area (`outside`) or in its upper right corner."""
        entries = [e for e in entries if e.label]
        width = legend_width(entries, size)
        x = self.box.right + 8 if outside else self.box.right - 6 - width
        if entries and not outside:
            height = len(entries) * (size + 4) + 4
            self.canvas.rect(x - 3, self.box.top + 2, width - 2, height, fill="#ffffff", stroke=GRID)
        legend_at(self.canvas, x, self.box.top + 6, entries, size=size)


def legend_at(
    canvas: Canvas, x: float, y: float, entries: Sequence[Legend], *, columns: int = 1, size: float = 7.0
) -> None:
    """Legend entries from (x, y), the first line's middle: top down, or `columns` to a line."""
    step = max((legend_width([e], size) + 10 for e in entries), default=0.0)
    for index, entry in enumerate(e for e in entries if e.label):
        left, middle = x + (index % columns) * step, y + (index // columns) * (size + 4)
        if entry.mark == "line":
            canvas.line(left, middle, left + 14, middle, stroke=entry.color, width=entry.width, dash=entry.dash)
        elif entry.mark == "rect":
            canvas.rect(left + 3, middle - 3.5, 8, 7, fill=entry.color)
        else:
            canvas.marker(left + 7, middle, "o", color=entry.color, hollow=entry.mark == "hollow")
        canvas.text(left + 18, middle, entry.label, size=size)


def legend_width(entries: Sequence[Legend], size: float = 7.0) -> float:
    """The room a legend outside the area takes."""
    return max((text_width(e.label, size) for e in entries if e.label), default=-26.0) + 26.0
