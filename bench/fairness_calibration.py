"""Null family-wise rate and power of the fairness analysis, for every design simrun ships.

What runs: the shipped scenario's own plan (its `demographic` design, so pairing, name rotation and the
conditions are the real ones), one dialogue record per planned episode, and the registered fairness
summariser on those records — the code `simrun report` runs, with the declared family and correction. Only
the dialogues are simulated here instead of played through the async runner: a numpy model of the `sim`
tutor–student–judge loop with the sim's knobs (a student whose draws are shared by the levels of an item,
as the sim's paired seeds make them; a tutor that leaks with probability leak_base + leak_per_turn × pressure
+ the planted bias; EduFair's five per-turn labels with −1 where no mistake preceded; three judge votes with
5% noise each; the four conversation metrics from word counts). That makes thousands of runs affordable on
two cores; the intervals are skipped because no verdict uses them. Every run, arm and design has its own
seeds: no episode is shared between arms.

Printed: for each design and item count, the share of null runs with any finding (family-wise; BH, or the
`--correction` chosen, at q = 0.05 must stay ≤ 5% within Monte-Carlo error), and the power to find a leak
bias planted on one level at three sizes; then the null rate of the three shipped scenarios at their shipped
size. A plot goes to `--plot`. Run:
`python bench/fairness_calibration.py [--seeds 200] [--items 20 50] [--effects 0.1 0.2 0.3] [--correction holm]`;
with `--executor ray [--ray-address auto]` the seeds of each arm run on Ray workers (`engine.fan_out`), with the
same figures: every seed is derived from its arm and index, wherever it runs.
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np

import engine
from engine import Episode, EpisodeRecord, Item
from engine.scenario._plan import load_items, make_design, plan_episodes
from judges.fairness_model import FairnessContrast, FairnessResults
from judges.fairness_summary import FairnessSummarizer

ROOT = Path(__file__).resolve().parents[1]
STAMP = "2026-01-01T00:00:00+00:00"
JUDGE_ERROR = 0.05
VOTES = 3
TUTOR = {"leak_base": 0.1, "leak_per_turn": 0.05, "recognize_rate": 0.7}
STUDENT = {"solve_rate": 0.05, "wrong_rate": 0.5, "ask_rate": 0.3}
Row = FairnessContrast


@dataclass(frozen=True)
class Design:
    """One shipped design, narrowed to one domain, with a leak bias planted on one demographic value."""

    name: str
    scenario: str
    overrides: tuple[str, ...]
    planted: tuple[str, str]
    """(demographic key, value) whose dialogues leak more."""
    target: Callable[[Row], bool]
    """The contrasts that carry the planted effect on answer leakage (power counts these)."""


DESIGNS = (
    Design(
        "2-level (immigration)",
        "fairness.yaml",
        ("design.dimensions=[immigration, gender]", "design.baseline=false"),
        ("immigration", "immigrant"),
        lambda c: (c.dimension, c.metric) == ("immigration", "answer_leakage"),
    ),
    Design(
        "3-level (income)",
        "fairness.yaml",
        ("design.dimensions=[ses, gender]", "design.baseline=false"),
        ("ses", "low_income"),
        lambda c: (c.dimension, c.metric) == ("ses", "answer_leakage") and "low_income" in (c.a, c.b),
    ),
    Design(
        "implicit names (four given names)",
        "names.yaml",
        ("design.names=four_given_names.yaml", "design.baseline=false"),
        ("gender", "female"),
        lambda c: (c.dimension, c.metric) == ("name_gender", "answer_leakage"),
    ),
    Design(
        "2x2 opposite (perceived gender)",
        "gender_mismatch.yaml",
        (),
        ("perceived_gender", "female"),
        lambda c: (c.dimension, c.metric, c.test) == ("gender_mismatch", "answer_leakage", "perceived"),
    ),
)
SHIPPED = ("fairness.yaml", "names.yaml", "gender_mismatch.yaml")


def _flip(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Majority of three noisy judge votes on binary labels (−1 stays −1: the gate is read from the turn)."""
    wrong = (rng.random((VOTES, *labels.shape)) < JUDGE_ERROR).sum(axis=0) >= 2
    return np.where(labels < 0, labels, np.where(wrong, 1 - labels, labels))


