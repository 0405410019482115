"""Crescendo with escalation off: does amplification sit at 0 within its interval, seed after seed?

What runs: the shipped `scenarios/crescendo.yaml` on the `sim` models through the runner, with `leak_per_turn: 0`
(the sim tutor leaks with one probability at every reply, so harm per generated reply is the same in both formats),
once per run seed; the registered summariser's `null_check` gives the same pooled and per-dimension amplification
rows and pooled hazard as the full summary, without its other tables. Every per-reply rate counts every generated
tutor reply, backtracked or not (SafeTutors' denominator); the visible-only view is printed beside it to show the
selection it carries.

Printed per seed: the pooled amplification (multi − single, pp) with its 95% interval, whether 0 is inside, the
same over visible replies only, the share of the 11 dimension intervals covering 0, and the hazard contrast (later
replies − first). Then, over all seeds: the coverage of 0 with its Wilson interval, the count over the first 20
seeds (issue 24's criterion, ≥ 19 of 20, holds with probability ≈ 0.74 at an exact 95% coverage) and in each
disjoint block of 20 seeds, the mean amplification with its standard error and a one-sample t-test (a bias would
show here), the SD over seeds against the interval's implied SE, and each format's pooled harm rate against the
rate the sim's knobs imply.
Run: `python bench/crescendo_null.py [--seeds 20] [--first 1] [--items 10] [--jsonl FILE]`;
`--summarize FILE` prints the summary of a saved JSONL without running. 200 seeds took 43 minutes on the shared
2-core machine (6–40 s per seed, by its load).
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import orjson
from scipy import stats

from engine import SUMMARIZERS, EpisodeRecord, Runner, load_scenario, rate
from judges.crescendo_summary import CrescendoSummarizer, reply_harm

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "crescendo.yaml"
CRITERION_SEEDS, CRITERION_INSIDE = 20, 19


def covers(low: float | None, high: float | None) -> bool:
    return low is not None and high is not None and low <= 0.0 <= high


def sim_reply_rate(items: int) -> float:
    """The unsafe share of a generated reply the knobs imply: the tutor leaks with `leak_base`, each judge vote
    flips with `error_rate`, and the majority of `judge_votes` decides."""
    scenario = load_scenario(SCENARIO, overrides=[f"items.0.limit={items}"])
    leak = float(scenario.models.tutors[0].params["leak_base"])
    judges = scenario.models.judge
    error = float(judges[0].params["error_rate"])
    votes = scenario.judge_votes
    flipped = float(stats.binom.sf(votes // 2, votes, error))
    return leak * (1 - flipped) + (1 - leak) * flipped


async def _records(seed: int, items: int) -> list[EpisodeRecord]:
    overrides = [f"seed={seed}", f"items.0.limit={items}", "models.tutor.params.leak_per_turn=0"]
    found: list[EpisodeRecord] = []

    async def keep(record: EpisodeRecord) -> None:
        found.append(record)

    with tempfile.TemporaryDirectory() as out:
        runner = Runner(load_scenario(SCENARIO, overrides=overrides), out=Path(out), on_episode=keep)
        await runner.open()
        await runner.run()
    return found


def run_once(seed: int, items: int) -> dict[str, Any]:
    """One seed's figures, as one JSON-able row."""
    records = anyio.run(_records, seed, items)
    summarizer = SUMMARIZERS.get("crescendo")
    assert isinstance(summarizer, CrescendoSummarizer)
    check = summarizer.null_check(records, seed)
    pooled = next(a for a in check.amplification if a.dimension is None)
    dims = [a for a in check.amplification if a.dimension is not None]
    hazard = check.hazard.later_minus_first
    multi = [reply_harm(r) for r in records if r.status == "ok" and r.condition.get("format") == "multi"]
    assert pooled.single_rate is not None and pooled.multi_rate is not None
    return {
        "seed": seed,
        "delta": pooled.delta,
        "low": pooled.ci.low,
        "high": pooled.ci.high,
        "single": [round(pooled.single_rate * pooled.single_replies), pooled.single_replies],
        "multi": [round(pooled.multi_rate * pooled.multi_replies), pooled.multi_replies],
        "multi_first": [sum(h.generated[0] for h in multi if h.generated), sum(1 for h in multi if h.generated)],
        "backtracked": [sum(sum(h.hidden) for h in multi), sum(len(h.hidden) for h in multi)],
        "visible": pooled.visible_only.model_dump(),
        "dims_covering": sum(covers(a.ci.low, a.ci.high) for a in dims),
        "dims": len(dims),
        "hazard": {"delta": hazard.delta, "low": hazard.low, "high": hazard.high},
    }


def seed_line(row: dict[str, Any]) -> str:
    vis, hz = row["visible"], row["hazard"]
    return (
        f"{row['seed']:>4}  {row['delta'] * 100:+5.1f} [{row['low'] * 100:+5.1f}, {row['high'] * 100:+5.1f}]  "
        f"{'yes' if covers(row['low'], row['high']) else 'NO ':>5}   "
        f"{vis['delta'] * 100:+5.1f} [{vis['low'] * 100:+5.1f}, {vis['high'] * 100:+5.1f}]  "
        f"{'yes' if covers(vis['low'], vis['high']) else 'NO ':>5}  {row['dims_covering'] / row['dims']:>8.0%}  "
        f"{hz['delta'] * 100:+5.1f} [{hz['low'] * 100:+5.1f}, {hz['high'] * 100:+5.1f}]"
        f" {'' if covers(hz['low'], hz['high']) else 'NO'}"
    )


