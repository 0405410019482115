"""`simrun loadtest` end to end: files written, sweep and knee, report rebuilt, bad input refused."""

from __future__ import annotations

import io
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import anyio
import httpx2
import orjson
import pytest
from anyio.from_thread import start_blocking_portal
from rich.console import Console

from engine.cli._main import main
from engine.core._format import pct_or_none
from engine.tools._view import serve_report
from engine.tools.loadtest._config import LoadConfig
from engine.tools.loadtest._progress import ConsoleProgress
from engine.tools.loadtest._report import read_requests
from engine.tools.loadtest._run import run_load
from engine.tools.serve._server import LoopbackServer, ServeOptions

SCENARIO = Path(__file__).parents[4] / "scenarios" / "loadtest.yaml"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    """`simrun serve` on its own thread and event loop, as a separate endpoint would be."""
    options = ServeOptions(latency_s=0.01, rpm=5, window_s=0.5)  # 10 requests/s at most: a knee to find
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(LoopbackServer(options)) as serving:
        yield serving


def _run_dir(out: Path) -> Path:
    (found,) = out.iterdir()
    return found


def test_a_run_writes_summary_csv_report_and_manifest(server: LoopbackServer, tmp_path: Path) -> None:
    args = ["loadtest", str(SCENARIO), "--target", server.base_url, "--arrival", "constant", "--rate", "4"]
    args += ["--duration", "0.5", "--warmup", "0", "--think-time", "0.05", "--turns", "2", "--out", str(tmp_path)]
    assert main(args) in (0, 3)  # 3 only when this busy machine's client failed a gate
    run = _run_dir(tmp_path)
    summary = orjson.loads((run / "summary.json").read_bytes())
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    rows = read_requests(run / "requests.csv")
    assert manifest["kind"] == "load" and manifest["status"] == "finished"
    assert summary["requests"]["sent"] == len(rows) == manifest["counts"]["requests"] == 4
    assert "| ttft |" in (run / "report.md").read_text()
    html = (run / "report.html").read_bytes()
    assert html.count(b"<svg") == 2 and b"Validity gates" in html and b"No errors." in html  # over time, histograms
    assert b'src="http' not in html and b"<link" not in html  # self-contained
    share = pct_or_none(summary["goodput"]["share"])  # a percentage, as every report shows a share
    assert share is not None and f'<td class="num">{share}</td>'.encode() in html
    assert main(["report", str(run)]) == 0
    assert orjson.loads((run / "summary.json").read_bytes()) == summary  # rebuilt from the files alone
    assert (run / "report.html").read_bytes() == html
    with serve_report(run) as viewer:  # `simrun view` serves a load run's page, and no episode pages
        assert httpx2.get(viewer.url).content == html
        assert httpx2.get(viewer.url + "episodes/1.html").status_code == 404


def test_a_sweep_steps_the_rate_until_the_slo_breaks_and_reports_the_knee(
    server: LoopbackServer, tmp_path: Path
) -> None:
    """The server admits 10 requests/s: rates 2 and 4 pass; 16 meets 429s and breaks the goodput target.

    No step runs near the server's limit (4 is 2.5x under it, 16 1.6x over), so a loaded machine that sends a step's
    requests in late bunches cannot move the knee."""
    config = tmp_path / "sweep.yaml"  # gates loosened: a busy test machine must not end the sweep early
    config.write_text("gates: {dispatch_p99_ms: 1000, loop_lag_p99_ms: 1000, max_cpu: 1}\n")
    out = tmp_path / "runs"
    args = ["loadtest", str(config), "--target", server.base_url, "--model", "sim-tutor", "--arrival", "constant"]
    args += ["--sweep", "2,4,16,32", "--duration", "1", "--turns", "1", "--slo-e2e-ms", "500", "--out", str(out)]
    main(args)
    summary = orjson.loads((_run_dir(out) / "summary.json").read_bytes())
    assert [step["target_rate"] for step in summary["steps"]] == [2, 4, 16]  # stops at the first failure
    assert summary["sweep"]["knee_rate"] == 4 and summary["sweep"]["broke_at"] == 16
    assert summary["sweep"]["knee_reached"] is True
    assert "knee (last passing step)" in (_run_dir(out) / "report.html").read_text()
    assert summary["steps"][-1]["errors"].get("http_429", 0) > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "1"], "target"),
        (["--target", "http://127.0.0.1:9/v1", "--model", "m"], "needs `rate`"),
        (["--target", "http://127.0.0.1:9/v1", "--model", "m", "--arrival", "concurrency"], "needs `concurrency`"),
        (["--target", "http://x/v1", "--model", "m", "--rate", "1", "--sweep", "4,2"], "increasing"),
        (["--target", "http://x/v1", "--model", "m", "--rate", "1", "--warmup", "90"], "warmup_s"),
        (["--target", "http://x/v1", "--model", "m", "--rate", "1", "--items", "/nonexistent.yaml"], "not found"),
    ],
)
def test_bad_input_is_a_user_error_with_a_message(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["loadtest", *args, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_an_unknown_key_in_the_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("target: http://x/v1\nmodel: m\nrate: 1\nrat: 2\n")
    assert main(["loadtest", str(path)]) == 2
    assert "rat" in capsys.readouterr().err


def test_running_a_load_test_file_as_a_scenario_points_to_loadtest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(SCENARIO)]) == 2
    assert "simrun loadtest" in capsys.readouterr().err


