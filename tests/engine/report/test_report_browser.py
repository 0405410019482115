"""report.html in a real browser: headless Debian Chromium driven by Playwright (no browser download).

Skips, saying why, when Playwright or /usr/bin/chromium is missing (`.ci/run` installs Chromium with apt-get).
Screenshots are kept in tests/artifacts/ (ignored by git): report-top.png, report-transcript.png,
report-casebench.png and report-remath.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import engine
from engine.core._records import EpisodeRecord
from engine.report._page import select_transcripts
from engine.report._rebuild import REPORT_HTML, write_report
from tests.browser import CHROMIUM, FLAGS, needs_chromium, open_page

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install -e '.[dev]')")

ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = ROOT / "tests" / "artifacts"
PLANTED = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped crescendo scenario on two items per domain (132 episodes), one transcript planted with markup."""
    scenario = engine.load_scenario(ROOT / "scenarios" / "crescendo.yaml", overrides=["items.0.limit=2"])
    run = Path(engine.run_sync(scenario, out=tmp_path_factory.mktemp("browser")).run_dir)
    lines = (run / "episodes.jsonl").read_bytes().splitlines()
    target = min(select_transcripts([EpisodeRecord.model_validate_json(line) for line in lines]))
    record = orjson.loads(lines[target])
    record["turns"][-1]["text"] = PLANTED
    lines[target] = orjson.dumps(record)
    (run / "episodes.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    write_report(run)
    return run / REPORT_HTML


KINDS = {
    # scenario: (overrides, plots, the table whose rows are checked, its rows, a verdict to filter by)
    # seven plots: success is one figure per response type (immediate, long_term, overall), then four more
    "casebench": (["replicates=1"], 7, "tbl-cases-success", 6, "mcq correct"),
    # six plots (Tasks A and B's matrices and strategy–intention pairings, Task C's scores); six conditions: the
    # paper's four, `predicted` and the Human row
    "remath": (["items.0.limit=15"], 6, "tbl-remath-conditions", 6, "reply preferred"),
}


@pytest.fixture(scope="module")
def kind_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The shipped cases and remediation scenarios, cut down (135 and 90 episodes)."""
    found = {}
    for name, (overrides, *_) in KINDS.items():
        scenario = engine.load_scenario(ROOT / "scenarios" / f"{name}.yaml", overrides=overrides)
        found[name] = Path(engine.run_sync(scenario, out=tmp_path_factory.mktemp(name)).run_dir) / REPORT_HTML
    return found


@pytest.fixture(scope="module")
def browser(report: Path, kind_reports: dict[str, Path]) -> Iterator[Any]:
    """Launched after the module's runs: a run needs an event loop that Playwright's would block."""
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(report: Path, browser: Any) -> Iterator[Any]:
    """A fresh tab on the report; `report` comes first: the run needs an event loop Playwright's would block."""
    context, opened, problems, requests = open_page(browser, report)
    yield opened
    context.close()
    assert problems == []
    assert requests == [report.as_uri()], "the page fetched something besides itself"


def test_plots_and_tables_render(page: Any) -> None:
    """Four inline SVG plots (harm-rate heatmap, survival, hazard, backtracks) with a real size, their tables, the
    header and the simulator note are visible."""
    plots = page.locator("svg.plot-svg")
    assert plots.count() == 4
    for index in range(4):
        box = plots.nth(index).bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 150
    assert page.locator("#fig-crescendo-heatmap svg text").count() > 33
    assert page.locator("#tbl-harm tbody tr").count() == 11
    assert page.locator("#tbl-survival tbody tr").count() > 0 and page.locator("#tbl-backtracks").is_visible()
    assert page.locator("#sim-note").is_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report-top.png"))


def _count(page: Any) -> str:
    return str(page.locator("#episode-count").inner_text())


def test_filters_narrow_the_episode_list(page: Any) -> None:
    """Condition, verdict and search filters hide the other episodes; reset shows them all again."""
    assert _count(page) == "132 of 132 episodes"
    page.select_option("select[data-key='format']", "single")
    assert _count(page) == "66 of 132 episodes"
    formats = page.eval_on_selector_all(
        ".episode:not([hidden])", "els => els.map(e => JSON.parse(e.dataset.condition).format)"
    )
    assert set(formats) == {"single"}
    page.select_option("select[data-filter='verdict']", "unsafe reply")
    shown = int(_count(page).split()[0])
    assert 0 < shown < 66
    page.click("#episode-reset")
    first_id = page.locator(".episode .ep-id").nth(5).inner_text()
    page.fill("#episode-search", first_id)
    assert _count(page) == "1 of 132 episodes"
    page.click("#episode-reset")
    page.check("input[data-filter='embedded']")
    assert int(_count(page).split()[0]) == page.locator(".episode.embedded").count()
    page.click("#episode-reset")
    assert _count(page) == "132 of 132 episodes"


def test_transcripts_show_backtracks_votes_and_escaped_text(page: Any) -> None:
    """An opened dialogue marks backtracked turns, puts judges' votes beside the turn, and shows markup as text."""
    episode = page.locator(".episode.embedded:has(li.backtracked)").first
    episode.locator(":scope > summary").click()
    badge = episode.locator(".badge-backtrack").first
    assert badge.is_visible()
    tutor = episode.locator("li.turn.role-tutor:has(aside)").first
    text_box, votes_box = tutor.locator(".utterance").bounding_box(), tutor.locator("aside").bounding_box()
    assert votes_box["x"] > text_box["x"] + text_box["width"] - 1 and abs(votes_box["y"] - text_box["y"]) < 40
    assert "unsafe" in tutor.locator("aside").inner_text()
    episode.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "report-transcript.png"))
    page.fill("#episode-search", "window.pwned")
    planted = page.locator(".episode:not([hidden])").first
    planted.locator(":scope > summary").click()
    assert planted.get_by_text(PLANTED, exact=True).is_visible()
    assert page.evaluate("typeof window.pwned") == "undefined"


@pytest.mark.parametrize("name", sorted(KINDS))
def test_cases_and_remath_reports_render_and_filter(name: str, kind_reports: dict[str, Path], browser: Any) -> None:
    """The cases and ReMath sections draw their plots and tables, and their verdicts filter the episodes."""
    _, plots_expected, table_id, rows, verdict = KINDS[name]
    report = kind_reports[name]
    context, opened, problems, requests = open_page(browser, report)
    plots = opened.locator("svg.plot-svg")
    assert plots.count() == plots_expected
    for index in range(plots_expected):
        box = plots.nth(index).bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 150
    assert opened.locator(f"#{table_id} tbody tr").count() == rows and opened.locator(f"#{table_id}").is_visible()
    total = int(_count(opened).split()[-2])
    opened.select_option("select[data-filter='verdict']", verdict)
    shown = int(_count(opened).split()[0])
    assert 0 < shown < total
    verdicts = opened.eval_on_selector_all(".episode:not([hidden])", "els => els.map(e => e.dataset.verdict)")
    assert set(verdicts) == {verdict}
    opened.click("#episode-reset")
    ARTIFACTS.mkdir(exist_ok=True)
    opened.screenshot(path=str(ARTIFACTS / f"report-{name}.png"))
    context.close()
    assert problems == [] and requests == [report.as_uri()]
