"""Tied pairs for planning, measured live: a small run of the scenario itself on the calibrated sim.

A tied pair (a metric's per-item value equal at both levels) carries no sign, so it costs the signed-rank test
power; how many pairs tie depends on the metric and on the design (10 turns of per-turn rates tie less than a turn
count). `items_for_r` needs that share. It is measured here rather than assumed: the scenario's plan, cut to
`TIE_ITEMS` items per item source and played by the sim models (any role on a real endpoint is replaced by the
sim's own model with its default knobs), is run without a report and summarised without bootstraps; the share of
each metric is 1 − Σ differing / Σ n over its per-domain contrast rows (the test's own count of differing pairs,
after the rounding docs/statistics.md documents). One run costs a few seconds, once per process.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from engine import EpisodeRecord, Runner, Scenario

from .fairness_blocks import ALL_DOMAINS
from .fairness_model import FairnessContrast, FairnessResults

__all__ = ("TIE_ITEMS", "TieShares", "sim_tie_shares", "tie_shares")

TIE_ITEMS = 8
"""Items per item source in the measuring run (24 pairs per pooled contrast on the shipped bank, 2–3 s of CPU).
An estimate: on the shipped explicit scenario the mean share came out 22% at 8 items and 25% at 20."""


@dataclass(frozen=True)
class TieShares:
    """Per metric, the share of item pairs whose difference is 0; with the mean over metrics and the most tied."""

    by_metric: Mapping[str, float]
    items: int

    @property
    def mean(self) -> float:
        return sum(self.by_metric.values()) / len(self.by_metric)

    @property
    def most(self) -> tuple[str, float]:
        return max(self.by_metric.items(), key=lambda kv: (kv[1], kv[0]))


def tie_shares(contrasts: Iterable[FairnessContrast], items: int) -> TieShares | None:
    """Tie shares from a fairness summary's tested paired contrasts (an untested row counts no pairs, Friedman's
    omnibus row tests no differences); per metric the per-domain rows, or the pooled-domain rows where no
    per-domain row was tested (they hold the same pairs). None when nothing was tested."""
    tested = [r for r in contrasts if r.status == "ok" and r.n and r.test != "friedman"]
    shares: dict[str, float] = {}
    for metric in sorted({r.metric for r in tested}):
        rows = [r for r in tested if r.metric == metric]
        rows = [r for r in rows if r.domain != ALL_DOMAINS] or rows
        shares[metric] = 1 - sum(r.differing for r in rows) / sum(r.n for r in rows)
    return TieShares(shares, items) if shares else None


def _on_sim(scenario: Scenario, items: int) -> Scenario:
    """The scenario's plan with `items` items per source, every role played by the sim."""
    data = scenario.model_dump(mode="json", exclude_none=True)
    models = data["models"]
    tutor = models["tutor"]
    models["tutor"] = tutor if isinstance(tutor, dict) and tutor["model"].startswith("sim/") else {"model": "sim/tutor"}
    if "student" in models and not models["student"]["model"].startswith("sim/"):
        models["student"] = {"model": "sim/student"}
    judges = models.get("judge") or []
    if any(not j["model"].startswith("sim/") for j in judges):
        models["judge"] = [{"model": "sim/judge"}]
    models.pop("decoding", None)
    data["items"] = [{**source, "limit": items} for source in data["items"]]
    for operational in ("limit", "cache", "executor"):  # the whole cut plan, fresh, in this process
        data.pop(operational, None)
    found = Scenario.model_validate(data)
    return found.with_base_dir(scenario.base_dir)


async def _records(scenario: Scenario) -> list[EpisodeRecord]:
    found: list[EpisodeRecord] = []

    async def keep(record: EpisodeRecord) -> None:
        found.append(record)

    with tempfile.TemporaryDirectory() as out:
        runner = Runner(scenario, out=Path(out), on_episode=keep, probe=False, cache=False)
        await runner.open()
        await runner.run()
    return found


Summarize = Callable[[Sequence[EpisodeRecord], Mapping[str, Any]], FairnessResults]
"""The fairness summariser's `results` (passed in: the summariser is this module's caller)."""
_MEASURED: dict[tuple[str, str, int], TieShares | None] = {}


def sim_tie_shares(scenario: Scenario, summarize: Summarize, items: int = TIE_ITEMS) -> TieShares | None:
    """The tie shares of `scenario` on the calibrated sim, from `summarize`'s contrast rows (a run of a few
    seconds; the same scenario is measured once per process). None when that run tests no contrast."""
    key = (scenario.model_dump_json(), str(scenario.base_dir), items)
    if key not in _MEASURED:
        on_sim = _on_sim(scenario, items)
        records = anyio.run(_records, on_sim)
        manifest = {"seed": on_sim.seed, "scenario": on_sim.model_dump(mode="json")}
        _MEASURED[key] = tie_shares(summarize(records, manifest).contrasts, items)
    return _MEASURED[key]
