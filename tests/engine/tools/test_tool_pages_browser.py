"""compare.html and a load test's report.html in a real browser (headless Debian Chromium through Playwright): both
pages are drawn by the report blocks' HTML renderer, so they get its plots, tables and styles, and load nothing.

Skips, saying why, when Playwright or /usr/bin/chromium is missing. Screenshots go to tests/artifacts/ (ignored by
git): compare.png and loadtest.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal

import engine
from engine.cli._main import main
from engine.report._blocks import FINDING_MARK
from engine.tools.serve._server import LoopbackServer, ServeOptions
from tests.browser import CHROMIUM, FLAGS, needs_chromium, open_page
from tests.helpers import make_scenario, write_bank

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install -e '.[dev]')")

ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = ROOT / "tests" / "artifacts"

pytestmark = needs_chromium


def _run(base: Path, name: str, *, leak: float) -> Path:
    folder = base / name
    folder.mkdir()
    write_bank(folder / "bank.yaml", None)
    tutor = {"model": "sim/tutor", "params": {"leak_base": leak, "leak_per_turn": 0.1}}
    models = {"tutor": tutor, "student": "sim/student", "judge": ["sim/judge"]}
    return Path(engine.run_sync(make_scenario(folder, models=models, replicates=2), out=folder / "runs").run_dir)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A comparison of a low-leak and a high-leak tutor, and a short load test against `simrun serve`."""
    base = tmp_path_factory.mktemp("pages")
    low, high = _run(base, "low", leak=0.05), _run(base, "high", leak=0.6)
    assert main(["compare", str(low), str(high), "--out", str(base / "cmp")]) == 0
    options = ServeOptions(latency_s=0.01)
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(LoopbackServer(options)) as serving:
        args = ["loadtest", str(ROOT / "scenarios" / "loadtest.yaml"), "--target", serving.base_url]
        args += ["--arrival", "constant", "--rate", "4", "--duration", "0.5", "--warmup", "0", "--turns", "2"]
        assert main([*args, "--think-time", "0.05", "--out", str(base / "load")]) in (0, 3)  # 3: a failed gate
    (load,) = (base / "load").iterdir()
    return {"compare": base / "cmp" / "compare.html", "loadtest": load / "report.html"}


@pytest.fixture(scope="module")
def browser(pages: dict[str, Path]) -> Iterator[Any]:
    """Launched after the runs: a run needs an event loop that Playwright's would block."""
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield launched
        launched.close()


# page: (plots, the table whose rows are checked, the least rows it has)
EXPECTED = {"compare": (1, "tbl-contrasts", 4), "loadtest": (2, "tbl-latency", 3)}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tool_pages_draw_their_plots_and_tables(name: str, pages: dict[str, Path], browser: Any) -> None:
    plots_expected, table_id, rows = EXPECTED[name]
    context, opened, problems, requests = open_page(browser, pages[name])
    plots = opened.locator("svg.plot-svg")
    assert plots.count() == plots_expected
    for index in range(plots_expected):
        box = plots.nth(index).bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100
    table = opened.locator(f"#{table_id}")
    assert table.is_visible() and table.locator("tbody tr").count() >= rows
    assert opened.locator("section.result h3").count() >= 2  # the block renderer's sections
    ARTIFACTS.mkdir(exist_ok=True)
    opened.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    context.close()
    assert problems == []
    assert requests == [pages[name].as_uri()], "the page fetched something besides itself"


def test_compare_marks_its_findings_in_the_page(pages: dict[str, Path], browser: Any) -> None:
    """A low- against a high-leak tutor: at least one contrast is a finding, highlighted and marked in the table."""
    context, opened, _, _ = open_page(browser, pages["compare"])
    flagged = opened.locator("#tbl-contrasts tbody tr.violation")
    assert flagged.count() > 0 and flagged.first.locator("td").first.inner_text().startswith(FINDING_MARK)
    context.close()