def test_ctrl_c_stops_the_run_and_keeps_what_it_measured(server: LoopbackServer, tmp_path: Path) -> None:
    """The first SIGINT ends a 60 s run at once: exit 130, status interrupted, the rows so far written."""
    args = ["--target", server.base_url, "--model", "sim-tutor", "--rate", "20", "--duration", "60", "--turns", "1"]
    process = subprocess.Popen(
        [sys.executable, "-m", "engine", "loadtest", *args, "--out", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert process.stdout is not None
    assert b"load test" in process.stdout.readline()  # started (imports done, signal handler installed next)
    time.sleep(1.5)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 130, output
    run = _run_dir(tmp_path)
    summary = orjson.loads((run / "summary.json").read_bytes())
    assert summary["status"] == "interrupted" and summary["requests"]["sent"] > 0
    assert len(read_requests(run / "requests.csv")) == summary["requests"]["sent"]


def test_a_scenario_of_another_kind_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["loadtest", str(SCENARIO.parent / "casebench.yaml")]) == 2
    assert "not a load test" in capsys.readouterr().err


def test_report_on_a_load_run_without_its_measurements_is_a_user_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    manifest = {"kind": "load", "config": {"target": "http://x/v1", "model": "m", "rate": 1.0}}
    (run / "manifest.json").write_bytes(orjson.dumps(manifest))
    assert main(["report", str(run)]) == 2
    assert "cannot read the load test's measurements" in capsys.readouterr().err


def _loose_gates(tmp_path: Path) -> Path:
    config = tmp_path / "loose.yaml"  # a busy test machine must not fail a gate and change the verdicts
    config.write_text("gates: {dispatch_p99_ms: 1000, loop_lag_p99_ms: 1000, max_cpu: 1}\n")
    return config


def test_an_unreachable_target_fails_its_gate_before_the_schedule_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing listens there: a 30 s schedule never starts, nothing is sent, the gate fails, exit 3."""
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(LoopbackServer()) as serving:
        dead = serving.base_url  # a port that was just free; nothing listens there once the server is gone
    args = ["loadtest", "--target", dead, "--model", "m", "--rate", "4", "--duration", "30", "--out", str(tmp_path)]
    assert main(args) == 3
    output = capsys.readouterr().out
    assert "target unreachable" in output and "NOT valid" in output
    run = _run_dir(tmp_path)
    summary = orjson.loads((run / "summary.json").read_bytes())
    assert summary["valid"] is False and summary["gates"]["checks"]["target_reachable"]["ok"] is False
    assert read_requests(run / "requests.csv") == []
    assert main(["report", str(run)]) == 0  # the rebuilt summary says the same
    assert orjson.loads((run / "summary.json").read_bytes()) == summary


def test_a_sweep_prints_each_step_and_says_when_no_knee_was_reached(
    server: LoopbackServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both rates stay under the server's 10 requests/s: every step passes, so the knee lies past the last rate."""
    out = tmp_path / "runs"
    args = ["loadtest", str(_loose_gates(tmp_path)), "--target", server.base_url, "--model", "sim-tutor"]
    args += ["--arrival", "constant", "--sweep", "1,2", "--duration", "0.6", "--turns", "1", "--out", str(out)]
    args += ["--slo-e2e-ms", "500"]
    assert main(args) == 0
    output = capsys.readouterr().out
    assert "step 1/2 · 1.00 conversations/s" in output and "step 2/2 · 2.00 conversations/s" in output
    assert output.index("step 1/2") < output.index("step 2/2") < output.index("knee not reached (≥ 2.00")
    summary = orjson.loads((_run_dir(out) / "summary.json").read_bytes())
    assert summary["sweep"]["knee_reached"] is False and summary["sweep"]["broke_at"] is None
    report = (_run_dir(out) / "report.md").read_text()
    html = (_run_dir(out) / "report.html").read_text()
    assert "knee not reached" in report and "knee not reached" in html and "None" not in html
    # the plot draws the SLO and the goodput target, and marks no knee that was not found
    assert "e2e SLO 500 ms" in html and "goodput target" in html and "knee (last passing step)" not in html
    # the verdict sits in the page's first table, beside the status, not only at the bottom
    assert html.index("valid: the client was not the bottleneck") < html.index("Validity gates")


def test_a_closed_loop_reports_its_concurrency_not_a_rate(
    server: LoopbackServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped file sets `rate: 4`; a closed loop must not show it as if it had been the load."""
    args = ["loadtest", str(SCENARIO), "--target", server.base_url, "--arrival", "concurrency", "--concurrency", "3"]
    args += ["--duration", "0.5", "--warmup", "0", "--turns", "1", "--think-time", "0", "--out", str(tmp_path)]
    assert main(args) in (0, 3)
    output = capsys.readouterr().out
    assert "3 conversations at once" in output and "3 at once" in output.split("load test loadtest (")[1]
    assert "4.00" not in output
    summary = orjson.loads((_run_dir(tmp_path) / "summary.json").read_bytes())
    assert summary["concurrency"] == 3 and summary["target_rate"] is None
    assert "3 conversations at once" in (_run_dir(tmp_path) / "report.md").read_text()


@pytest.mark.parametrize("terminal", [False, True])
def test_live_progress_shows_requests_rate_in_flight_errors_and_ttft(
    server: LoopbackServer, tmp_path: Path, terminal: bool
) -> None:
    """Once a second on a terminal and every 10 s down a pipe by default; here faster, to see a few lines."""
    sink = io.StringIO()
    console = Console(file=sink, force_terminal=terminal, width=120)
    assert ConsoleProgress(console).interval_s == (1.0 if terminal else 10.0)
    config = LoadConfig(
        target=server.base_url, model="sim-tutor", arrival="constant", rate=8.0, duration_s=0.8, turns=1
    )
    anyio.run(partial(run_load, config, out=tmp_path, progress=ConsoleProgress(console, interval_s=0.2)))
    text = sink.getvalue()
    assert re.search(r"requests \d+ \([\d.]+/s\) · in flight \d+ · errors \d+ · TTFT p50 ([\d,]+ ms|–)", text), text
    assert terminal == ("\x1b[" in text)  # a terminal's line is redrawn in place; a pipe gets plain lines


def test_live_progress_sums_the_worker_processes(server: LoopbackServer, tmp_path: Path) -> None:
    """With --workers 2 each process reports its counters once a second and the line shows their sum."""
    sink = io.StringIO()
    config = LoadConfig(
        target=server.base_url, model="sim-tutor", arrival="constant", rate=8.0, duration_s=2.0, turns=1, workers=2
    )
    result = anyio.run(
        partial(run_load, config, out=tmp_path, progress=ConsoleProgress(Console(file=sink), interval_s=0.25))
    )
    sent = [int(found) for found in re.findall(r"requests (\d+) ", sink.getvalue())]
    assert sent and max(sent) > 0 and sent == sorted(sent)  # counts arrive from the workers and only grow
    assert max(sent) <= result.summary["requests"]["sent"]
