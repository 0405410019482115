"""The report's SVG writer: text stays text, the same drawing gives the same bytes, and scales and ticks land
where a hand count puts them."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markupsafe import Markup

from engine.report._histogram import Bar, BarPanel, Histogram, histogram_html
from engine.report._svg_draw import Axes, Box, Canvas, Legend, Scale, colormap, fit, nice_ticks, tick_label

ROOT = Path(__file__).resolve().parents[3]
SVG = "{http://www.w3.org/2000/svg}"
PLANTED = '<script>alert(1)</script><img src=x onerror="alert(2)">'
PRINTABLE = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40)


def _drawing(label: str) -> Canvas:
    canvas = Canvas(300, 200)
    ax = Axes(canvas, Box(40, 10, 290, 170), (0.0, 1.0), (0.0, 1.0))
    ax.grid(xs=ax.x.ticks(), ys=ax.y.ticks())
    ax.line([0.0, 0.5, 1.0], [0.2, None, 0.9], color="#1570ef", dash="4 2")
    ax.step([0.0, 0.4, 1.0], [1.0, 0.6, 0.3], color="#000000")
    ax.whisker(0.5, 0.2, 0.8, color="#d92d20")
    ax.marker(0.5, 0.5, "D", color="#d92d20")
    ax.area(0.1, 0.3, 0.0, 0.4, fill=colormap("Reds", 0.7))
    ax.frame()
    ax.xticks(ax.x.ticks())
    ax.yticks([0.0, 1.0], [label, label])
    ax.xlabel(label)
    ax.ylabel(label)
    ax.title(label)
    ax.legend([Legend(label, "#1570ef"), Legend("b", "#000000", "dot")])
    return canvas


def _texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return [node.text or "" for node in root.iter(f"{SVG}text")]


@settings(max_examples=60, deadline=None)
@given(PRINTABLE)
def test_any_label_parses_as_xml_and_comes_back_as_the_same_text(label: str) -> None:
    svg = str(_drawing(label).svg(label=label))
    assert _texts(svg).count(label) == 6  # two y ticks, x label, y label, title, legend
    assert ET.fromstring(svg).get("aria-label") == label


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_control_characters_become_spaces_so_the_svg_always_parses(label: str) -> None:
    cleaned = re.sub("[\x00-\x1f\x7f]", " ", label)
    assert cleaned in _texts(str(_drawing(label).svg()))


@settings(max_examples=30, deadline=None)
@given(st.lists(PRINTABLE, min_size=1, max_size=5))
def test_a_plot_block_escapes_its_labels(labels: list[str]) -> None:
    panel = BarPanel(
        tuple(Bar(label, i + 1.0, i + 0.5, i + 1.5) for i, label in enumerate(labels)), "n", horizontal=True
    )
    html = str(histogram_html(Histogram((panel,), (), key="k", caption="c"), Markup("")))
    svg = html[html.index("<svg") : html.index("</svg>") + 6]
    assert set(labels) <= set(_texts(svg))


def test_a_planted_script_is_only_text() -> None:
    svg = str(_drawing(PLANTED).svg(label=PLANTED))
    assert "<script" not in svg and "<img" not in svg and "&lt;script&gt;" in svg
    assert not re.search(r"href|url\(|@import|@font-face|<image|<foreignObject", svg)
    assert PLANTED in _texts(svg)


def test_the_same_drawing_gives_the_same_bytes_and_no_ids() -> None:
    assert _drawing("a").svg() == _drawing("a").svg()
    assert ' id="' not in str(_drawing("a").svg())
    block = Histogram(
        (BarPanel((Bar("x", 0.5, 0.1, 0.9, at=2.0),), "share", limit=(0.0, 1.0)),), (), key="k", caption="c"
    )
    assert histogram_html(block, Markup("")) == histogram_html(block, Markup(""))


@pytest.mark.parametrize(
    ("low", "high", "count", "integer", "ticks"),
    [
        (0.0, 1.0, 5, False, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (0.0, 1.02, 5, False, [0.0, 0.25, 0.5, 0.75, 1.0]),
        (-1.05, 1.05, 6, False, [-1.0, -0.5, 0.0, 0.5, 1.0]),
        (0.0, 110.0, 5, False, [0.0, 25.0, 50.0, 75.0, 100.0]),
        (-0.35, 7.35, 8, True, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]),
        (0.0, 2.0, 8, True, [0.0, 1.0, 2.0]),
        (0.0012, 0.0031, 4, False, [0.0015, 0.002, 0.0025, 0.003]),
        (1.0, 1.0, 5, False, [1.0]),
    ],
)
def test_ticks_are_round_numbers_inside_the_range(
    low: float, high: float, count: int, integer: bool, ticks: list[float]
) -> None:
    assert nice_ticks(low, high, count, integer=integer) == pytest.approx(ticks)


def test_tick_labels_carry_the_decimals_their_spacing_needs() -> None:
    ticks = [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert [tick_label(t, ticks) for t in ticks] == ["\u22121.0", "\u22120.5", "0.0", "0.5", "1.0"]
    assert [tick_label(t, [0.0, 25.0, 50.0]) for t in (0.0, 25.0, 50.0)] == ["0", "25", "50"]
    assert tick_label(0.25, [0.0, 0.25, 0.5]) == "0.25"
    assert tick_label(0.0015, [0.0015, 0.002]) == "0.0015"


def test_scales_map_linearly_hold_the_edges_and_fit_pads_the_data() -> None:
    x = Scale(0.0, 10.0, 100.0, 200.0)
    assert (x(0.0), x(5.0), x(10.0), x(-5.0), x(15.0)) == (100.0, 150.0, 200.0, 100.0, 200.0)
    y = Scale(0.0, 1.0, 170.0, 10.0)  # data up, canvas down
    assert (y(0.0), y(0.25), y(1.0)) == (170.0, 130.0, 10.0)
    ax = Axes(Canvas(100, 100), Box(0, 20, 100, 80), (0.0, 1.0), (0.0, 1.0))
    ax.rows(3)  # row 0 at the top, rows one unit high
    assert (ax.y(0), ax.y(1), ax.y(2)) == (30.0, 50.0, 70.0)
    assert fit([1.0, 3.0]) == pytest.approx((0.9, 3.1))
    assert fit([0.0, 5.0], floor=0.0) == pytest.approx((0.0, 5.25))
    assert fit([None, float("nan")]) == (0.0, 1.0)
    assert fit([2.0]) == pytest.approx((1.45, 2.55))


def test_colormaps_run_light_to_dark_through_their_stops() -> None:
    assert (colormap("Blues", 0.0), colormap("Blues", 0.5), colormap("Blues", 1.0)) == ("#f7fbff", "#6baed6", "#08306b")
    assert colormap("Reds", -1.0) == "#fff5f0" and colormap("Reds", 2.0) == "#67000d"


def test_drawing_every_plot_kind_imports_no_plotting_library() -> None:
    """The report's plots come from this writer: matplotlib cost half a second of every run to import."""
    probe = """
import sys
from markupsafe import Markup
from engine.report._blocks import Heatmap
from engine.report._dots import Dot, DotPanel, Dots, DotSeries
from engine.report._grid import GridPanel, HeatGrid
from engine.report._histogram import Bar, BarPanel, Histogram
from engine.report._html_blocks import html_blocks
from engine.report._survival import Curve, CurvePoint, Survival
import engine.tools.loadtest._html, engine.tools.compare._report
from engine.report._blocks import Table
numbers = Table(("a",), (("1",),))
html_blocks([
    Heatmap(("r",), ("c",), ((1.0,),), (numbers,), key="h", caption="c", xlabel="x", ylabel="y"),
    Dots((DotPanel(("r",), (DotSeries("s", (Dot(0.5, 0.4, 0.6),)),)),), (numbers,), key="d", caption="c"),
    HeatGrid(("r",), ("c",), (GridPanel("p", ((1.0,),)),), numbers, key="g", caption="c"),
    Histogram((BarPanel((Bar("b", 1.0),), "n"),), (numbers,), key="b", caption="c"),
    Survival((Curve("all", (CurvePoint(1, 0.5),), "pooled"),), (numbers,), key="s", caption="c", xlabel="t",
             ylabel="S"),
])
loaded = sorted({m.split(".")[0] for m in sys.modules} & {"matplotlib", "PIL"})
assert not loaded, loaded
"""
    subprocess.run([sys.executable, "-c", probe], check=True, cwd=ROOT, capture_output=True)
