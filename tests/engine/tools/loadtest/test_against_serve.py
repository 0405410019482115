"""The load generator against `simrun serve` with known latency, token rate, limits and stalls.

The server runs on the test's own event loop (a real socket, real HTTP). Its sleeps can only end late, never
early, so a configured delay is a lower bound; a loaded machine makes every figure later, by an amount no test can
know, so the upper bounds are wide multiples of the configured delays (`SLACK`), and comparisons between runs are
between figures that differ tenfold or more. No assertion here depends on the machine being idle.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.core._errors import ScenarioError
from engine.tools.loadtest._config import LoadConfig
from engine.tools.loadtest._generator import Health
from engine.tools.loadtest._metrics import summarize
from engine.tools.loadtest._records import RequestRecord
from engine.tools.loadtest._report import read_requests
from engine.tools.loadtest._run import load_items, run_load
from engine.tools.loadtest._workers import run_in_process, run_step
from engine.tools.serve._server import LoopbackServer, ServeOptions, ServerStats

Result = tuple[list[RequestRecord], dict[str, Any], ServerStats]
SLACK = 5.0
"""How many times its configured value a latency may measure on a loaded machine."""
EARLY = 0.95
"""An event loop may wake a timer up to a clock tick early."""


async def _load(serve: dict[str, Any] | None = None, *, processes: bool = False, **settings: Any) -> Result:
    settings = {"arrival": "constant", "rate": 10.0, "duration_s": 0.5, "turns": 1, "think_time_s": 0.0} | settings
    async with LoopbackServer(ServeOptions(**(serve or {}))) as server:
        config = LoadConfig(target=server.base_url, model="sim-tutor", **settings)
        healths: list[Health]
        if processes:
            rows, healths = await run_step(config, load_items(config), rate=config.rate, step=0)
        else:
            rows, health = await run_in_process(config, load_items(config), rate=config.rate, step=0)
            healths = [health]
        stats = server.stats
    return rows, summarize(config, rows, healths, rate=config.rate), stats


async def test_ttft_itl_and_tokens_match_the_server_settings() -> None:
    """TTFT = latency + ttft_s; ITL = 1 / tokens_per_s; token totals are exactly the server's."""
    rows, summary, stats = await _load(
        {"latency_s": 0.02, "ttft_s": 0.05, "tokens_per_s": 200}, rate=8.0, duration_s=1.0, turns=2, think_time_s=0.05
    )
    latency = summary["latency_ms"]
    ttft, itl = 20 + 50, 1000 / 200  # ms: latency_s + ttft_s, and 1 / tokens_per_s
    assert EARLY * ttft <= latency["ttft"]["p50"] <= SLACK * ttft
    assert itl / SLACK <= latency["itl"]["p50"] <= SLACK * itl  # a late read can bunch chunks: both ways
    assert summary["requests"]["ok"] == len(rows) == stats.requests
    assert summary["tokens"]["completion"] == stats.completion_tokens
    assert summary["tokens"]["prompt"] == stats.prompt_tokens
    assert {row.turn for row in rows} == {0, 1}
    assert all(row.messages == 2 + 2 * row.turn for row in rows)  # the history grows by one exchange a turn
    assert summary["latency_ms"]["dispatch_delay"]["p50"] < 1000 / 8 / 2  # on schedule: within half the send gap


async def test_itl_matches_the_token_rate_whatever_the_chunk_size() -> None:
    """One word per chunk: the server paces by the same token estimate its usage reports."""
    _, summary, _ = await _load({"tokens_per_s": 100, "chunk_words": 1}, rate=8.0, duration_s=0.5)
    itl = 1000 / 100
    assert itl / SLACK <= summary["latency_ms"]["itl"]["p50"] <= SLACK * itl


async def test_a_rate_limited_server_shows_every_429_it_sent() -> None:
    rows, summary, stats = await _load({"rpm": 5, "window_s": 60}, rate=20.0, duration_s=0.5)
    assert stats.rate_limited == 5 and len(rows) == 10
    assert summary["errors"] == {"http_429": stats.rate_limited}
    assert all(row.retry_after is not None for row in rows if row.error == "http_429")
    assert summary["requests"]["retries"] == 0  # a 429 is an outcome in load mode