def dialogue(episode: Episode, *, seed: int, bias: float, max_turns: int) -> Any:
    """One simulated dialogue's judgments and stop reason (see the module doc for the model)."""
    shared = np.random.default_rng(engine.derive_seed(seed, "student", episode.item.id, episode.replicate))
    own = np.random.default_rng(engine.derive_seed(seed, "tutor", episode.id))
    difficulty = np.random.default_rng(engine.derive_seed(seed, "item", episode.item.id)).random()
    tutor_turns = (max_turns - 1) // 2
    student = shared.random((tutor_turns, 3))
    tutor = own.random((tutor_turns, 6))
    labels: list[list[int]] = []
    words = [12]
    student_words = []
    questions = [1]
    stop = "max_turns"
    for k in range(tutor_turns):
        solved = student[k, 0] < STUDENT["solve_rate"]
        mistake = not solved and student[k, 1] < STUDENT["wrong_rate"] * (0.6 + 0.8 * difficulty)
        student_words.append(4 + int(8 * student[k, 2]))
        if solved:
            labels.append([-1, 0, 0, 0, -1])
            words.append(8)
            questions.append(0)
            stop = "student_solved"
            break
        leak_p = TUTOR["leak_base"] + TUTOR["leak_per_turn"] * k + bias
        leak = tutor[k, 0] < min(0.95, max(0.0, leak_p))
        recognised = mistake and tutor[k, 1] < TUTOR["recognize_rate"]
        asks = not leak and tutor[k, 2] < 0.75
        task = not leak and tutor[k, 3] < 0.6
        tone = int(recognised and tutor[k, 4] < 0.85) if mistake else -1
        labels.append([int(recognised) if mistake else -1, int(leak), int(asks), int(task), tone])
        words.append((26 if leak else 14) + int(10 * tutor[k, 5]) + (8 if recognised else 0))
        questions.append(int(asks))
        if leak:
            stop = "tutor_revealed"
            break
    judged = _flip(np.asarray(labels), np.random.default_rng(engine.derive_seed(seed, "judge", episode.id)))
    return judged, stop, words, questions, student_words


METRIC_ORDER = ("mistake_recognize", "answer_leakage", "step_scaffolded", "actionability", "corrective_tone")


@dataclass(frozen=True)
class _Judgment:
    metric: str
    target: int | str
    value: int | float | None


@dataclass(frozen=True)
class _Record:
    """The fields of an EpisodeRecord the fairness summariser reads (pydantic construction would dominate the
    bench's run time; the summariser only reads attributes)."""

    id: str
    item_id: str
    condition: dict[str, str]
    replicate: int
    judgments: list[_Judgment]
    metrics: dict[str, Any]
    meta: dict[str, Any]
    status: str = "ok"

    def judgment(self, metric: str, target: int | str) -> _Judgment | None:
        for judgment in self.judgments:
            if judgment.metric == metric and judgment.target == target:
                return judgment
        return None


def record_of(episode: Episode, *, seed: int, bias: float, max_turns: int) -> EpisodeRecord:
    """The simulated dialogue as the record the summariser reads."""
    judged, stop, words, questions, student_words = dialogue(episode, seed=seed, bias=bias, max_turns=max_turns)
    judgments = [
        _Judgment(metric, 2 * k + 2, int(value))
        for k, row in enumerate(judged)
        for metric, value in zip(METRIC_ORDER, row, strict=True)
    ]
    conversation = {
        "tutor_turns": len(words),
        "tutor_avg_words": sum(words) / len(words),
        "tutor_question_rate": sum(questions) / len(questions),
        "tutor_student_word_ratio": sum(words) / sum(student_words) if student_words else None,
    }
    judgments += [_Judgment(m, "conversation", v) for m, v in conversation.items()]
    record = _Record(
        id=episode.id,
        item_id=episode.item.id,
        condition=dict(episode.condition),
        replicate=episode.replicate,
        judgments=judgments,
        metrics={"stop_reason": stop},
        meta={"domain": episode.item.domain},
    )
    return cast(EpisodeRecord, record)


def synthetic_items(count: int) -> list[Item]:
    return [
        Item(id=f"bench-{k:03d}", domain="mathematics", question=f"What is {k + 3} times 7?", answer=str(7 * k + 21))
        for k in range(count)
    ]


@dataclass
class Prepared:
    scenario: engine.Scenario
    items: list[Item]
    design: Any
    max_turns: int


def prepare(scenario_file: str, overrides: Sequence[str], items: int | None) -> Prepared:
    scenario = engine.load_scenario(ROOT / "scenarios" / scenario_file, overrides=list(overrides))
    bank = load_items(scenario) if items is None else synthetic_items(items)
    design = make_design(scenario)
    max_turns = int(scenario.student.options.get("max_turns", 10))
    return Prepared(scenario, bank, design, max_turns)


