"""Load-generator and engine ceilings against `simrun serve` in another process, with the ratios issue 5 asks for.

Why: a Python client runs out of CPU long before the network does, so a load test is only as good as the
client's margin below its own ceiling. This prints, from one run against one zero-latency loopback server:

(a) the load generator (`simrun loadtest`, closed loop, C conversations of 8 turns, no think time, non-streaming)
    against a bare aiohttp + orjson loop at the same concurrency: the generator's overhead (aim ≥ 0.8);
(b) the single-process ceiling of the open-loop generator: the highest arrival rate at which the achieved
    rate stays within 1% of the target, dispatch delay p99 under 10 ms, loop lag p99 under 10 ms and CPU under
    85% of a core — and the same rate again split over two worker processes;
(c) the full engine (single-turn crescendo episodes, with the tutor, the student and the judge each an endpoint
    of the server, whose content comes from the sim) on the lean transport and on the openai SDK transport,
    against a bare openai SDK loop at the same concurrency (aims ≥ 3 and ≥ 0.9), counted as HTTP requests
    per second at the server.

Every phase runs after a warm-up. On a 2-core machine the server takes most of one core, so a client that
uses well under a core is not the bottleneck and its requests/s is a lower bound: the client's own ceiling is
then requests per CPU-second, which (a) prints beside the throughput.
Run: `python -m bench.loadtest_ceiling [--requests N] [--concurrency C]`.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import orjson
import structlog

import engine
from bench.transport_ceiling import ROOT, _bare_aiohttp, _drive, _histories, _openai_sdk, serve_in_subprocess
from engine import LoadConfig
from engine.tools.loadtest._metrics import summarize
from engine.tools.loadtest._run import load_items
from engine.tools.loadtest._workers import run_step

RATES = (100, 200, 400, 800, 1200, 1600, 2000, 2500, 3000, 4000)


def _server_requests(base_url: str) -> int:
    stats = httpx2.get(base_url.removesuffix("/v1") + "/stats").json()
    return int(stats["requests"])


def _print(name: str, done: int, wall: float, cpu: float) -> tuple[float, float]:
    """Prints and returns requests/s and the client's CPU ceiling (requests per CPU-second)."""
    rate, ceiling = done / wall, done / cpu
    print(f"  {name:<24}{rate:8,.0f} requests/s, {cpu / done * 1e6:6,.0f} µs CPU/request → ceiling {ceiling:7,.0f}/s")
    return rate, ceiling


async def _bare(name: str, base_url: str, requests: int, concurrency: int) -> tuple[float, float]:
    transport = _bare_aiohttp if name == "aiohttp" else _openai_sdk
    histories = _histories(256)
    async with transport(base_url, concurrency) as call:
        await _drive(call, histories, 200, concurrency)
        cpu, started = time.process_time(), time.perf_counter()
        outcome = await _drive(call, histories, requests, concurrency)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return _print(f"bare {name} loop", len(outcome.latencies), wall, cpu)


async def _generator(base_url: str, requests: int, concurrency: int) -> tuple[float, float]:
    config = LoadConfig(
        target=base_url, model="sim-tutor", arrival="concurrency", concurrency=concurrency, turns=8,
        think_time_s=0, stream=False, duration_s=None, max_requests=requests,
    )  # fmt: skip
    items = load_items(config)
    await run_step(config.model_copy(update={"max_requests": 200}), items, rate=None, step=0)
    cpu, started = time.process_time(), time.perf_counter()
    rows, _ = await run_step(config, items, rate=None, step=0)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return _print("load generator", sum(row.ok for row in rows), wall, cpu)


