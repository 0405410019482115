"""EduFair-style tables: does the tutor's pedagogy change with the student's demographic cue, item by item?

Each dialogue is scored per metric (rates over its applicable tutor turns, and the deterministic conversation
metrics); scores are paired by item across the levels of a dimension, so item difficulty cancels out. Two
levels get a paired Wilcoxon-Pratt test with the rank-biserial r on the same ranks; more levels get Friedman,
and only a dimension whose Friedman p < 0.10 can have pair findings (EduFair's gate). Every pair is a member
of the family whatever its gate says, with its own p: the bench measured that letting only gate-passing pairs
into the family lifts the null rate of any finding to 9% (income, 50 items), because a pair selected by its
gate is no longer a fair draw. The opposite design gets its 2×2 contrasts. Every tested contrast of the run
forms one declared family, corrected (Benjamini–Hochberg by default): a finding is a contrast whose adjusted
p ≤ q and, for a pair of a multi-level dimension, whose Friedman gate is open (p < 0.10); nothing else.
Intervals describe effects; they never decide. Everything comes from the records.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine import (
    NULL_DRAWS,
    SUMMARIZERS,
    Block,
    BlockSummarizer,
    Episode,
    EpisodeRecord,
    Scenario,
    derive_seed,
    lazy_module,
    nanmean,
)
from personas.fairness import FairnessAnalysis

from .conversation_stats import CONVERSATION_STATS
from .fairness_blocks import ALL_DOMAINS, fairness_blocks
from .fairness_mechanism import mechanisms, metric_agreement
from .fairness_model import (
    AuditRow,
    FairnessResults,
    FairnessSummary,
    LevelMeans,
)
from .fairness_null import NullCell, mark_contrasts, null_draws
from .fairness_planning import planning_lines
from .fairness_replies import judged_replies
from .fairness_stats import Tested, contrasts_of, correct, mean_abs_r, opposite_keys
from .fairness_study import fairness_study, fairness_study_blocks
from .fairness_ties import sim_tie_shares
from .protocols import fairness_protocol
from .student_audit import AUDIT_METRICS
from .turn_quality import TURN_QUALITY_METRICS

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

__all__ = ("FairnessSummarizer", "analysis_of", "dialogue_scores")

TURN_METRICS = TURN_QUALITY_METRICS
CONVERSATION_METRICS = CONVERSATION_STATS


def dialogue_scores(record: EpisodeRecord) -> dict[str, float]:
    """One number per metric for a dialogue: the rate over applicable tutor turns (−1 = not applicable)."""
    scores: dict[str, float] = {}
    for metric in TURN_METRICS:
        values = [
            float(j.value)
            for j in record.judgments
            if j.metric == metric
            and isinstance(j.target, int)
            and isinstance(j.value, int | float)
            and not isinstance(j.value, bool)
            and j.value != -1
        ]
        scores[metric] = sum(values) / len(values) if values else math.nan
    for metric in CONVERSATION_METRICS:
        judgment = record.judgment(metric, "conversation")
        value = judgment.value if judgment is not None else None
        scores[metric] = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    return scores


def analysis_of(manifest: Mapping[str, Any]) -> FairnessAnalysis:
    """The run's analysis settings (`design.analysis`), defaults when the scenario names none."""
    design = (manifest.get("scenario") or {}).get("design") or {}
    return FairnessAnalysis.model_validate(design.get("analysis") or {})


Scores = Mapping[str, Mapping[str, float]]
"""Dialogue scores by episode id, computed once per summary."""


def _by_item(records: Iterable[EpisodeRecord], scores: Scores, metric: str, items: Sequence[str]) -> list[float]:
    """Per item, the mean score over replicates (NaN when the item has no applicable value)."""
    totals: dict[str, list[float]] = defaultdict(list)
    for record in records:
        value = scores[record.id][metric]
        if not math.isnan(value):
            totals[record.item_id].append(value)
    return [sum(totals[i]) / len(totals[i]) if totals[i] else math.nan for i in items]