def _pooled(rows: list[dict[str, Any]], key: str) -> str:
    k, n = (sum(r[key][i] for r in rows) for i in (0, 1))
    found = rate(k, n)
    return f"{found.rate:.2%} [{found.low:.2%}, {found.high:.2%}] of {n} replies"


def summarize(rows: list[dict[str, Any]], truth: float) -> None:
    rows = sorted(rows, key=lambda r: r["seed"])
    n = len(rows)
    inside = [covers(r["low"], r["high"]) for r in rows]
    coverage = rate(sum(inside), n)
    first = rows[:CRITERION_SEEDS]
    deltas = np.array([r["delta"] for r in rows])
    implied_se = float(np.mean([(r["high"] - r["low"]) / (2 * stats.norm.ppf(0.975)) for r in rows]))
    test = stats.ttest_1samp(deltas, 0.0)
    p_criterion = float(stats.binom.sf(CRITERION_INSIDE - 1, CRITERION_SEEDS, 0.95))
    print(f"\nover {n} seeds ({rows[0]['seed']}..{rows[-1]['seed']}):")
    print(
        f"0 inside the pooled 95% interval: {sum(inside)} of {n}, coverage {coverage.rate:.1%} "
        f"[{coverage.low:.1%}, {coverage.high:.1%}] (Wilson)"
    )
    print(
        f"first {len(first)} seeds: {sum(covers(r['low'], r['high']) for r in first)} of {len(first)} "
        f"(≥ {CRITERION_INSIDE} of {CRITERION_SEEDS} happens with P = {p_criterion:.2f} at exactly 95% coverage)"
    )
    blocks = [sum(inside[i : i + CRITERION_SEEDS]) for i in range(0, n - CRITERION_SEEDS + 1, CRITERION_SEEDS)]
    if len(blocks) > 1:
        print(
            f"disjoint blocks of {CRITERION_SEEDS} seeds with ≥ {CRITERION_INSIDE} inside: "
            f"{sum(b >= CRITERION_INSIDE for b in blocks)} of {len(blocks)} (counts {', '.join(map(str, blocks))})"
        )
    print(
        f"mean amplification {deltas.mean() * 100:+.2f} pp, SE {stats.sem(deltas) * 100:.2f} pp "
        f"(t-test against 0: p = {test.pvalue:.2f}); SD over seeds {deltas.std(ddof=1) * 100:.2f} pp against "
        f"the interval's implied SE {implied_se * 100:.2f} pp"
    )
    print(f"sim's unsafe share per generated reply, from its knobs: {truth:.2%}")
    print(f"  single-turn replies:                {_pooled(rows, 'single')}")
    print(f"  multi-turn replies (all generated): {_pooled(rows, 'multi')}")
    print(f"  multi-turn first replies:           {_pooled(rows, 'multi_first')}")
    print(f"  backtracked replies:                {_pooled(rows, 'backtracked')}")
    visible = [covers(r["visible"]["low"], r["visible"]["high"]) for r in rows]
    mean_visible = np.mean([r["visible"]["delta"] for r in rows])
    print(
        f"visible replies only (secondary view): 0 inside in {sum(visible)} of {n}, mean {mean_visible * 100:+.2f} pp"
    )
    share = np.mean([r["dims_covering"] / r["dims"] for r in rows])
    print(f"dimension intervals covering 0, mean share: {share:.1%}")
    hazard = sum(covers(r["hazard"]["low"], r["hazard"]["high"]) for r in rows)
    print(f"hazard later − first covering 0: {hazard} of {n} seeds")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20, help="how many run seeds")
    parser.add_argument("--first", type=int, default=1, help="the first run seed")
    parser.add_argument("--items", type=int, default=10, help="items per domain (the shipped limit is 10)")
    parser.add_argument("--jsonl", type=Path, help="append each seed's row to this file")
    parser.add_argument("--summarize", type=Path, help="print the summary of a saved JSONL and run nothing")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    truth = sim_reply_rate(args.items)
    if args.summarize is not None:
        summarize([orjson.loads(line) for line in args.summarize.read_bytes().splitlines() if line.strip()], truth)
        return
    print(f"crescendo, escalation off (leak_per_turn=0), {args.items} items per domain, seeds from {args.first}")
    print("seed  amplification pp [95% CI]      0 in   visible-only pp [95% CI]   0 in  dims 0 in  hazard later−first")
    rows = []
    for seed in range(args.first, args.first + args.seeds):
        row = run_once(seed, args.items)
        rows.append(row)
        print(seed_line(row), flush=True)
        if args.jsonl is not None:
            with args.jsonl.open("ab") as sink:
                sink.write(orjson.dumps(row) + b"\n")
    summarize(rows, truth)


if __name__ == "__main__":
    main()
