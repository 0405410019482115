"""Engine throughput on the offline `sim` provider: episodes/s and model requests/s for one process.

This measures simrun's own overhead (planning, agents, judges, throttles, records), since the simulator
answers instantly. Run: `python bench/engine_throughput.py [--episodes N] [--concurrency C]`.
"""

from __future__ import annotations

import argparse
import logging
import resource
import tempfile
import time
from pathlib import Path

import anyio
import structlog

import engine

ROOT = Path(__file__).resolve().parents[1]


async def _measure(episodes: int, concurrency: int, out: Path) -> None:
    scenario = engine.load_scenario(
        ROOT / "scenarios" / "crescendo.yaml",
        overrides=[f"limit={episodes}", f"concurrency={concurrency}", "items.0.limit=20"],
    )
    runner = engine.Runner(scenario, out=out, report=engine.write_report)
    started = time.perf_counter()
    cpu_started = time.process_time()
    result = await runner.run()
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    requests = runner.stats.requests
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"episodes            {result.planned} ({result.ok} ok, {result.errors} error), concurrency {concurrency}")
    print(f"wall time           {elapsed:.2f} s   (CPU {cpu:.2f} s)")
    print(f"episodes/s          {result.planned / elapsed:,.1f}")
    print(f"model requests/s    {requests / elapsed:,.0f}   ({requests:,} requests)")
    print(f"CPU per request     {cpu / max(1, requests) * 1e6:,.0f} µs")
    print(f"peak RSS            {peak_mib:,.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=1320, help="episodes to run (default: the full 60-item plan)")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(_measure, args.episodes, args.concurrency, Path(tmp), backend="asyncio")


if __name__ == "__main__":
    main()
