"""What `--executor ray` buys and costs on this machine: a CPU-bound simulator study on 1 vs 2 Ray workers, and
the per-episode overhead of a run played by Ray actors against the same run in one process.

Study: the fairness bench's simulated runs (`bench/fairness_calibration.py`'s `trial`, the 2-level design at
20 items, a planted 0.2 bias) over `--seeds` seeds, through `engine.fan_out` locally and on 1 and 2 Ray CPUs.
Run: the shipped crescendo scenario on the sim provider, `--episodes` episodes, locally and on 1 and 2 Ray
workers; the start-up (actors starting, importing the engine) is the time to the first record, the cost per
episode the time from the first record to the last over the episodes in between. Every figure is a wall-clock
time on a shared machine: run it on an idle one.
Rate: the tutor on a loopback `simrun serve` at its own limit, `--rate` requests/s over a `--window` of 6 s (a
minute's limit with time running 10x fast, so the run crosses several windows), budgeted at that rate, locally
and on 2 Ray workers: the achieved rate over the middle half of the requests and the 429s.
Run: `python -m bench.ray_scaling [--seeds 96] [--episodes 200] [--ray-address auto] [--parts study,run,rate]`.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import structlog

import engine
from bench.fairness_calibration import DESIGNS, prepare, trial
from engine.scenario._spec import ExecutorSpec

ROOT = Path(__file__).resolve().parents[1]


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def study(seeds: int, address: str | None) -> None:
    design = DESIGNS[0]
    one = partial(trial, prepare(design.scenario, design.overrides, 20), "ray-scaling", design, 0.2)
    local_s, local = _timed(lambda: engine.fan_out(one, range(seeds)))
    engine.fan_out(one, range(2), executor="ray", address=address, workers=2)  # workers up, imports done
    print(f"study: {seeds} simulated fairness runs (2-level design, 20 items)")
    print(f"  local, one process    {local_s:7.2f} s")
    timings = {}
    for workers in (1, 2):
        elapsed, found = _timed(partial(engine.fan_out, one, range(seeds), executor="ray", workers=workers))
        assert found == local, "the same figures wherever the seeds run"
        timings[workers] = elapsed
        print(f"  Ray, {workers} worker(s)       {elapsed:7.2f} s")
    print(f"  speed-up 2 vs 1 Ray workers: {timings[1] / timings[2]:.2f}x; Ray 1 vs local: {local_s / timings[1]:.2f}x")


def _run(episodes: int, executor: dict[str, Any], out: Path) -> tuple[float, float, float]:
    """Wall time, time to the first record, and the steady cost per episode (first to last record)."""
    scenario = engine.load_scenario(
        ROOT / "scenarios" / "crescendo.yaml",
        overrides=[f"limit={episodes}", "concurrency=32", "items.0.limit=20"],
    ).model_copy(update={"executor": ExecutorSpec(**executor)})
    stamps: list[float] = []

    async def stamp(_: engine.EpisodeRecord) -> None:
        stamps.append(time.perf_counter())

    started = time.perf_counter()
    result = engine.run_sync(scenario, out=out, probe=False, on_episode=stamp)
    assert result.ok + result.errors == episodes == len(stamps)
    return stamps[-1] - started, stamps[0] - started, (stamps[-1] - stamps[0]) / (episodes - 1)


def overhead(episodes: int, address: str | None) -> None:
    print(f"\nrun: crescendo on the sim provider, {episodes} episodes, concurrency 32")
    print("  per episode: first record to last, over the episodes after the first (start-up is the time to it)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        total, first, local_per = _run(episodes, {}, out)
        print(
            f"  local                 {total:6.2f} s; first record {first:5.2f} s; {local_per * 1000:6.1f} ms/episode"
        )
        for workers in (1, 2):
            ray = {"name": "ray", "address": address, "workers": workers}
            total, first, per = _run(episodes, ray, out)
            print(
                f"  Ray, {workers} worker(s)       {total:6.2f} s; first record {first:5.2f} s; "
                f"{per * 1000:6.1f} ms/episode ({(per - local_per) * 1000:+.1f} ms vs local)"
            )


async def _rate(per_second: float, window_s: float, workers: int, executor: str) -> tuple[float, int, int]:
    """Achieved request rate in the middle of a run whose tutor is budgeted at `per_second`, with 429s and sent."""
    import os

    import anyio

    from engine.tools.serve._server import LoopbackServer, ServeOptions

    os.environ.setdefault("SIMRUN_BENCH_KEY", "sk-bench-not-a-real-key")
    samples: list[tuple[float, int]] = []
    async with LoopbackServer(ServeOptions(rpm=round(per_second * window_s), window_s=window_s)) as server:
        tutor = {"model": "openai/sim-tutor", "base_url": server.base_url, "api_key_env": "SIMRUN_BENCH_KEY"}
        scenario = engine.load_scenario(
            ROOT / "scenarios" / "crescendo.yaml",
            overrides=["limit=96", "concurrency=64", "items.0.limit=20"],
            models=[f"tutor={{model: {tutor['model']}, base_url: '{tutor['base_url']}', "
                    f"api_key_env: {tutor['api_key_env']}, rpm: {per_second * 60}}}"],
        ).model_copy(update={"executor": ExecutorSpec(name=executor, workers=workers)})  # fmt: skip

        async def sample() -> None:
            while True:
                samples.append((time.perf_counter(), server.stats.requests))
                await anyio.sleep(0.25)

        with tempfile.TemporaryDirectory() as tmp:
            async with anyio.create_task_group() as group:
                group.start_soon(sample)
                await engine.run(scenario, out=Path(tmp), probe=False)
                group.cancel_scope.cancel()
        stats = server.stats
    total = samples[-1][1]
    middle = [(t, n) for t, n in samples if 0.25 * total <= n <= 0.75 * total]
    achieved = (middle[-1][1] - middle[0][1]) / (middle[-1][0] - middle[0][0]) if len(middle) > 1 else float("nan")
    return achieved, stats.by_status.get(429, 0), stats.requests


def rate(per_second: float, window_s: float) -> None:
    import anyio

    limit = f"--rpm {round(per_second * window_s)} --window {window_s:g}"
    print(f"\nrate: the tutor budgeted at {per_second:g} requests/s against `simrun serve {limit}`")
    for executor, workers in (("local", 1), ("ray", 2)):
        achieved, limited, sent = anyio.run(_rate, per_second, window_s, workers, executor, backend="asyncio")
        print(
            f"  {executor}, {workers} worker(s)    {achieved:6.2f} requests/s in the middle half "
            f"({achieved / per_second - 1:+.1%}), {limited} 429s of {sent}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=96)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--ray-address", default=None, help="a running cluster (auto, ray://HOST:PORT)")
    parser.add_argument("--rate", type=float, default=20.0, help="tutor budget in requests/s for the rate check")
    parser.add_argument("--window", type=float, default=6.0, help="the server's window in seconds for the rate check")
    parser.add_argument("--parts", default="study,run,rate", help="which parts to run (study,run,rate)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if parts - {"study", "run", "rate"}:
        parser.error("--parts is a subset of study,run,rate")
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    from engine.runtime._ray import connect

    connect(args.ray_address)
    if "study" in parts:
        study(args.seeds, args.ray_address)
    if "run" in parts:
        overhead(args.episodes, args.ray_address)
    if "rate" in parts:
        rate(args.rate, args.window)


if __name__ == "__main__":
    main()
