"""Per-request figures from raw stamps, the summary built on them, and the CSV round trip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.tools.loadtest._config import LoadConfig
from engine.tools.loadtest._generator import Health
from engine.tools.loadtest._metrics import summarize
from engine.tools.loadtest._records import RequestRecord
from engine.tools.loadtest._report import knee_text, read_requests, write_requests
from engine.tools.loadtest._run import combine

CONFIG = LoadConfig(target="http://x/v1", model="m", rate=1.0, duration_s=10)


def _row(**fields: object) -> RequestRecord:
    base: dict[str, object] = {
        "conversation": 0, "turn": 0, "scheduled": 1.0, "dispatched": 1.25, "headers": 1.3, "first_token": 1.35,
        "last_token": 1.65, "end": 1.7, "ok": True, "status": 200, "completion_tokens": 31, "chunks": 11,
    }  # fmt: skip
    return RequestRecord(**(base | fields))  # type: ignore[arg-type]


def test_latencies_from_send_and_from_schedule() -> None:
    row = _row()
    assert row.dispatch_delay == pytest.approx(0.25)
    assert row.ttft == pytest.approx(0.10) and row.ttft_from_schedule == pytest.approx(0.35)
    assert row.e2e == pytest.approx(0.45) and row.e2e_from_schedule == pytest.approx(0.70)


def test_itl_spreads_chunk_gaps_over_the_tokens_they_carried() -> None:
    """11 chunks of ~31/11 tokens: the 10 later chunks carried 31*10/11 tokens over 0.3 s."""
    assert _row().itl == pytest.approx(0.3 / (31 * 10 / 11))
    assert _row().tpot == pytest.approx(0.35 / 30)


def test_closed_loop_rows_have_no_schedule_figures() -> None:
    row = _row(scheduled=None)
    assert row.dispatch_delay is None and row.ttft_from_schedule is None and row.e2e_from_schedule is None


def test_a_single_chunk_has_no_itl() -> None:
    assert _row(chunks=1).itl is None and _row(completion_tokens=1).tpot is None


def test_summary_counts_goodput_errors_and_leaves_warmup_out() -> None:
    config = LoadConfig(target="http://x/v1", model="m", rate=1.0, duration_s=10, slo={"ttft_ms": 200}, warmup_s=0.5)
    rows = [
        _row(conversation=0),  # ttft from the schedule 350 ms: misses
        _row(conversation=1, scheduled=1.24),  # ttft from schedule 110 ms: meets
        _row(conversation=2, ok=False, error="http_429", first_token=None, last_token=None, chunks=0),
        _row(conversation=3, scheduled=0.1, dispatched=0.1, first_token=0.2, end=0.3),  # warm-up
    ]
    rows[3].warmup = True
    summary = summarize(config, rows, [Health(worker=0, wall_s=2.0)], rate=1.0)
    assert summary["requests"] == {
        "sent": 4, "measured": 3, "ok": 2, "warmup": 1, "retries": 0, "scheduled_not_sent": 0,
    }  # fmt: skip
    assert summary["errors"] == {"http_429": 1}
    assert summary["goodput"]["share"] == pytest.approx(1 / 3)
    assert summary["latency_ms"]["ttft"]["n"] == 2


def test_dispatch_delay_past_its_limit_is_reported_as_coordinated_omission() -> None:
    late = [_row(conversation=i, scheduled=1.0, dispatched=1.5) for i in range(20)]
    health = Health(worker=0, wall_s=2.0, scheduled_starts=20, started=20)
    gates = summarize(CONFIG, late, [health], rate=1.0)["gates"]
    assert gates["coordinated_omission"] and not gates["valid"] and not gates["client_bound"]
    assert not gates["checks"]["dispatch_delay"]["ok"]


def test_a_busy_client_is_flagged_as_the_bottleneck() -> None:
    health = Health(worker=0, cpu_s=1.9, wall_s=2.0, loop_lag_s=[0.05] * 10, scheduled_starts=1, started=1)
    gates = summarize(CONFIG, [_row()], [health], rate=1.0)["gates"]
    assert gates["client_bound"] and not gates["valid"]
    assert not gates["checks"]["client_cpu"]["ok"] and not gates["checks"]["event_loop_lag"]["ok"]


def test_a_late_loop_with_an_idle_client_is_the_machine_and_the_run_stays_valid() -> None:
    """A shared machine: the loop and the sends ran 40-50 ms late while the client used 5% of a core."""
    late = [_row(conversation=i, scheduled=1.0, dispatched=1.04) for i in range(20)]
    health = Health(worker=0, cpu_s=0.1, wall_s=2.0, loop_lag_s=[0.05] * 10, scheduled_starts=20, started=20)
    gates = summarize(CONFIG, late, [health], rate=1.0)["gates"]
    assert gates["machine_late"] and gates["valid"] and not gates["client_bound"]
    assert not gates["coordinated_omission"] and not gates["checks"]["event_loop_lag"]["ok"]
    assert any("5% of a core" in note and "gates.loop_lag_p99_ms" in note for note in gates["notes"])
    queued = [_row(conversation=i, scheduled=1.0, dispatched=1.5) for i in range(20)]  # far past the loop's lag
    gates = summarize(CONFIG, queued, [health], rate=1.0)["gates"]
    assert gates["machine_late"] and gates["coordinated_omission"] and not gates["valid"]


stamps = st.floats(min_value=0, max_value=1e4, allow_nan=False)
records = st.builds(
    RequestRecord,
    conversation=st.integers(0, 10**6),
    turn=st.integers(0, 50),
    worker=st.integers(0, 63),
    attempt=st.integers(0, 5),
    messages=st.integers(1, 200),
    warmup=st.booleans(),
    scheduled=st.none() | stamps,
    dispatched=stamps,
    headers=st.none() | stamps,
    first_token=st.none() | stamps,
    last_token=st.none() | stamps,
    end=st.none() | stamps,
    ok=st.booleans(),
    error=st.none() | st.sampled_from(["http_429", "timeout", "stream_truncated"]),
    status=st.none() | st.integers(100, 599),
    retry_after=st.none() | stamps,
    prompt_tokens=st.integers(0, 10**6),
    completion_tokens=st.integers(0, 10**6),
    chunks=st.integers(0, 10**4),
)


@given(rows=st.lists(records, max_size=20))
def test_csv_round_trip_is_exact(tmp_path_factory: pytest.TempPathFactory, rows: list[RequestRecord]) -> None:
    path: Path = tmp_path_factory.mktemp("csv") / "requests.csv"
    write_requests(path, rows)
    assert read_requests(path) == rows


def test_a_sweep_stopped_by_a_gate_alone_reports_no_knee() -> None:
    """Goodput at 100% on every step, the second fails a gate: that is no knee, and the text says why."""
    config = LoadConfig(target="http://127.0.0.1:9/v1", model="m", arrival="constant", sweep={"rates": [1, 2]})

    def step(rate: float, valid: bool) -> dict[str, Any]:
        return {
            "target_rate": rate,
            "throughput": {"requests_per_s": rate},
            "gates": {"valid": valid},
            "goodput": {"share": 1.0},
        }

    sweep = combine(config, [step(1, True), step(2, False)], status="finished")["sweep"]
    assert sweep["stopped_by"] == "gates" and not sweep["knee_reached"] and sweep["broke_at"] == 2
    assert knee_text(sweep).startswith("no knee found: the sweep stopped at 2")
    fell = combine(config, [step(1, True), step(2, True) | {"goodput": {"share": 0.5}}], status="finished")["sweep"]
    assert fell["stopped_by"] == "goodput" and fell["knee_reached"] and fell["knee_rate"] == 1