async def test_retries_are_explicit_rows_and_counted() -> None:
    rows, summary, stats = await _load({"error_500": 0.5, "retry_after_s": 0.0, "seed": 3}, retries=3, rate=20.0)
    retried = [row for row in rows if row.attempt > 0]
    assert retried and summary["requests"]["retries"] == len(retried)
    assert stats.requests == len(rows)  # every attempt is one row, none hidden
    assert stats.server_errors == sum(1 for row in rows if row.error == "http_5xx")
    # outcomes are per request (its last attempt); every failed attempt is still counted apart
    assert summary["requests"]["measured"] == len({(row.conversation, row.turn) for row in rows})
    assert summary["attempt_errors"] == {"http_5xx": stats.server_errors}
    assert sum(summary["errors"].values()) == summary["requests"]["measured"] - summary["requests"]["ok"]
    # a retry's backoff is not client queueing: the dispatch delay is that of first attempts only
    firsts = [row.dispatch_delay for row in rows if row.attempt == 0 and row.dispatch_delay is not None]
    assert summary["latency_ms"]["dispatch_delay"]["max"] == pytest.approx(1000 * max(firsts))
    assert summary["latency_ms"]["dispatch_delay"]["n"] == len(firsts) < len(rows)


async def test_coordinated_omission_is_detected_when_the_server_stalls() -> None:
    """Behind a client cap, a stall delays later sends: latency from the send hides it, from the schedule not.

    The stall (2 s from 0.2 s after the server starts) outlasts the whole 1 s schedule even when a loaded machine
    starts the load late, so most sends queue behind it: seconds of delay against the server's 10 ms."""
    stall = {"latency_s": 0.01, "stall_at_s": 0.2, "stall_s": 2.0}
    _, capped, _ = await _load(stall, rate=20.0, duration_s=1.0, max_in_flight=2)
    late = capped["latency_ms"]
    assert capped["gates"]["coordinated_omission"] and not capped["gates"]["valid"]
    hidden = late["e2e_from_schedule"]["p50"] - late["e2e"]["p50"]
    assert late["dispatch_delay"]["p50"] > 10 * 10 and hidden > 10 * 10
    _, open_loop, _ = await _load(stall, rate=20.0, duration_s=1.0)
    latency = open_loop["latency_ms"]
    assert latency["e2e"]["max"] > 10 * 10  # with no cap, the stall shows in the plain latency itself (10x)
    assert latency["dispatch_delay"]["p50"] < late["dispatch_delay"]["p50"] / 4  # sent on schedule
    assert latency["e2e_from_schedule"]["p50"] - latency["e2e"]["p50"] < hidden / 4


async def test_closed_loop_keeps_the_concurrency_and_has_no_schedule() -> None:
    rows, summary, _ = await _load({"latency_s": 0.02}, arrival="concurrency", concurrency=3, rate=None)
    assert summary["in_flight"]["max"] <= 3 and summary["in_flight"]["max"] >= 2
    assert all(row.scheduled is None for row in rows)
    assert "dispatch_delay" not in summary["gates"]["checks"]
    assert any("closed loop" in note for note in summary["gates"]["notes"])


async def test_max_requests_sends_exactly_that_many() -> None:
    rows, summary, _ = await _load(rate=50.0, duration_s=None, max_requests=7, turns=2, think_time_s=0.0)
    assert len(rows) == 7 and summary["requests"]["sent"] == 7
    # the start rate is over the part of the schedule the run covered, not a duration it never had
    assert summary["throughput"]["achieved_start_rate"] == pytest.approx(50.0, rel=0.05)


async def test_an_unreachable_target_is_named_not_blamed_on_the_client() -> None:
    async with LoopbackServer() as server:  # a port that was just free: nothing listens there any more
        target = server.base_url
    # The client's own gates are set loose: a loaded test machine's event loop must not decide this test.
    loose = {"loop_lag_p99_ms": 60_000, "max_cpu": 1.0}
    config = LoadConfig(target=target, model="m", arrival="constant", rate=10.0, duration_s=0.3, turns=1, gates=loose)
    rows, health = await run_in_process(config, load_items(config), rate=10.0, step=0)
    summary = summarize(config, rows, [health], rate=10.0)
    assert rows and summary["errors"] == {"connection": len(rows)}
    assert not summary["gates"]["client_bound"]
    assert any("failed to connect" in note for note in summary["gates"]["notes"])


async def test_the_hard_stop_cancels_requests_still_in_flight() -> None:
    rows, summary, _ = await _load({"latency_s": 5.0}, rate=10.0, duration_s=0.2, grace_s=0.1)
    assert rows and all(row.error == "cancelled" for row in rows)
    assert summary["errors"] == {"cancelled": len(rows)}


