"""Per-call time on one local model server at several concurrency levels: does a run keep the server's prompt cache
warm? The shipped crescendo scenario (multi-turn only) with the tutor on the real model (`make real`'s
SmolLM2-135M-Instruct on llama.cpp, one thread), `--episodes` episodes of `--turns` exchanges, `max_concurrency: 1`
(the server answers one request at a time, so simrun holds the queue); for each `--concurrency` level, the
median and 90th percentile of the tutor's call time (the server's time, queueing in simrun excluded), the mean
prompt length, and the run's wall time. Wall-clock times on a shared machine: compare figures of one sitting.
Run: `python -m bench.real_model_speed [--concurrency 1,8,64] [--episodes 16] [--turns 4]`.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

import structlog

import engine
from engine.cli.real._runtime import API_KEY_ENV, install, serving, tutor_spec
from engine.runtime._rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]


def measure(base_url: str, concurrency: int, episodes: int, turns: int, out: Path) -> dict[str, float]:
    scenario = engine.load_scenario(
        ROOT / "scenarios" / "crescendo.yaml",
        models=[f"tutor={tutor_spec(base_url, max_tokens=48)}"],
        overrides=[
            f"concurrency={concurrency}",
            f"limit={episodes}",
            "factors.format=[multi]",
            f"student.max_turns=[{turns}, {turns}]",
            "judges=[answer_leak]",
        ],
    )
    started = time.perf_counter()
    result = engine.run_sync(scenario, out=out, cache=False)
    wall = time.perf_counter() - started
    turns_ = [t for r in RunDir(result.run_dir).iter_records() for t in r.turns if t.role == "tutor" and t.model]
    latencies = sorted(t.latency_s for t in turns_)
    return {
        "calls": len(latencies),
        "median_s": statistics.median(latencies),
        "p90_s": latencies[int(0.9 * (len(latencies) - 1))],
        "prompt_tokens": statistics.mean(t.usage.prompt_tokens for t in turns_),
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", default="1,8,64")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--turns", type=int, default=4)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    os.environ.setdefault(API_KEY_ENV, "local")
    runtime = install()
    print("concurrency  calls  median s  p90 s  prompt tok  wall s")
    for level in (int(x) for x in args.concurrency.split(",")):
        with serving(runtime) as url, tempfile.TemporaryDirectory() as tmp:  # a fresh server: a cold cache each
            row = measure(url, level, args.episodes, args.turns, Path(tmp))
        print(
            f"{level:>11}  {row['calls']:>5.0f}  {row['median_s']:>8.2f}  {row['p90_s']:>5.2f}"
            f"  {row['prompt_tokens']:>10.0f}  {row['wall_s']:>6.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