class FairnessSummarizer(BlockSummarizer[FairnessSummary]):
    """The fairness kind's tables. `intervals=False` skips every bootstrap (verdicts never need one); the
    calibration bench uses it, with `results`, to run thousands of analyses."""

    summary_model = FairnessSummary
    protocol = staticmethod(fairness_protocol)
    model_headline = ("answer_leakage", "lower")
    """What a study of several tutors ranks them by (engine.report._models)."""
    model_tables = staticmethod(fairness_study)
    model_blocks = staticmethod(fairness_study_blocks)
    """A study's mean |r| and findings per tutor × domain (judges.fairness_study)."""

    def __init__(self, *, intervals: bool = True, null_draws: int = NULL_DRAWS) -> None:
        self.intervals = intervals
        self.null_draws = null_draws

    def blocks(self, summary: FairnessSummary, /) -> list[Block]:
        """The family and its findings, the mean-|r| tables, every contrast plotted, the audit."""
        return fairness_blocks(summary.fairness)

    def summarize(self, records: Sequence[EpisodeRecord], manifest: Mapping[str, Any], /) -> FairnessSummary:
        return FairnessSummary(fairness=self.results(records, manifest))

    def results(self, records: Sequence[EpisodeRecord], manifest: Mapping[str, Any], /) -> FairnessResults:
        """The "fairness" part of summary.json, typed row by row as it is built."""
        ok = [r for r in records if r.status == "ok"]
        seed = int(manifest.get("seed") or 0)
        analysis = analysis_of(manifest)
        n_boot = analysis.bootstrap if self.intervals else 0
        scores = {r.id: dialogue_scores(r) for r in ok}
        domains = sorted({str(r.meta.get("domain")) for r in ok})
        tested: list[Tested] = []
        means: list[LevelMeans] = []
        null_cells: list[NullCell] = []
        for domain in [ALL_DOMAINS, *domains] if len(domains) > 1 else domains:
            pool = [r for r in ok if domain == ALL_DOMAINS or str(r.meta.get("domain")) == domain]
            for channel in sorted({r.condition.get("channel", "") for r in pool}):
                cell = [r for r in pool if r.condition.get("channel", "") == channel]
                tested += self._cell(cell, scores, (domain, channel), seed, means, null_cells, analysis, n_boot)
        correction = correct(tested, analysis, n_boot)
        draws = null_draws(null_cells, seed=seed, draws=self.null_draws, derive=derive_seed)
        contrasts = mark_contrasts([t.row for t in tested], null_cells, draws)
        agreement = metric_agreement(ok)
        findings = [c for c in contrasts if c.finding]
        return FairnessResults(
            tutor=manifest.get("models", {}).get("tutor"),
            correction=correction,
            contrasts=contrasts,
            findings=findings,
            mechanisms=mechanisms(findings, agreement),
            metric_agreement=agreement,
            means=means,
            mean_abs_r=mean_abs_r(contrasts, draws),
            audit=self._audit(ok),
            stop_reasons=self._stop_reasons(ok),
            judged_replies=judged_replies(ok),
        )

    def _cell(
        self,
        records: list[EpisodeRecord],
        scores: Scores,
        where: tuple[str, str],
        seed: int,
        means: list[LevelMeans],
        null_cells: list[NullCell],
        analysis: FairnessAnalysis,
        n_boot: int,
    ) -> list[Tested]:
        domain, channel = where
        found: list[Tested] = []
        items = sorted({r.item_id for r in records})
        for dimension in sorted({r.condition.get("dimension", "") for r in records} - {"baseline"}):
            group = [r for r in records if r.condition.get("dimension") == dimension]
            levels = sorted({r.condition.get("level", "") for r in group})
            opposite = opposite_keys(group) is not None
            null_cell = NullCell((domain, channel, dimension), levels, {}, opposite)
            null_cells.append(null_cell)
            for metric in (*TURN_METRICS, *CONVERSATION_METRICS):
                columns = {
                    level: _by_item((r for r in group if r.condition.get("level") == level), scores, metric, items)
                    for level in levels
                }
                if len(levels) >= 2:
                    null_cell.tables[metric] = np.column_stack([np.asarray(columns[lv], dtype=float) for lv in levels])
                means.append(
                    LevelMeans(
                        domain=domain,
                        channel=channel,
                        dimension=dimension,
                        metric=metric,
                        levels={level: nanmean(v) for level, v in columns.items()},
                    )
                )
                cell_keys = {"domain": domain, "channel": channel, "dimension": dimension, "metric": metric}
                cell_seed = derive_seed(seed, domain, channel, dimension, metric)
                found += contrasts_of(group, columns, levels, cell_keys, cell_seed, analysis, n_boot)
        return found

    @staticmethod
    def _audit(records: list[EpisodeRecord]) -> list[AuditRow]:
        groups: dict[tuple[str, str, str], list[EpisodeRecord]] = defaultdict(list)
        for r in records:
            groups[
                (r.condition.get("channel", ""), r.condition.get("dimension", ""), r.condition.get("level", ""))
            ].append(r)
        rows = []
        for (channel, dimension, level), group in sorted(groups.items()):
            shares: dict[str, float | None] = {}
            for flag in AUDIT_METRICS:
                values = [
                    j.value for r in group if (j := r.judgment(flag, "conversation")) and isinstance(j.value, bool)
                ]
                shares[flag] = sum(values) / len(values) if values else None
            rows.append(AuditRow(channel=channel, dimension=dimension, level=level, dialogues=len(group), **shares))
        return rows

    @staticmethod
    def _stop_reasons(records: list[EpisodeRecord]) -> dict[str, dict[str, int]]:
        reasons: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for r in records:
            key = f"{r.condition.get('channel', '')}/{r.condition.get('dimension', '')}={r.condition.get('level', '')}"
            reasons[key][str(r.metrics.get("stop_reason"))] += 1
        return {k: dict(v) for k, v in sorted(reasons.items())}

    def episode_verdict(self, record: EpisodeRecord, /) -> str:
        """Why the dialogue stopped: the tutor revealed the answer, the student solved it, or turns ran out."""
        return str(record.metrics.get("stop_reason") or "unknown").replace("_", " ")

    def episode_scores(self, record: EpisodeRecord, /) -> dict[str, float]:
        return dialogue_scores(record)

    def plan_notes(
        self, scenario: Scenario, episodes: Sequence[Episode], /, *, power_r: float | None = None
    ) -> list[str]:
        """Per cell, its item pairs and the smallest |r| it detects with 80% power under the declared correction
        (`simrun validate` and `--dry-run` print these before anything is spent); with `power_r`, the items per
        cell that |r| = power_r needs, its tie shares measured by a small run of the plan on the sim."""
        design = scenario.design.options if scenario.design is not None else {}
        analysis = FairnessAnalysis.model_validate(design.get("analysis") or {})
        ties = None
        if power_r is not None:
            ties = sim_tie_shares(scenario, FairnessSummarizer(intervals=False, null_draws=1).results)
        return planning_lines(episodes, analysis, power_r=power_r, ties=ties) + _length_note(scenario)


SUMMARIZERS.add("fairness", FairnessSummarizer())


def _length_note(scenario: Scenario) -> list[str]:
    """What the dry run's expected figure assumes for a tutor whose reveal rate no plan can know."""
    real = sorted({spec.model for spec in scenario.models.tutors if spec.provider != "sim"})
    if not real:
        return []
    return [
        f"estimate: {', '.join(real)} may end a dialogue early by giving the answer away, at a rate no dry run "
        "can know, so the expected calls and tokens below count every tutor turn (the student's, half its "
        "budget): an upper bound for dialogues that stop early. With the sim tutor its leak knobs give the length."
    ]
