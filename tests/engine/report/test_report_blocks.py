"""The engine's one set of renderers over report blocks: report.md, the terminal and report.html agree."""

from __future__ import annotations

import re

from rich.console import Console

from engine.report._blocks import (
    SIMRUN_ADDITION,
    Block,
    Brief,
    Forest,
    ForestPanel,
    Heatmap,
    Interval,
    Note,
    Section,
    Strong,
    Table,
    provenance_of,
    unlabelled,
)
from engine.report._console import console_blocks
from engine.report._grid import GridPanel, HeatGrid
from engine.report._html_blocks import html_blocks
from engine.report._markdown import markdown_blocks
from tests.helpers import ESCAPED, PLANTED

TABLE = Table(
    ("name", "rate", "n"),
    (("a|b", Brief("12% [3%, 30%] (n=9)", "12%"), 9), (Strong("c"), None, 0)),
    title="Rates per arm",
    caption="Wilson intervals.",
    key="rates",
    row_classes=("", "violation"),
    console_columns=("name", "rate"),
)


def _printed(blocks: list[object], width: int = 80) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(console_blocks(blocks))  # type: ignore[arg-type]
    return console.export_text()


def test_markdown_is_headings_pipe_tables_and_notes() -> None:
    blocks = [Section("Results", (Note("Why these numbers."), TABLE, Section("Detail", (Note("More."),))))]
    assert markdown_blocks(blocks) == (
        "## Results\n\nWhy these numbers.\n\n"
        "| name | rate | n |\n|---|---|---|\n| a\\|b | 12% [3%, 30%] (n=9) | 9 |\n| **c** | – | 0 |\n\n"
        "Wilson intervals.\n\n### Detail\n\nMore.\n"
    )


def test_the_terminal_shows_titled_tables_with_their_chosen_columns_and_short_cells() -> None:
    hidden = Heatmap(("x",), ("x",), ((1,),), (Table(("x",), (("1",),), title="counts"),), "h", "c", "x", "y")
    text = _printed([Section("Results", (Note("Not printed."), Note("Printed.", console=True), TABLE, hidden))])
    assert "Rates per arm" in text and "Printed." in text and "Not printed." not in text
    assert "12%" in text and "(n=9)" not in text and "Wilson" not in text
    header = next(line for line in text.splitlines() if "name" in line)
    assert "rate" in header and " n " not in header
    assert "counts" not in text  # a heatmap stays out of the terminal unless it asks
    assert max(len(line) for line in text.splitlines()) <= 80


def test_html_escapes_highlights_and_puts_each_plot_before_its_numbers() -> None:
    forest = Forest(
        (ForestPanel("r", (Interval("a − b", 0.4, 0.1, 0.7, highlight=True), Interval(PLANTED, None))),),
        Table(("contrast", "r"), (("a − b", "+0.40"), (PLANTED, None)), key="diff"),
        key="diff",
        caption=PLANTED,
        xlabel="r",
        xlim=(-1.0, 1.0),
        band=0.1,
    )
    heatmap = Heatmap(
        ("g1", "g2"),
        ("g1", "g2"),
        ((2, 1), (0, 3)),
        (Table(("", "g1", "g2"), (("g1", Strong("2"), 1), ("g2", 0, Strong("3"))), key="cm"),),
        key="cm",
        caption="counts",
        xlabel="predicted",
        ylabel="gold",
    )
    html = str(html_blocks([Section(PLANTED, (TABLE, forest, heatmap), key="s")]))
    assert PLANTED not in html and html.count(ESCAPED) >= 3
    assert len(re.findall(r'<svg class="plot-svg"', html)) == 2
    for key in ("diff", "cm"):
        assert html.index(f'id="tbl-{key}"') > html.index(f'id="fig-{key}"')
    assert '<tr class="violation"><td><strong>c</strong></td>' in html
    assert "12% [3%, 30%] (n=9)" in html
    assert '<td class="num"><strong>3</strong></td>' in html  # a bold number is still a number (right aligned)


def test_html_plots_rebuild_byte_identically() -> None:
    forest = Forest(
        (ForestPanel("m", (Interval("x", 0.2, -0.1, 0.5),)), ForestPanel("n", (Interval("x", -0.3),))),
        Table(("label", "m", "n"), (("x", "+0.20", "-0.30"),), key="f"),
        key="f",
        caption="two panels",
        xlabel="score",
    )
    assert html_blocks([forest]) == html_blocks([forest])


