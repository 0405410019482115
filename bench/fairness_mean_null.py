"""EduFair's mean-|r| tables against their null reference, on runs with no effect and with one planted leak.

What runs: the shipped fairness scenarios' own plans (items, levels, pairing, cells), one simulated dialogue
record per planned episode from the calibration bench's numpy model of the sim loop
(`bench/fairness_calibration.py`), and the registered fairness summariser on those records: the code
`simrun report` runs, with intervals skipped. Each mean of the tables (per cell, per metric, per dimension,
Ped./Conv.) carries its null reference, a within-item permutation of the condition labels at the run's own
items; "exceeds the null" is the permutation p corrected by Benjamini–Hochberg over the run's headline means
(per metric, per dimension, Ped./Conv.; a cell is never marked).

Printed, per scenario and arm: the means per run, the share of runs marking any mean as exceeding its null
(Wilson 95% interval; issue 24 asks ≤ 5% on unbiased runs), the share of all means with an uncorrected
permutation p ≤ 0.05 (a per-mean calibration check, ≈ 5% expected), mean |r| observed against the mean null
mean, the share of means that could resolve |r| = 0.10, and the share of contrasts carrying EduFair's
"meaningful" mark (67–69% before issue 24). With `--bias`, a leak bias planted on the immigrant level: the
share of runs where a mean of the immigration dimension exceeds its null.
Run: `python bench/fairness_mean_null.py [--seeds 200] [--draws 2000] [--scenarios fairness.yaml names.yaml]
[--bias 0.25]`.
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from bench.fairness_calibration import prepare, record_of, run_seed, share
from engine.scenario._plan import plan_episodes
from judges.fairness_summary import FairnessSummarizer

PLANTED = ("immigration", "immigrant")


def references(mean_abs_r: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(row, null reference) for every mean of the tables."""
    found = []
    for table in ("cells", "by_metric", "by_dimension", "aggregates"):
        for row in mean_abs_r[table]:
            for key in ("null", "ped_null", "conv_null"):
                if row.get(key) is not None:
                    found.append((row, row[key]))
    return found


def one_run(prepared: Any, seed: int, bias: float, draws: int) -> dict[str, Any]:
    scenario = prepared.scenario.model_copy(update={"seed": seed})
    records = []
    for episode in plan_episodes(scenario, prepared.items):
        demographic = prepared.design.extras(episode)["demographic"] if prepared.design is not None else {}
        hit = demographic.get(PLANTED[0]) == PLANTED[1]
        records.append(record_of(episode, seed=seed, bias=bias if hit else 0.0, max_turns=prepared.max_turns))
    manifest = {"seed": seed, "scenario": scenario.resolved()}
    return FairnessSummarizer(intervals=False, null_draws=draws).results(records, manifest).model_dump()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=200, help="run seeds per scenario and arm")
    parser.add_argument("--draws", type=int, default=2000, help="permutations per null reference")
    parser.add_argument("--scenarios", nargs="+", default=["fairness.yaml"], help="shipped fairness scenarios")
    parser.add_argument("--bias", type=float, default=0.0, help="also plant this leak bias on the immigrant level")
    parser.add_argument("--progress", type=int, default=25, help="print the running share every this many seeds")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    started = time.perf_counter()
    print(
        f"{args.seeds} seeds per arm, {args.draws} permutations per null reference, BH at 0.05 over each run's "
        "headline means",
        flush=True,
    )
    for scenario_file in args.scenarios:
        prepared = prepare(scenario_file, (), None)
        for bias in (0.0, args.bias) if args.bias else (0.0,):
            any_exceeds = planted_exceeds = raw = means = meaningful = contrasts = resolves = 0
            observed = null_mean = 0.0
            per_run = 0
            for k in range(args.seeds):
                summary = one_run(prepared, run_seed(f"mean-null|{scenario_file}|{bias}", k), bias, args.draws)
                found = references(summary["mean_abs_r"])
                per_run = len(found)
                any_exceeds += any(ref["exceeds_null"] for _, ref in found)
                planted_exceeds += any(ref["exceeds_null"] and row.get("dimension") == PLANTED[0] for row, ref in found)
                raw += sum(ref["p_larger"] <= 0.05 for _, ref in found)
                resolves += sum(ref["resolves_meaningful"] for _, ref in found)
                means += len(found)
                observed += sum(ref["observed"] for _, ref in found)
                null_mean += sum(ref["null_mean"] for _, ref in found)
                rows = [c for c in summary["contrasts"] if c["r"] is not None]
                contrasts += len(rows)
                meaningful += sum(bool(c["meaningful"]) for c in rows)
                if (k + 1) % args.progress == 0 and k + 1 < args.seeds:
                    print(f"  after {k + 1} seeds: runs marking any mean {share(any_exceeds, k + 1)}", flush=True)
            arm = "no bias" if bias == 0 else f"leak bias +{bias:g} on {PLANTED[1]}"
            print(f"\n{scenario_file}, {len(prepared.items)} items, {arm}: {per_run} means per run")
            print(f"  runs marking any mean as exceeding its null: {share(any_exceeds, args.seeds)}")
            if bias:
                print(f"  runs where an {PLANTED[0]} mean exceeds its null: {share(planted_exceeds, args.seeds)}")
            print(f"  means with uncorrected permutation p <= 0.05: {share(raw, means)}")
            print(f"  mean |r| observed {observed / means:.3f}, its null mean {null_mean / means:.3f}")
            print(f"  means that could resolve |r| = 0.10: {resolves / means:.1%}")
            print(f"  contrasts with EduFair's meaningful mark: {share(meaningful, contrasts)}")
    print(f"\nelapsed {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
