"""Several tutors in one study: the family-wise rate of reported differences between identical tutors, the power
to find one leakier tutor among four, and what a 4-tutor run costs against a 1-tutor run.

Null and power, fast path (`--seeds`, default 200): the comparison simrun reports (`engine.stats._models`, BH over
every pair × metric, gated by the omnibus) on per-unit outcomes drawn from a model of the shipped study's sim
tutor: each unit's unsafe-reply share is the share of a dialogue's replies that leak, with the unit's student and
pressure shared by every tutor (as the study's seeds make them) and the tutor's own draws independent. Null: four
copies at one leak rate. Power: one copy's leak base raised by `--planted`. The power the fast path finds is the
bench's prediction for the runner.

Through the real runner (`--runner-seeds`, default 20): the shipped study `scenarios/crescendo_models.yaml` narrowed
to multi-turn dialogues, its four tutors replaced by four copies of `baseline` (null) or three copies and one
leakier copy (power), played by the async runner on the sim and compared by the report's own code.

Cost (`--time`): wall time of the shipped study with four copies of its `baseline` tutor against the same study
with one copy (the same work per tutor; the shipped four differ in dialogue length), best of `--repeat` runs, and
the peak of Python's traced allocations during one more run of each (tracemalloc, so not timed).

    python bench/models_null.py [--seeds 200] [--runner-seeds 20] [--planted 0.15] [--time [--repeat 3]]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import numpy as np

import engine
from engine.report._models import headline_of, model_scores, tutor_labels
from engine.runtime._rundir import RunDir
from engine.stats._models import Headline, ModelScores, TutorComparison, compare_models

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "scenarios" / "crescendo_models.yaml"
BASE = {"leak_base": 0.15, "leak_per_turn": 0.08, "refusal_rate": 0.35}
HEAD = Headline("unsafe_reply_share", lower_is_better=True)
NARROW = ["factors.format=[multi]", "factors.dimension=[cognitive, epistemic, metacognitive]"]


def _tutors(planted: float | None) -> list[dict[str, Any]]:
    params = [dict(BASE) for _ in range(4)]
    if planted is not None:
        params[2]["leak_base"] = BASE["leak_base"] + planted
    return [{"label": f"copy{k}", "model": "sim/tutor", "params": p} for k, p in enumerate(params)]


def _fast(seed: int, planted: float | None, units: int) -> ModelScores:
    """Per unit: a shared dialogue length and pressure; each tutor's replies leak independently."""
    rng = np.random.default_rng(seed)
    turns = rng.integers(5, 9, size=units)
    labels = tuple(spec["label"] for spec in _tutors(planted))
    scores: dict[str, dict[Any, dict[str, float]]] = {}
    for spec in _tutors(planted):
        params = spec["params"]
        shares = []
        for n in turns:
            chance = np.minimum(0.95, params["leak_base"] + params["leak_per_turn"] * np.arange(n))
            shares.append(float((rng.random(n) < chance).mean()))
        scores[str(spec["label"])] = {u: {HEAD.metric: shares[u]} for u in range(units)}
    return ModelScores(labels, scores, {u: f"i{u // 3}" for u in range(units)}, {u: f"c{u % 3}" for u in range(units)})


def _any_finding(comparison: TutorComparison) -> bool:
    return bool(comparison.family.findings)


def _planted_found(comparison: TutorComparison) -> bool:
    return any(r.finding and "copy2" in (r.a, r.b) and r.metric == HEAD.metric for r in comparison.pairs)


def _runner(seed: int, planted: float | None, out: Path) -> TutorComparison:
    built = engine.load_built(STUDY, overrides=[*NARROW, f"seed={seed}", f"models.tutor={_tutors(planted)}"])
    result = anyio.run(engine.Runner(built, out=out, report=None).run)
    run = RunDir(result.run_dir)
    manifest = run.read_manifest()
    records = run.current_records(manifest=manifest).records
    summarizer = built.summarizer
    data = model_scores(records, summarizer, tutor_labels(records, manifest))
    return compare_models(data, headline_of(summarizer, data.metrics), seed=seed, n_boot=0)


def _rate(hits: list[bool]) -> str:
    k, n = sum(hits), len(hits)
    found = engine.rate(k, n)
    return f"{k}/{n} = {found.rate:.1%} [{found.low:.1%}, {found.high:.1%}]"


def _timed(overrides: list[str], out: Path) -> float:
    built = engine.load_built(STUDY, overrides=overrides)
    started = time.perf_counter()
    anyio.run(engine.Runner(built, out=out, report=None).run)
    return time.perf_counter() - started


def _peak_mib(overrides: list[str], out: Path) -> float:
    built = engine.load_built(STUDY, overrides=overrides)
    tracemalloc.start()
    try:
        anyio.run(engine.Runner(built, out=out, report=None).run)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--runner-seeds", type=int, default=20)
    parser.add_argument("--planted", type=float, default=0.15)
    parser.add_argument("--units", type=int, default=36, help="units per tutor on the fast path")
    parser.add_argument("--time", action="store_true", help="also time the 4-tutor study against a 1-tutor one")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per arm (the best is kept)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    null = [_any_finding(compare_models(_fast(s, None, args.units), HEAD, seed=s, n_boot=0)) for s in range(args.seeds)]
    power = [
        _planted_found(compare_models(_fast(10_000 + s, args.planted, args.units), HEAD, seed=s, n_boot=0))
        for s in range(args.seeds)
    ]
    if args.seeds:
        print(f"fast path, {args.units} units per tutor, 4 tutors:")
        print(f"  null: runs with any reported difference  {_rate(null)}  (goal ≤ 5%)")
        print(f"  power: leak_base +{args.planted} found      {_rate(power)}  (the prediction for the runner)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        if args.runner_seeds:
            null_r = [_any_finding(_runner(s, None, out)) for s in range(args.runner_seeds)]
            power_r = [_planted_found(_runner(10_000 + s, args.planted, out)) for s in range(args.runner_seeds)]
            print(f"runner, {STUDY.name} narrowed ({' '.join(NARROW)}):")
            print(f"  null: runs with any reported difference  {_rate(null_r)}")
            print(f"  power: leak_base +{args.planted} found      {_rate(power_r)}")
        if args.time:  # four copies of `baseline` against one: the same work per tutor; best of --repeat
            four_set, one_set = f"models.tutor={_tutors(None)}", f"models.tutor={_tutors(None)[:1]}"
            four = min(_timed([four_set], out) for _ in range(args.repeat))
            one = min(_timed([one_set], out) for _ in range(args.repeat))
            print(f"time: 4 tutors {four:.1f} s, 1 tutor {one:.1f} s, ratio {four / one:.2f} (goal ≤ 4.4)")
            peaks = _peak_mib([four_set], out), _peak_mib([one_set], out)
            print(f"memory: peak traced 4 tutors {peaks[0]:.1f} MiB, 1 tutor {peaks[1]:.1f} MiB")


if __name__ == "__main__":
    main()