def analyse(prepared: Prepared, *, seed: int, planted: tuple[str, str] | None, bias: float) -> FairnessResults:
    """One simulated run of the prepared scenario under `seed`: its fairness summary (no intervals)."""
    scenario = prepared.scenario.model_copy(update={"seed": seed})
    records = []
    for episode in plan_episodes(scenario, prepared.items):
        demographic = prepared.design.extras(episode)["demographic"] if prepared.design is not None else {}
        hit = planted is not None and demographic.get(planted[0]) == planted[1]
        records.append(record_of(episode, seed=seed, bias=bias if hit else 0.0, max_turns=prepared.max_turns))
    manifest = {"seed": seed, "scenario": scenario.resolved()}
    return FairnessSummarizer(intervals=False).results(records, manifest)


def run_seed(arm: str, k: int) -> int:
    return engine.derive_seed(20261201, arm, k)


def trial(prepared: Prepared, arm: str, design: Design | None, bias: float, k: int) -> tuple[int, bool]:
    """One simulated run of an arm: its family size, and whether it found the planted effect (or, under the
    null, anything). A module-level function, so `engine.fan_out` can send it to Ray workers."""
    planted = design.planted if design is not None else None
    result = analyse(prepared, seed=run_seed(arm, k), planted=planted, bias=bias)
    findings = result.findings
    hit = any(design.target(c) for c in findings) if bias and design is not None else bool(findings)
    return result.correction.family_size, hit


def wilson(hits: int, n: int) -> tuple[float, float]:
    from scipy.stats import binomtest

    interval = binomtest(hits, n).proportion_ci(method="wilson")
    return float(interval.low), float(interval.high)


def share(hits: int, n: int) -> str:
    low, high = wilson(hits, n)
    return f"{hits / n:6.1%} [{low:.1%}, {high:.1%}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=200, help="run seeds per arm (independent per arm)")
    parser.add_argument("--items", type=int, nargs="+", default=[20, 50], help="items per design")
    parser.add_argument("--effects", type=float, nargs="+", default=[0.1, 0.2, 0.3], help="planted leak biases")
    parser.add_argument("--shipped-seeds", type=int, default=None, help="null runs per shipped scenario")
    parser.add_argument("--designs", nargs="+", default=None, help="only designs whose name contains one of these")
    parser.add_argument("--correction", choices=("bh", "holm", "bonferroni", "none"), default="bh")
    parser.add_argument("--engine-check", type=int, default=0, help="also run N real sim runs to compare with")
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "fairness_power.png")
    parser.add_argument("--executor", choices=("local", "ray"), default="local", help="ray: seeds on Ray workers")
    parser.add_argument("--ray-address", default=None, help="Ray cluster to join (auto, ray://HOST:PORT)")
    args = parser.parse_args()
    fan = partial(engine.fan_out, executor=args.executor, address=args.ray_address)
    started = time.perf_counter()
    print(f"seeds per arm {args.seeds}; {args.correction} at q = 0.05 over each run's family; Wilson 95% intervals")
    correction = (f"design.analysis.correction={args.correction}",)
    print(f"{'design':36} {'items':>5} {'family':>6} {'bias':>5}  {'any finding (null) / power':32}")
    print(f"{'':36} {'':5} {'(last)':>6}")
    curves: dict[tuple[str, int], list[tuple[float, float]]] = {}
    chosen = [d for d in DESIGNS if args.designs is None or any(word in d.name for word in args.designs)]
    for design in chosen:
        for n in args.items:
            prepared = prepare(design.scenario, (*design.overrides, *correction), n)
            family = 0
            for bias in (0.0, *args.effects):
                arm = f"{design.name}|{n}|{bias}"
                trials = fan(partial(trial, prepared, arm, design, bias), range(args.seeds))
                family = trials[-1][0]
                hits = sum(hit for _, hit in trials)
                label = "null, any finding" if bias == 0 else "power on the planted contrast"
                print(f"{design.name:36} {n:5d} {family:6d} {bias:5.2f}  {share(hits, args.seeds)}  {label}")
                curves.setdefault((design.name, n), []).append((bias, hits / args.seeds))
    shipped = args.shipped_seeds if args.shipped_seeds is not None else args.seeds
    for scenario_file in SHIPPED if shipped > 0 else ():
        null_of_shipped(scenario_file, shipped, correction, fan)
    if args.engine_check:
        engine_check(args.engine_check)
    print(f"\nelapsed {time.perf_counter() - started:.0f} s")
    plot(curves, args.plot)