async def test_warmup_requests_are_sent_but_not_measured() -> None:
    rows, summary, _ = await _load(rate=20.0, duration_s=0.6, warmup_s=0.3)
    warm = [row for row in rows if row.warmup]
    assert warm and all(row.scheduled is not None and row.scheduled < 0.3 for row in warm)
    assert summary["requests"]["measured"] == len(rows) - len(warm)


@pytest.mark.parametrize(
    ("serve", "stream", "error"),
    [
        ({"malformed_rate": 1.0}, True, "malformed"),
        ({"malformed_rate": 1.0}, False, "malformed"),
        ({"drop_rate": 1.0}, True, "stream_truncated"),
        ({"drop_rate": 1.0}, False, "connection"),
        ({"error_503": 1.0}, True, "http_5xx"),
        ({"quota_rate": 1.0}, True, "http_429"),
    ],
)
async def test_errors_are_typed(serve: dict[str, Any], stream: bool, error: str) -> None:
    rows, summary, _ = await _load(serve, stream=stream, rate=10.0, duration_s=0.3)
    assert rows and summary["errors"] == {error: len(rows)}


@pytest.mark.parametrize("transport", ["lean", "sdk"])
async def test_both_transports_name_a_dropped_stream_alike(transport: str) -> None:
    _, summary, _ = await _load({"drop_rate": 1.0}, transport=transport, rate=10.0, duration_s=0.3)
    assert list(summary["errors"]) == ["stream_truncated"]


async def test_the_sdk_transport_measures_the_same_server_alike() -> None:
    _, summary, stats = await _load({"ttft_s": 0.05, "tokens_per_s": 200}, transport="sdk", rate=8.0, duration_s=0.5)
    ttft, itl = 50, 1000 / 200
    assert EARLY * ttft <= summary["latency_ms"]["ttft"]["p50"] <= SLACK * ttft
    assert itl / SLACK <= summary["latency_ms"]["itl"]["p50"] <= SLACK * itl
    assert summary["tokens"]["completion"] == stats.completion_tokens


async def test_worker_processes_split_the_conversations_and_merge() -> None:
    rows, summary, stats = await _load({"latency_s": 0.01}, processes=True, workers=2, rate=20.0, duration_s=0.5)
    assert {row.worker for row in rows} == {0, 1}
    assert all(row.conversation % 2 == row.worker for row in rows)
    assert sorted(row.conversation for row in rows) == list(range(10))  # the schedule, split without loss
    assert stats.requests == len(rows) and summary["requests"]["ok"] == len(rows)


@pytest.mark.parametrize("workers", [1, 2])
async def test_stopping_early_keeps_every_row_measured(workers: int, tmp_path: Path) -> None:
    """`stop` ends a long run within moments, in-flight requests become `cancelled` rows, nothing is lost."""
    async with LoopbackServer(ServeOptions(latency_s=0.05)) as server:
        config = LoadConfig(
            target=server.base_url, model="sim-tutor", arrival="constant", rate=20.0, duration_s=60.0, turns=1,
            workers=workers,
        )  # fmt: skip
        stop = anyio.Event()
        async with anyio.create_task_group() as group:

            async def stop_soon() -> None:
                while server.stats.requests < 5 * workers:  # noqa: ASYNC110 (polls the server: every worker is sending)
                    await anyio.sleep(0.05)
                stop.set()

            group.start_soon(stop_soon)
            result = await run_load(config, out=tmp_path, stop=stop)
        stats = server.stats
    assert result.summary["status"] == "interrupted"
    rows = read_requests(result.run_dir.path / "requests.csv")
    # every request the server saw has its row, and so has a send cancelled before the server counted it; a
    # stream the stop cut after its 200 began is a cancelled row, not an ok one
    assert rows and len(rows) >= stats.requests and sum(row.ok for row in rows) <= stats.by_status.get(200, 0)
    assert {row.worker for row in rows} == set(range(workers))
    assert all(row.ok or row.error == "cancelled" for row in rows)


async def test_failed_worker_processes_are_one_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers that cannot start (here: not Python at all) give one message, not a traceback or a hang."""
    config = LoadConfig(target="http://127.0.0.1:9/v1", model="m", rate=5.0, duration_s=0.5, workers=2)
    monkeypatch.setattr(sys, "executable", "/bin/false")
    with pytest.raises(ScenarioError, match="load worker processes failed"):
        await run_step(config, load_items(config), rate=5.0, step=0)
