"""Survival, hazard, histogram, bullet and rate-heatmap blocks, drawn by the engine's one set of renderers."""

from __future__ import annotations

import re

from rich.console import Console

from engine import (
    Bar,
    BarPanel,
    Block,
    Bullets,
    Curve,
    CurvePoint,
    Dot,
    DotPanel,
    Dots,
    DotSeries,
    Heatmap,
    Histogram,
    Section,
    Survival,
    Table,
)
from engine.report._console import console_blocks
from engine.report._html_blocks import html_blocks
from engine.report._markdown import markdown_blocks
from tests.helpers import ESCAPED, PLANTED

STEPS = Table(("exchange", "still safe"), ((1, "75.0%"), (2, "50.0%")), key="km")
SURVIVAL = Survival(
    (
        Curve(PLANTED, (CurvePoint(1, 0.8), CurvePoint(2, 0.6)), style="muted"),
        Curve("fastest", (CurvePoint(1, 0.5), CurvePoint(2, 0.25))),
        Curve("all", (CurvePoint(1, 0.75), CurvePoint(2, 0.5)), style="pooled"),
    ),
    (STEPS,),
    key="km",
    caption="Kaplan–Meier",
    xlabel="exchange",
    ylabel="still safe",
    muted_label="others",
)
HAZARD = Survival(
    (Curve("all", (CurvePoint(1, 0.25, 0.1, 0.4), CurvePoint(2, None), CurvePoint(3, 0.5, 0.2, 0.8))),),
    (Table(("exchange", "hazard"), ((1, "25%"), (2, None), (3, "50%")), key="hz", console_columns=()),),
    key="hz",
    caption="hazard",
    xlabel="exchange",
    ylabel="hazard",
    hazard=True,
    reference=0.4,
    reference_label="later, pooled",
)
HISTOGRAM = Histogram(
    (
        BarPanel((Bar("a", 0.5, 0.2, 0.8), Bar(PLANTED, 0.1)), "share", horizontal=True, limit=(0.0, 1.0)),
        BarPanel((Bar("0", 3, at=0), Bar("2", 1, at=2)), "dialogues", category_label="events"),
    ),
    (Table(("events", "dialogues"), ((0, 3), (2, 1)), title="Events per dialogue", key="hist"),),
    key="hist",
    caption="events",
    widths=(3.0, 2.0),
    console=True,
)
RATES = Heatmap(
    ("x", "y"),
    ("single", "multi"),
    ((0.25, None), (0.75, 1.0)),
    (Table(("", "single", "multi"), (("x", "25%", None), ("y", "75%", "100%")), key="rates"),),
    key="rates",
    caption="rates",
    xlabel="",
    ylabel="",
    cells=(("25% [10%–40%]", "–"), ("75% [60%–90%]", "100% [90%–100%]")),
    cmap="Reds",
    vmax=1.0,
    light_above=0.6,
    columns_on_top=True,
)


SHARES = DotPanel(
    ("a", PLANTED),
    (DotSeries("x", (Dot(0.5, 0.3, 0.7, highlight=True), None)), DotSeries("y", (Dot(0.4), Dot(0.2, 0.1, 0.3)))),
    title="variant (chance 50%)",
    lines=(0.5,),
    ticks=((0, 0.25),),
    highlight_color="#12b76a",
)
DOTS = (
    Dots(
        (SHARES, DotPanel(("b",), (DotSeries("z", (Dot(0.9, 0.8, 1.0),)),), title="second")),
        (Table(("row", "x"), (("a", "50%"),), key="stacked"),),
        key="stacked",
        caption="stacked panels",
        stacked=True,
    ),
    Dots(
        (
            DotPanel(
                ("a", "b"),
                (DotSeries("before", (Dot(0.2), None)), DotSeries("after", (Dot(0.6), Dot(0.3)))),
                joined=True,
            ),
            DotPanel(
                ("a", "b"),
                (DotSeries("r", (Dot(0.4, 0.1, 0.7, True), Dot(-0.1, -0.5, 0.3))),),
                xlim=(-1.05, 1.05),
                band=0.1,
            ),
        ),
        (Table(("row", "r"), (("a", "+0.40"),), title="Side by side", key="side"),),
        key="side",
        caption="means and effects",
        console=True,
    ),
)


def test_dot_plots_draw_stacked_and_side_by_side_panels_before_their_numbers() -> None:
    html = str(html_blocks(list(DOTS)))
    assert len(re.findall(r'<svg class="plot-svg"', html)) == 2
    for key in ("stacked", "side"):
        assert html.index(f'id="tbl-{key}"') > html.index(f'id="fig-{key}"')
    assert PLANTED not in html and "&lt;script&gt;alert" in html and "variant (chance 50%)" in html  # a row label
    assert html_blocks(list(DOTS)) == html_blocks(list(DOTS))
    assert "| a | 50% |" in markdown_blocks(list(DOTS))
    console = Console(width=100, record=True, color_system=None)
    console.print(console_blocks(list(DOTS)))
    assert "Side by side" in console.export_text() and "50%" not in console.export_text()


def _blocks() -> list[Block]:
    facts = Bullets((f"planted: {PLANTED}", "second"), console=True)
    return [Section("Time to event", (SURVIVAL, HAZARD, HISTOGRAM, RATES, facts), key="t")]


def test_html_draws_each_plot_then_its_numbers_and_escapes_every_label() -> None:
    html = str(html_blocks(_blocks()))
    assert len(re.findall(r'<svg class="plot-svg"', html)) == 4
    for key in ("km", "hz", "hist", "rates"):
        assert html.index(f'id="tbl-{key}"') > html.index(f'id="fig-{key}"')
    assert PLANTED not in html and ESCAPED in html
    assert f"<ul><li>planted: {ESCAPED}" in html and "</li><li>second</li></ul>" in html
    rates = html[html.index('id="fig-rates"') : html.index('id="tbl-rates"')]
    assert "100% [90%–100%]" in rates and "25% [10%–40%]" in rates  # each cell's own text, as text
    survival = html[html.index('id="fig-km"') : html.index('id="tbl-km"')]
    assert "others" in survival and "fastest" in survival  # the legend names the grey curves once
    assert "later, pooled" in html[html.index('id="fig-hz"') : html.index('id="tbl-hz"')]


def test_html_plots_rebuild_byte_identically() -> None:
    assert html_blocks(_blocks()) == html_blocks(_blocks())


def test_markdown_shows_the_numbers_and_the_bullets() -> None:
    text = markdown_blocks(_blocks())
    assert "| 1 | 75.0% |" in text and "| 3 | 50% |" in text and "| 2 | – |" in text
    assert "| 2 | 1 |" in text and "| y | 75% | 100% |" in text
    assert f"- planted: {PLANTED}\n- second\n" in text


def test_the_terminal_shows_plots_only_when_asked_and_hidden_tables_never() -> None:
    console = Console(width=100, record=True, color_system=None)
    console.print(console_blocks(_blocks()))
    text = console.export_text()
    assert "Events per dialogue" in text and "- second" in text  # the histogram and bullets asked
    assert "still safe" not in text and "hazard" not in text and "single" not in text
