"""One rendering path and one number formatter, checked on the source: every result table of the engine and the
plug-ins is a report block drawn by the block renderers (report.md, terminal, report.html), and every number a
report shows goes through `engine.core._format` (or the p/effect/level formatters beside their statistics).

A table built by hand in one output drifts from the other two; a number formatted by hand in one table reads
differently from the same number in the next. These tests grep for both and name the file and line.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "judges", "agents", "personas")

RENDERERS = {
    "engine/report/_markdown.py": "blocks as report.md",
    "engine/report/_console.py": "blocks on the terminal",
    "engine/report/_html_blocks.py": "blocks as report.html",
    "engine/report/_svg.py": "the escaped HTML table the HTML renderer draws",
    "engine/core/_format.py": "fit_to_width reshapes the console renderer's tables for a narrow screen",
}
"""The renderers themselves: the only places a table becomes text."""

NOT_RESULTS = {
    "engine/cli/_main.py": "`simrun list`: the registered names and what each is",
    "engine/cli/_runs.py": "`simrun runs`: the run directories on disk",
    "engine/cli/_sequential_plan.py": "a sequential plan's forecast before anything runs (its labels never wrap)",
}
"""Command-line screens that show no result of a run (listings, a forecast): rich tables with their own layout."""

HAND_RENDERED = {
    "markdown table": re.compile(r"""(?:^|[\s(\[,=+])f?["']\|[ :\-]"""),
    "HTML table": re.compile(r"<t(?:able|head|body|r|d|h)\b"),
    "rich table": re.compile(r"from rich\.table import|rich\.table\.Table"),
    "HTML table helper": re.compile(r"from engine\.report\._svg import[^\n]*\btable\b"),
}

REPORT_MODULES = (
    "engine/report/*.py",
    "engine/cli/_live.py",
    "engine/cli/_show.py",
    "engine/cli/_sequential_plan.py",
    "engine/cli/_loadtest.py",
    "engine/runtime/_runs.py",
    "engine/runtime/_duration.py",
    "engine/runtime/_sequential.py",
    "engine/scenario/_budget.py",
    "engine/tools/loadtest/_metrics.py",
    "engine/tools/loadtest/_mode.py",
    "engine/tools/compare/*.py",
    "engine/tools/calibrate/*.py",
    "engine/tools/loadtest/_report.py",
    "engine/tools/loadtest/_html.py",
    "engine/tools/loadtest/_progress.py",
    "judges/*_blocks.py",
    "judges/*_text.py",
    "judges/fairness_pivot.py",
    "judges/fairness_planning.py",
)
"""Modules whose text a report, a comparison, a calibration or a load test shows, and the terminal's lines about a
run's progress, plan, spend and duration (`engine.stats._families` formats p values and effects beside them)."""

NUMERIC_SPEC = re.compile(r":[+\- ]?[,_]?\d*(?:\.\d+)?[%fFgGeEn]\}|:[,_]d?\}")
OTHER_FORMATTING = re.compile(r"""\bformat\([^)]*,\s*["'][+\- ]?[,_]?\d*(?:\.\d+)?[%fFgGeEn]["']\)|%\.?\d+[fge]\b""")

FORMAT_ALLOWED = {
    "engine/report/_svg_draw.py": "SVG coordinates and axis tick labels: drawing, not a reported number",
}


def _files(patterns: tuple[str, ...] | None = None) -> list[Path]:
    if patterns is None:
        return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))
    return sorted({path for pattern in patterns for path in ROOT.glob(pattern)})


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_no_result_is_rendered_outside_the_block_renderers() -> None:
    found = []
    for path in _files():
        name = _name(path)
        if name in RENDERERS or name in NOT_RESULTS:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [
                f"{name}:{number}: {what}: {line.strip()}" for what, rx in HAND_RENDERED.items() if rx.search(line)
            ]
    assert not found, "results rendered by hand (build report blocks instead):\n" + "\n".join(found)


def test_the_allow_lists_name_files_that_exist_and_still_need_it() -> None:
    for name in (*RENDERERS, *NOT_RESULTS, *FORMAT_ALLOWED):
        assert (ROOT / name).is_file(), f"{name} is allowed but no longer exists"
    for name in NOT_RESULTS:
        text = (ROOT / name).read_text(encoding="utf-8")
        assert HAND_RENDERED["rich table"].search(text), f"{name} builds no table: drop it from NOT_RESULTS"


def test_no_number_in_a_report_is_formatted_outside_the_formatter() -> None:
    found = []
    for path in _files(REPORT_MODULES):
        name = _name(path)
        if name in FORMAT_ALLOWED:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if NUMERIC_SPEC.search(line) or OTHER_FORMATTING.search(line):
                found.append(f"{name}:{number}: {line.strip()}")
    assert not found, "numbers formatted by hand (call engine.core._format):\n" + "\n".join(found)


def test_the_checks_catch_what_they_look_for() -> None:
    """The patterns match the hand-rendering they exist to catch, so a green run means something."""
    assert HAND_RENDERED["markdown table"].search('lines = ["| metric | level |", "|---|---|"]')
    assert HAND_RENDERED["markdown table"].search('f"| {name} | {row} |"')
    assert not HAND_RENDERED["markdown table"].search('" | ".join(parts)  # a separator, not a table')
    assert HAND_RENDERED["HTML table"].search("Markup('<tr>{}</tr>')")
    assert HAND_RENDERED["rich table"].search("from rich.table import Table")
    assert HAND_RENDERED["HTML table helper"].search("from engine.report._svg import paragraph, table")
    for spec in ('f"{n:,}"', 'f"{x:.2f}"', 'f"{x:+.1f} pp"', 'f"{share:.0%}"', 'f"{v:,.1f}"', 'f"{q:g}"', 'f"{e:.3g}"'):
        assert NUMERIC_SPEC.search(spec), spec
    assert OTHER_FORMATTING.search('format(value, ".2f")') and OTHER_FORMATTING.search('"%.3f" % value')
    assert not NUMERIC_SPEC.search('f"{name!r} {count} {label:>8}"')
