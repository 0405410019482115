"""One process at scale: 10,000 concurrent episodes against the loopback server, and a 100,000-episode plan.

The server runs in its own process (`simrun serve`), so the figures are the client's. Printed: wall time,
requests/s, peak RSS, event-loop lag (how late a 10 ms timer fires while the run is busy), and for the
plan: time and memory to plan 100,000 episodes. Run: `python bench/scale.py [--episodes N]`.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import anyio
import structlog

import engine
from engine.scenario._plan import load_items, plan_episodes

ROOT = Path(__file__).resolve().parents[1]
KEY_ENV = "SIMRUN_BENCH_KEY"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _scenario(base_url: str, episodes: int) -> engine.Scenario:
    """Single-turn crescendo episodes, every role an OpenAI-compatible endpoint: 3 HTTP calls per episode."""
    endpoint = {"base_url": base_url, "api_key_env": KEY_ENV, "timeout_s": 120, "max_concurrency": 2000}
    replicates = -(-episodes // (60 * 11))
    return engine.load_scenario(
        ROOT / "scenarios" / "crescendo.yaml",
        overrides=[
            f"models.tutor={{model: openai/sim-tutor, {_flow(endpoint)}}}",
            f"models.student={{model: openai/sim-student, {_flow(endpoint)}}}",
            f"models.judge=[{{model: openai/sim-judge, {_flow(endpoint)}}}]",
            "judge_votes=1",
            "judges=[harm, answer_leak]",
            "factors.format=[single]",
            "items.0.limit=20",
            f"replicates={replicates}",
            f"limit={episodes}",
            f"concurrency={episodes}",
        ],
    )


def _flow(mapping: dict[str, object]) -> str:
    return ", ".join(f"{key}: {value}" for key, value in mapping.items())


async def _run(base_url: str, episodes: int, out: Path) -> None:
    scenario = _scenario(base_url, episodes)
    runner = engine.Runner(scenario, out=out, report=engine.write_report)
    lags: list[float] = []

    async def watch_lag() -> None:
        while True:
            started = anyio.current_time()
            await anyio.sleep(0.01)
            lags.append(anyio.current_time() - started - 0.01)

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        group.start_soon(watch_lag)
        result = await runner.run()
        group.cancel_scope.cancel()
    elapsed = time.perf_counter() - started
    lags.sort()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"episodes in flight  up to {episodes:,} ({result.ok:,} ok, {result.errors:,} error)")
    print(f"wall time           {elapsed:.1f} s")
    print(f"HTTP requests/s     {runner.stats.requests / elapsed:,.0f}  ({runner.stats.requests:,} requests)")
    print(f"peak RSS            {peak:,.0f} MiB")
    p50, p99 = lags[len(lags) // 2], lags[int(len(lags) * 0.99)]
    print(f"event-loop lag      p50 {p50 * 1000:.1f} ms · p99 {p99 * 1000:.1f} ms · max {lags[-1] * 1000:.1f} ms")


def _plan(episodes: int) -> None:
    scenario = engine.load_scenario(
        ROOT / "scenarios" / "crescendo.yaml",
        overrides=[f"replicates={-(-episodes // (60 * 22))}", "items.0.limit=20", f"limit={episodes}"],
    )
    tracemalloc.start()
    started = time.perf_counter()
    planned = plan_episodes(scenario, load_items(scenario))
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"plan                {len(planned):,} episodes in {elapsed:.2f} s, {peak / 2**20:,.0f} MiB allocated at peak"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--plan", type=int, default=100_000)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    os.environ.setdefault(KEY_ENV, "bench-not-a-key")
    _plan(args.plan)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "engine", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert server.stdout is not None
        server.stdout.readline()  # the server prints its address once it listens
        with tempfile.TemporaryDirectory() as tmp:
            anyio.run(_run, f"http://127.0.0.1:{port}/v1", args.episodes, Path(tmp), backend="asyncio")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