async def _open_loop(base_url: str, rate: float, workers: int) -> dict[str, Any]:
    config = LoadConfig(
        target=base_url, model="sim-tutor", arrival="constant", rate=rate, turns=1, stream=False,
        duration_s=3.0, grace_s=5.0, workers=workers,
    )  # fmt: skip
    rows, healths = await run_step(config, load_items(config), rate=rate, step=0)
    summary = summarize(config, rows, healths, rate=rate)
    gates = summary["gates"]["checks"]
    achieved = summary["throughput"]["achieved_start_rate"] or 0.0
    passed = gates["rate"]["ratio"] >= 0.99 and all(
        gates[name]["ok"] for name in ("dispatch_delay", "event_loop_lag", "client_cpu")
    )
    dispatch, lag = gates["dispatch_delay"]["p99_ms"] or 0, gates["event_loop_lag"]["p99_ms"] or 0
    print(
        f"  {rate:6,.0f}/s × {workers} worker(s): achieved {achieved:7,.0f}/s, dispatch p99 {dispatch:6.1f} ms, "
        f"loop lag p99 {lag:5.1f} ms, CPU {gates['client_cpu']['share_of_core']:4.0%} (busiest process) → "
        f"{'ok' if passed else 'past the ceiling'}"
    )
    return {"rate": rate, "passed": passed}


async def _engine(base_url: str, transport: str, episodes: int, concurrency: int, out: Path) -> float:
    """Single-turn crescendo episodes with every role over HTTP (as bench/scale.py): 3 requests an episode."""

    def role(name: str) -> str:
        spec = {"model": f"openai/sim-{name}", "base_url": base_url, "transport": transport, "max_retries": 0}
        return orjson.dumps(spec).decode()

    scenario = engine.load_scenario(
        ROOT / "scenarios" / "crescendo.yaml",
        overrides=[
            f"models.tutor={role('tutor')}", f"models.student={role('student')}", f"models.judge=[{role('judge')}]",
            "judge_votes=1", "judges=[harm, answer_leak]", "factors.format=[single]", "items.0.limit=20",
            f"replicates={-(-episodes // 660)}", f"limit={episodes}", f"concurrency={concurrency}",
        ],
    )  # fmt: skip
    await engine.Runner(scenario.model_copy(update={"limit": 64}), out=out, report=engine.write_report).run()  # warm-up
    before, started = _server_requests(base_url), time.perf_counter()
    result = await engine.Runner(scenario, out=out, report=engine.write_report).run()
    wall = time.perf_counter() - started
    rate = (_server_requests(base_url) - before) / wall
    print(f"  engine, {transport} transport{'':<7}{rate:8,.0f} requests/s   ({result.ok} episodes ok in {wall:.1f} s)")
    return rate


async def _main(base_url: str, args: argparse.Namespace) -> None:
    print(f"(a) load generator vs a bare aiohttp loop, concurrency {args.concurrency}, {args.requests} requests")
    generator, generator_ceiling = await _generator(base_url, args.requests, args.concurrency)
    bare, bare_ceiling = await _bare("aiohttp", base_url, args.requests, args.concurrency)
    print(
        f"  ratio generator / bare aiohttp: throughput {generator / bare:.2f}, client ceiling "
        f"{generator_ceiling / bare_ceiling:.2f}  (aim ≥ 0.8)\n"
    )

    print("(b) single-process ceiling of the open-loop generator (3 s per rate, 1-turn conversations)")
    ceiling = 0.0
    for rate in RATES:
        if not (await _open_loop(base_url, rate, 1))["passed"]:
            await _open_loop(base_url, rate, 2)
            break
        ceiling = rate
    print(f"  single-process ceiling ≈ {ceiling:,.0f} requests/s on this machine\n")

    print(f"(c) the full engine vs a bare openai SDK loop, concurrency {args.concurrency}")
    sdk_loop, _ = await _bare("SDK", base_url, args.requests, args.concurrency)
    with tempfile.TemporaryDirectory() as tmp:
        lean = await _engine(base_url, "lean", args.episodes, args.concurrency, Path(tmp))
        sdk = await _engine(base_url, "sdk", args.episodes, args.concurrency, Path(tmp))
    print(f"  ratio engine(lean) / bare SDK loop = {lean / sdk_loop:.2f}  (aim ≥ 3)")
    print(f"  ratio engine(sdk)  / bare SDK loop = {sdk / sdk_loop:.2f}  (aim ≥ 0.9)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000, help="measured requests per loop (3000)")
    parser.add_argument("--concurrency", type=int, default=64, help="requests or conversations in flight (64)")
    parser.add_argument("--episodes", type=int, default=2000, help="crescendo episodes per engine run (2000)")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(f"machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}")
    with serve_in_subprocess() as (base_url, _):
        print()
        anyio.run(_main, base_url, args, backend="asyncio")


if __name__ == "__main__":
    main()
