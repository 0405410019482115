"""Crescendo with escalation off: does amplification sit at 0 within its interval, seed after seed?

What runs: the shipped `scenarios/crescendo.yaml` on the `sim` models, end to end through the runner and the
registered summariser, with `leak_per_turn: 0` (the sim tutor leaks with one probability at every reply, so
harm per generated reply is the same in both formats), once per run seed. Every per-reply rate counts every
generated tutor reply, backtracked or not (SafeTutors' denominator); the visible-only view is printed beside it
to show the selection it carries.

Printed: per seed, the pooled amplification (multi − single, pp) with its 95% interval, whether 0 is inside, the
same over visible replies only, the share of the 11 dimension intervals covering 0, and the hazard contrast
(later replies − first); then how many seeds have 0 inside the pooled interval (issue 24 asks ≥ 19 of 20).
Run: `python bench/crescendo_null.py [--seeds 20] [--items 10]`.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path
from typing import Any

from engine import load_scenario, run_sync

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "crescendo.yaml"


def run_once(seed: int, items: int) -> dict[str, Any]:
    overrides = [f"seed={seed}", f"items.0.limit={items}", "models.tutor.params.leak_per_turn=0"]
    scenario = load_scenario(SCENARIO, overrides=overrides)
    with tempfile.TemporaryDirectory() as out:
        return dict(run_sync(scenario, out=Path(out)).summary)


def covers(low: float | None, high: float | None) -> bool:
    return low is not None and high is not None and low <= 0.0 <= high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20, help="run seeds (1, 2, …)")
    parser.add_argument("--items", type=int, default=10, help="items per domain (the shipped limit is 10)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    inside = visible_inside = hazard_inside = 0
    dimension_share: list[float] = []
    print(f"crescendo, escalation off (leak_per_turn=0), {args.items} items per domain, seeds 1..{args.seeds}")
    print("seed  amplification pp [95% CI]      0 in   visible-only pp [95% CI]   0 in  dims 0 in  hazard later−first")
    for seed in range(1, args.seeds + 1):
        summary = run_once(seed, args.items)
        rows = summary["amplification"]
        pooled = next(a for a in rows if a["dimension"] is None and a["subject"] is None)
        dims = [a for a in rows if a["subject"] is None and a["dimension"] is not None]
        ok = covers(pooled["ci"]["low"], pooled["ci"]["high"])
        vis = pooled["visible_only"]
        vis_ok = covers(vis["low"], vis["high"])
        dim_share = sum(covers(a["ci"]["low"], a["ci"]["high"]) for a in dims) / len(dims)
        hazard = summary["hazard"]["all"]["later_minus_first"]
        hz_ok = covers(hazard["low"], hazard["high"])
        inside += ok
        visible_inside += vis_ok
        hazard_inside += hz_ok
        dimension_share.append(dim_share)
        print(
            f"{seed:>4}  {pooled['delta'] * 100:+5.1f} [{pooled['ci']['low'] * 100:+5.1f}, "
            f"{pooled['ci']['high'] * 100:+5.1f}]  {'yes' if ok else 'NO ':>5}   "
            f"{vis['delta'] * 100:+5.1f} [{vis['low'] * 100:+5.1f}, {vis['high'] * 100:+5.1f}]  "
            f"{'yes' if vis_ok else 'NO ':>5}  {dim_share:>8.0%}  "
            f"{hazard['delta'] * 100:+5.1f} [{hazard['low'] * 100:+5.1f}, {hazard['high'] * 100:+5.1f}]"
            f" {'' if hz_ok else 'NO'}",
            flush=True,
        )
    n = args.seeds
    print(f"pooled amplification, every generated reply: 0 inside the 95% interval in {inside} of {n} seeds")
    print(f"visible replies only (secondary view):         0 inside in {visible_inside} of {n} seeds")
    print(f"dimension intervals covering 0, mean share:   {sum(dimension_share) / n:.1%}")
    print(f"hazard later − first covering 0:              {hazard_inside} of {n} seeds")


if __name__ == "__main__":
    main()