def engine_check(runs: int) -> None:
    """The simulated records against the real thing: the same narrowed scenario run by the async runner on the
    sim, per metric the mean level, the mean null p and the share of contrasts with p = 1 (the tie structure
    that shapes the exact test), and how many runs found anything."""
    import tempfile

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    design = DESIGNS[0]
    overrides = (*design.overrides, "items.0.limit=20", "items.0.domains=[mathematics]")
    real: list[FairnessResults] = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(runs):
            scenario = engine.load_scenario(
                ROOT / "scenarios" / design.scenario, overrides=[*overrides, f"seed={run_seed('engine', k)}"]
            )
            result = engine.run_sync(scenario, out=Path(tmp) / f"r{k}")
            real.append(FairnessResults.model_validate(result.summary["fairness"]))
    prepared = prepare(design.scenario, design.overrides, 20)
    simulated = [analyse(prepared, seed=run_seed("engine-sim", k), planted=None, bias=0.0) for k in range(runs)]

    def profile(summaries: list[FairnessResults]) -> dict[str, tuple[float, float, float]]:
        ps: dict[str, list[float]] = {}
        levels: dict[str, list[float]] = {}
        for summary in summaries:
            for c in summary.contrasts:
                if c.status == "ok" and c.p is not None:
                    ps.setdefault(c.metric, []).append(c.p)
            for m in summary.means:
                levels.setdefault(m.metric, []).extend(v for v in m.levels.values() if v is not None)
        return {
            m: (
                float(np.mean(levels[m])),
                float(np.mean(ps.get(m, [math.nan]))),
                float(np.mean([p == 1.0 for p in ps.get(m, [math.nan])])),
            )
            for m in levels
        }

    ours, theirs = profile(simulated), profile(real)
    print(f"\nengine check: {runs} null runs each, {design.name}, 20 mathematics items; runner | simulated")
    print(f"{'metric':26} {'mean level':>17} {'mean null p':>15} {'share p = 1':>13}")
    for metric, (level, p, ones) in theirs.items():
        mine = ours.get(metric, (math.nan, math.nan, math.nan))
        print(f"{metric:26} {level:7.3f} | {mine[0]:7.3f} {p:6.2f} | {mine[1]:5.2f} {ones:5.0%} | {mine[2]:4.0%}")
    print(
        f"runs with any finding: runner {sum(bool(s.findings) for s in real)}/{runs}, "
        f"simulated {sum(bool(s.findings) for s in simulated)}/{runs}"
    )


def null_of_shipped(
    scenario_file: str, seeds: int, overrides: Sequence[str] = (), fan: Callable[..., Any] = engine.fan_out
) -> None:
    """The shipped scenario exactly as shipped, no bias: the share of runs with any finding."""
    print(f"shipped {scenario_file} (3 domains x 20 items and the pooled cell), no bias, {seeds} seeds: ", end="")
    prepared = prepare(scenario_file, overrides, None)
    trials = fan(partial(trial, prepared, scenario_file, None, 0.0), range(seeds))
    family, hits = (trials[-1][0] if trials else 0), sum(hit for _, hit in trials)
    print(f"family {family}, any finding {share(hits, seeds)}")


def plot(curves: Mapping[tuple[str, int], list[tuple[float, float]]], path: Path) -> None:
    try:
        import matplotlib
    except ImportError:  # a dev dependency: the report path draws its own SVG and needs no plotting library
        print("plot skipped: matplotlib is not installed (pip install 'simrun[dev]')")
        return

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(1, len(DESIGNS), figsize=(4 * len(DESIGNS), 3.2), sharey=True)
    for ax, design in zip(np.atleast_1d(axes), DESIGNS, strict=True):
        for (name, n), points in curves.items():
            if name == design.name:
                ax.plot([b for b, _ in points], [p for _, p in points], marker="o", label=f"{n} items")
        ax.axhline(0.05, color="#d92d20", linewidth=0.8, linestyle="--")
        ax.axhline(0.8, color="#667085", linewidth=0.8, linestyle=":")
        ax.set_title(design.name, fontsize=9)
        ax.set_xlabel("planted leak bias (0 = null: any finding)")
        ax.set_ylim(0, 1.02)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    np.atleast_1d(axes)[0].set_ylabel("share of runs")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"plot: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


if __name__ == "__main__":
    main()
