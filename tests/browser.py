"""Opening simrun's pages in Debian's headless Chromium, shared by the report and tool-page browser tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("SIMRUN_CHROMIUM", "/usr/bin/chromium"))
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
"""Without the background-networking flags Chromium tries hosts this closed network refuses."""

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}: install Debian's chromium (apt-get install chromium)"
)


def open_page(browser: Any, path: Path) -> tuple[Any, Any, list[str], list[str]]:
    """A fresh tab on `path`: its context, the page, the console errors and warnings and page errors it raised,
    and every URL it requested (a report fetches nothing besides itself)."""
    context = browser.new_context(viewport={"width": 1280, "height": 1400})
    opened = context.new_page()
    problems: list[str] = []
    requests: list[str] = []
    opened.on(
        "console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None
    )
    opened.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    opened.on("request", lambda r: requests.append(r.url))
    opened.goto(path.as_uri())
    opened.wait_for_load_state("load")
    return context, opened, problems, requests