def test_a_heat_grid_draws_one_panel_per_matrix_and_shows_its_numbers_in_text() -> None:
    numbers = Table(
        ("metric", "F/F", "F/M", "M/F", "M/M"),
        (("rate", "0.1", "0.4", "0.15", None), (PLANTED, "2", "3", "4", "5")),
        key="grid",
        console_columns=(),
    )
    grid = HeatGrid(
        ("is F", "is M"),
        ("told F", "told M"),
        (GridPanel("rate", ((0.1, 0.4), (0.15, None))), GridPanel(PLANTED, ((2.0, 3.0), (4.0, 5.0)))),
        numbers,
        key="grid",
        caption="cell means",
        columns=3,
    )
    html = str(html_blocks([Section("Panels", (grid,), key="g")]))
    assert PLANTED not in html and ESCAPED in html
    assert len(re.findall(r'<svg class="plot-svg"', html)) == 1
    assert html.index('id="tbl-grid"') > html.index('id="fig-grid"')
    svg = html[html.index("<svg") : html.index("</svg>")]
    cells = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert {"0.1", "0.4", "0.15", "–", "2", "5", "rate", "is M", "told F"} <= set(cells)
    assert html_blocks([grid]) == html_blocks([grid])
    assert markdown_blocks([grid]) == (
        "| metric | F/F | F/M | M/F | M/M |\n|---|---|---|---|---|\n| rate | 0.1 | 0.4 | 0.15 | – |\n"
        f"| {PLANTED} | 2 | 3 | 4 | 5 |\n"
    )
    assert "rate" not in _printed([grid])


def test_provenance_is_shown_under_its_heading_in_every_output_and_inherited_by_nested_sections() -> None:
    table = Table(("a",), (("1",),), title="numbers")
    inner = Section("Inner", (table,), key="inner")
    blocks = [
        Section("Reproduced", (inner,), key="outer", provenance="Paper Table 9"),
        Section("Extra", (Note("n"), table), key="extra", provenance=SIMRUN_ADDITION),
    ]
    assert unlabelled(blocks) == []
    assert provenance_of(blocks) == [
        {"section": "Reproduced", "key": "outer", "provenance": "Paper Table 9"},
        {"section": "Reproduced › Inner", "key": "inner", "provenance": "Paper Table 9"},
        {"section": "Extra", "key": "extra", "provenance": SIMRUN_ADDITION},
    ]
    markdown = markdown_blocks(blocks)
    assert "## Reproduced\n\n*Provenance: Paper Table 9*\n\n### Inner" in markdown
    assert f"## Extra\n\n*Provenance: {SIMRUN_ADDITION}*" in markdown
    html = str(html_blocks(blocks))
    assert '<h3>Reproduced</h3><p class="provenance">Provenance: Paper Table 9</p>' in html
    assert html.count('class="provenance"') == 2
    console = Console(width=120, record=True)
    console.print(console_blocks(blocks))
    shown = console.export_text()
    assert "Reproduced · Paper Table 9" in shown and f"Extra · {SIMRUN_ADDITION}" in shown


def test_unlabelled_names_every_section_and_loose_block_without_provenance() -> None:
    table = Table(("a",), (("1",),))
    blocks: list[Block] = [
        Section("Bare", (Section("Child", (table,)),)),
        Note("loose"),
        Section("Fine", (table,), provenance="x"),
    ]
    assert unlabelled(blocks) == ["section 'Bare'", "section 'Child'", "Note outside any section"]


def test_html_table_headers_break_only_between_words_and_the_caption_sits_above_the_scroll_box() -> None:
    """A wide table scrolls inside its box: its caption stays outside (readable at any width) and a header
    may break after "_" or "/" but never inside a word (the page CSS no longer breaks anywhere)."""
    block = Table(("provide_similar_problem", "requests/s"), (("a", "1"),), caption="Counts per label", key="w")
    html = str(html_blocks([block]))
    assert "<th>provide_<wbr>similar_<wbr>problem</th><th>requests/<wbr>s</th>" in html
    assert html.index('<p class="table-caption">Counts per label</p>') < html.index('<div class="table-wrap">')
    assert "<caption>" not in html
