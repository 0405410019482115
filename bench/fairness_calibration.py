"""Power and false alarms of the whole fairness pipeline, measured on the sim tutor.

A bias of known size is planted: the sim tutor leaks the answer more often when its framing sentence says
the student is an immigrant (`cue_bias`). Over many run seeds this prints how often the pipeline flags that
dimension and metric (power), and how often it flags anything else, with and without the planted bias
(false alarms; nominally about 5% per contrast). Run: `python bench/fairness_calibration.py [--seeds N]`.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path
from typing import Any

import anyio
import structlog

import engine

ROOT = Path(__file__).resolve().parents[1]
TARGET = ("immigration", "answer_leakage")
IMMIGRANT_CUES = ("abroad", "immigra")  # every immigrant framing sentence holds one of these, no other does


def calibration_scenario(seed: int, bias: float, *, items: int = 20) -> engine.Scenario:
    """The shipped explicit-cue scenario, narrowed to one domain and two dimensions, with an optional plant."""
    cue_bias = ", ".join(f"{cue}: {bias}" for cue in IMMIGRANT_CUES) if bias else ""
    return engine.load_scenario(
        ROOT / "scenarios" / "fairness.yaml",
        overrides=[
            f"seed={seed}",
            f"items.0.limit={items}",
            "items.0.domains=[mathematics]",
            "design.dimensions=[immigration, gender]",
            f"models.tutor.params.cue_bias={{{cue_bias}}}",
        ],
    )


async def flagged(seed: int, bias: float, out: Path) -> dict[str, Any]:
    """Run one calibration scenario; return its contrasts and whether the target was flagged."""
    result = await engine.run(calibration_scenario(seed, bias), out=out / f"{bias}-{seed}")
    contrasts = [c for c in result.summary["fairness"]["contrasts"] if c["status"] == "ok"]
    target = [c for c in contrasts if (c["dimension"], c["metric"]) == TARGET]
    others = [c for c in contrasts if (c["dimension"], c["metric"]) != TARGET]
    return {
        "target": any(c["violation"] for c in target),
        "others": sum(c["violation"] for c in others),
        "others_tested": len(others),
        "other_dimensions": sum(c["violation"] for c in others if c["dimension"] != TARGET[0]),
        "other_dimensions_tested": sum(1 for c in others if c["dimension"] != TARGET[0]),
    }


async def study(seeds: int, bias: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        planted = [await flagged(seed, bias, Path(tmp)) for seed in range(seeds)]
        null = [await flagged(seed, 0.0, Path(tmp)) for seed in range(seeds)]

    def share(rows: list[dict[str, Any]], key: str, of: str | None = None) -> float:
        return float(sum(r[key] for r in rows)) / (sum(r[of] for r in rows) if of else len(rows))

    print(f"runs per arm            {seeds} (20 mathematics items, dimensions immigration and gender)")
    print(f"planted bias            +{bias:.2f} leak probability when the framing says 'immigrant'")
    print(f"power                   {share(planted, 'target'):.0%} of planted runs flag immigration × answer_leakage")
    print(f"target false alarms     {share(null, 'target'):.0%} of null runs flag immigration × answer_leakage")
    print(f"false alarms (null)     {share(null, 'others', 'others_tested'):.1%} of other contrasts flagged")
    print(
        "false alarms (planted)  "
        f"{share(planted, 'other_dimensions', 'other_dimensions_tested'):.1%} of contrasts in other dimensions flagged"
    )
    print(
        "downstream (planted)    "
        f"{share(planted, 'others', 'others_tested'):.1%} of all other contrasts flagged "
        "(more leaks end dialogues sooner, so turn counts and ratios in the planted dimension move too)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--bias", type=float, default=0.3)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    anyio.run(study, args.seeds, args.bias, backend="asyncio")


if __name__ == "__main__":
    main()
