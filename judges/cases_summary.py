"""Tables for the `cases` scenario kind, from the records alone (so `simrun report` rebuilds them).

* success rate of open responses (at least one rubric criterion holds) per challenge type × response type ×
  reference, with an "overall" column pooling both response types (the paper's Table 1), and the criterion
  satisfaction rate. Replicates of a case, and its two response types, share the case, so success and MCQ
  intervals resample cases (`engine.stats._rates.clustered_rate`), never single replies;
* MCQ accuracy per variant × response type against chance (1/options): the pooled accuracy with its
  case-clustered interval, and a two-sided one-sample t-test of the per-case accuracies (over replicates and
  strategies) against chance — one value per case, since a test over replies as independent trials would be
  anticonservative;
* the reference gain: per case, success with retrieved strategies minus success without, a paired difference
  tested with Wilcoxon (Pratt) and sized with the rank-biserial r and its bootstrap interval (`engine.stats._paired`);
* the de-escalation rate of interactive continuations, overall, per challenge type and by whether the
  first response succeeded on the checklist;
* distinct-n diversity of the responses (and the most widespread 4-gram) per response type × reference.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine import (
    SUMMARIZERS,
    UNJUDGED,
    Block,
    BlockSummarizer,
    ClusteredRateSummary,
    Episode,
    EpisodeRecord,
    Scenario,
    clustered_rate,
    correct_family,
    derive_seed,
    lazy_module,
    nanmean,
    paired_contrast,
)

from .case_recovery import case_recovery
from .cases_blocks import cases_blocks
from .cases_model import (
    CasesResults,
    CasesSummary,
    CriteriaRow,
    DeescalationRow,
    DiversityRow,
    GainRow,
    McqRow,
    SuccessRow,
)
from .cases_origin import mcq_builders, mcq_plan_notes
from .cases_study import cases_study, cases_study_blocks
from .checklist import distinct_n, top_ngram
from .protocols import cases_protocol

if TYPE_CHECKING:
    from scipy import stats
else:
    stats = lazy_module("scipy.stats")

__all__ = ("OVERALL", "CasesSummarizer", "episode_scores", "episode_verdict", "open_scores")

ALL = "all"
GAIN_FAMILY = "reference gains"
OVERALL = "overall"
"""The success column that pools both response types (the paper's Table 1 "Overall")."""
CHALLENGE_ORDER = (
    "task_resistance",
    "emotional_distress",
    "social_interpersonal",
    "attention_engagement",
    "academic_struggle",
)
RESPONSES = ("immediate", "long_term")
DISTINCT_N = (1, 2, 3, 4, 5)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def open_scores(record: EpisodeRecord) -> tuple[float | None, float | None, str]:
    """(success 0/1, criteria rate, response text) of a record's judged response; None where unjudged."""
    turn = record.metrics.get("response_turn")
    if not isinstance(turn, int) or turn >= len(record.turns):
        return None, None, ""
    success = record.judgment("case_success", turn)
    share = record.judgment("criteria_rate", turn)
    return (
        _number(success.value) if success else None,
        _number(share.value) if share else None,
        record.turns[turn].text,
    )


def unjudged_at(record: EpisodeRecord, target: object) -> bool:
    """Whether a judge left `target` (the response turn, or "conversation") without a valid verdict."""
    return any(j.metric == UNJUDGED and j.target == target for j in record.judgments)


def _unjudged_response(record: EpisodeRecord) -> bool:
    """An open response the checklist judge left without a verdict (the rates and gains leave it out)."""
    return open_scores(record)[0] is None and unjudged_at(record, record.metrics.get("response_turn"))


def _challenge(record: EpisodeRecord) -> str:
    return str(record.meta.get("challenge_type") or record.meta.get("domain") or "unknown")


def _order(types: set[str]) -> list[str]:
    return [t for t in CHALLENGE_ORDER if t in types] + sorted(types - set(CHALLENGE_ORDER))


class CasesSummarizer(BlockSummarizer[CasesSummary]):
    summary_model = CasesSummary
    protocol = staticmethod(cases_protocol)
    model_headline = ("success", "higher")
    """What a study of several tutors ranks them by (engine.report._models)."""
    model_tables = staticmethod(cases_study)
    model_blocks = staticmethod(cases_study_blocks)
    """Across a study's tutors: each text statistic against success, Spearman (judges.cases_study)."""

    def summarize(self, records: Sequence[EpisodeRecord], manifest: Mapping[str, Any], /) -> CasesSummary:
        return CasesSummary(cases=self.results(records, manifest))

    def results(self, records: Sequence[EpisodeRecord], manifest: Mapping[str, Any], /) -> CasesResults:
        """The "cases" part of summary.json, every table's rows typed as they are built."""
        ok = [r for r in records if r.status == "ok"]
        seed = int(manifest.get("seed") or 0)
        skipped: dict[str, int] = defaultdict(int)
        for r in ok:
            if r.metrics.get("skipped"):
                skipped[str(r.metrics.get("task"))] += 1
        scored = [r for r in ok if not r.metrics.get("skipped")]
        open_records = [r for r in scored if r.metrics.get("task") == "open"]
        interactive = [r for r in scored if r.metrics.get("task") == "interactive"]
        mcq = [r for r in scored if r.metrics.get("task") in ("mcq4", "binary")]
        return CasesResults(
            tutor=manifest.get("models", {}).get("tutor"),
            challenge_types=_order({_challenge(r) for r in ok}),
            success=self._success(open_records, seed),
            criteria=self._criteria(open_records, seed),
            mcq=self._mcq(mcq, seed),
            reference_gain=self._reference_gain(open_records, seed),
            deescalation=self._deescalation(interactive, seed),
            diversity=self._diversity(open_records),
            case_recovery=case_recovery(open_records, lambda r: open_scores(r)[2]),
            mcq_construction=mcq_builders(mcq),
            skipped=dict(sorted(skipped.items())),
        )

    @staticmethod
    def _success(records: list[EpisodeRecord], seed: int) -> list[SuccessRow]:
        cells: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        left: Counter[tuple[str, str, str]] = Counter()
        for r in records:
            success, _, _ = open_scores(r)
            response, reference = str(r.metrics.get("response")), str(r.metrics.get("reference"))
            keys = [
                (challenge, column, reference) for challenge in (_challenge(r), ALL) for column in (response, OVERALL)
            ]
            if success is None:
                left.update(keys if _unjudged_response(r) else [])
                continue
            for key in keys:
                cells[key][r.item_id].append(success)
        rows = []
        for (challenge, response, reference), by_case in sorted(cells.items()):
            found = _clustered(by_case, derive_seed(seed, "success", challenge, response, reference))
            rows.append(
                SuccessRow(
                    challenge_type=challenge,
                    response=response,
                    reference=reference,
                    unjudged=left[(challenge, response, reference)],
                    **dict(found),
                )
            )
        return rows

    @staticmethod
    def _criteria(records: list[EpisodeRecord], seed: int) -> list[CriteriaRow]:
        """Mean per-response satisfaction rate, and the pooled share of satisfied criteria with its interval
        (resampling cases: a case's criteria and replicates are one cluster)."""
        groups: dict[tuple[str, str, str], list[EpisodeRecord]] = defaultdict(list)
        for r in records:
            key = (str(r.metrics.get("response")), str(r.metrics.get("reference")))
            groups[(ALL, *key)].append(r)
            groups[(_challenge(r), *key)].append(r)
        rows = []
        for (challenge, response, reference), group in sorted(groups.items()):
            shares = [s for r in group if (s := open_scores(r)[1]) is not None]
            by_case: dict[str, list[int]] = defaultdict(lambda: [0, 0])
            for r in group:
                turn = r.metrics.get("response_turn")
                for j in r.judgments:
                    if j.target == turn and j.metric.startswith("criterion_") and isinstance(j.value, int):
                        by_case[r.item_id][0] += int(j.value)
                        by_case[r.item_id][1] += 1
            cases = sorted(by_case)
            pooled = clustered_rate(
                [by_case[c][0] for c in cases],
                [by_case[c][1] for c in cases],
                seed=derive_seed(seed, "criteria", challenge, response, reference),
            )
            held, total = pooled.k, pooled.n
            rows.append(
                CriteriaRow(
                    challenge_type=challenge,
                    response=response,
                    reference=reference,
                    responses=len(shares),
                    mean_rate=sum(shares) / len(shares) if shares else None,
                    criteria_held=held,
                    criteria=total,
                    pooled_low=pooled.low,
                    pooled_high=pooled.high,
                    unjudged=sum(_unjudged_response(r) for r in group),
                )
            )
        return rows

    @staticmethod
    def _mcq(records: list[EpisodeRecord], seed: int) -> list[McqRow]:
        groups: dict[tuple[str, str, str], list[EpisodeRecord]] = defaultdict(list)
        for r in records:
            variant, response = str(r.metrics.get("task")), str(r.metrics.get("response"))
            for key in ((variant, response, ALL), (variant, ALL, ALL), (variant, ALL, _challenge(r))):
                groups[key].append(r)
        rows = []
        for (variant, response, challenge), group in sorted(groups.items()):
            options = {int(o) for r in group if isinstance(o := r.metrics.get("mcq_options"), int)}
            chance = 1 / options.pop() if len(options) == 1 else None
            by_case: dict[str, list[float]] = defaultdict(list)
            for r in group:
                by_case[r.item_id].append(float(r.metrics.get("mcq_correct") is True))
            p = _vs_chance([_mean(v) for v in by_case.values()], chance)
            rows.append(
                McqRow(
                    variant=variant,
                    response=response,
                    challenge_type=challenge,
                    chance=chance,
                    invalid=sum(1 for r in group if r.metrics.get("mcq_valid") is False),
                    p_vs_chance=p,
                    **dict(_clustered(by_case, derive_seed(seed, "mcq", variant, response, challenge))),
                )
            )
        return rows

    @staticmethod
    def _reference_gain(records: list[EpisodeRecord], seed: int) -> list[GainRow]:
        """Per response type (and pooled): paired retrieved − none over cases, on success and criteria rate.

        The pooled row pairs each case once (its response types averaged), so n is the number of cases."""
        per_case: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
        for r in records:
            success, share, _ = open_scores(r)
            response, reference = str(r.metrics.get("response")), str(r.metrics.get("reference"))
            for metric, value in (("success", success), ("criteria_rate", share)):
                if value is not None:
                    per_case[(metric, response, reference, r.item_id)].append(value)
        if not any(key[2] == "retrieved" for key in per_case):
            return []
        rows = []
        for metric in ("success", "criteria_rate"):
            for response in (*RESPONSES, ALL):
                responses = RESPONSES if response == ALL else (response,)
                cases = sorted({case for (m, resp, _, case) in per_case if m == metric and resp in responses})
                if not cases:
                    continue

                def column(
                    level: str, cases: list[str] = cases, responses: Sequence[str] = responses, metric: str = metric
                ) -> list[float]:
                    # the pooled row averages each case over the response types: one pair per case, not per
                    # (response type, case), since the two responses to one case are not independent
                    means = [
                        nanmean([_mean(per_case.get((metric, resp, level, case), [])) for resp in responses])
                        for case in cases
                    ]
                    return [math.nan if m is None else m for m in means]

                with_ref, without = column("retrieved"), column("none")
                contrast = paired_contrast(
                    with_ref,
                    without,
                    a_name="retrieved",
                    b_name="none",
                    seed=derive_seed(seed, "reference_gain", metric, response),
                )
                rows.append(
                    GainRow(
                        metric=metric,
                        response=response,
                        mean_retrieved=nanmean(with_ref),
                        mean_none=nanmean(without),
                        gain=contrast.mean_diff,
                        unjudged=sum(_unjudged_response(r) for r in records if r.metrics.get("response") in responses),
                        **contrast.model_dump(),
                    )
                )
        return correct_family(rows, family=GAIN_FAMILY)  # the gains of every metric and response are one family

    @staticmethod
    def _deescalation(records: list[EpisodeRecord], seed: int) -> list[DeescalationRow]:
        groups: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        left: Counter[tuple[str, str]] = Counter()
        for r in records:
            judged = r.judgment("deescalated", "conversation")
            value = _number(judged.value) if judged else None
            success = open_scores(r)[0]
            first = "all" if success is None else ("first response succeeded" if success else "first response failed")
            keys = [("challenge_type", _challenge(r)), ("challenge_type", ALL)]
            keys += [("first_response", first)] if success is not None else []
            if value is None:
                left.update(keys if unjudged_at(r, "conversation") else [])
                continue
            for key in keys:
                groups[key][r.item_id].append(value)
        return [
            DeescalationRow(
                by=by,
                group=group,
                unjudged=left[(by, group)],
                **dict(_clustered(by_case, derive_seed(seed, "deescalation", by, group))),
            )
            for (by, group), by_case in sorted(groups.items())
        ]

    @staticmethod
    def _diversity(records: list[EpisodeRecord]) -> list[DiversityRow]:
        groups: dict[tuple[str, str], list[str]] = defaultdict(list)
        for r in records:
            text = open_scores(r)[2]
            if text:
                groups[(str(r.metrics.get("response")), str(r.metrics.get("reference")))].append(text)
        rows = []
        for (response, reference), texts in sorted(groups.items()):
            top = top_ngram(texts, 4)
            rows.append(
                DiversityRow(
                    response=response,
                    reference=reference,
                    responses=len(texts),
                    **{f"distinct_{n}": distinct_n(texts, n) for n in DISTINCT_N},
                    top_4gram=top[0] if top else None,
                    top_4gram_share=top[1] if top else None,
                )
            )
        return rows

    def blocks(self, summary: CasesSummary, /) -> list[Block]:
        """Success, criteria and MCQ plots with intervals, reference gain, de-escalation, diversity."""
        return cases_blocks(summary.cases)

    def episode_verdict(self, record: EpisodeRecord, /) -> str:
        return episode_verdict(record)

    def plan_notes(
        self, scenario: Scenario, episodes: Sequence[Episode], /, *, power_r: float | None = None
    ) -> list[str]:
        """Who will build the MCQ options (`simrun validate`, `--dry-run`)."""
        return mcq_plan_notes(scenario, episodes)

    def episode_scores(self, record: EpisodeRecord, /) -> dict[str, float]:
        return episode_scores(record)


def episode_verdict(record: EpisodeRecord) -> str:
    """The outcome of the episode's task: checklist success, MCQ correctness, or de-escalation."""
    task = record.metrics.get("task")
    if record.metrics.get("skipped"):
        return "skipped (no material)"
    if task in ("mcq4", "binary"):
        if record.metrics.get("mcq_valid") is False:
            return "mcq invalid"
        return "mcq correct" if record.metrics.get("mcq_correct") is True else "mcq wrong"
    if task == "interactive":
        judged = record.judgment("deescalated", "conversation")
        value = _number(judged.value) if judged else None
        if value is not None:
            return "de-escalated" if value else "not de-escalated"
    success = open_scores(record)[0]
    if success is None:
        return "not judged"
    return "success" if success else "no criterion met"


def episode_scores(record: EpisodeRecord) -> dict[str, float]:
    """Per-episode numbers `simrun compare` pairs across runs (NaN where the task does not measure it)."""
    success, share, _ = open_scores(record)
    task = record.metrics.get("task")
    mcq = task in ("mcq4", "binary") and not record.metrics.get("skipped")
    judged = record.judgment("deescalated", "conversation")
    calm = _number(judged.value) if judged else None
    return {
        "success": math.nan if success is None else success,
        "criteria_rate": math.nan if share is None else share,
        "mcq_correct": float(record.metrics.get("mcq_correct") is True) if mcq else math.nan,
        "deescalated": math.nan if calm is None else calm,
    }


def _vs_chance(case_rates: Sequence[float], chance: float | None) -> float | None:
    """p of the per-case accuracies against chance (one-sample t); None without spread or below two cases."""
    if chance is None or len(case_rates) < 2 or len(set(case_rates)) < 2:
        return None
    return float(stats.ttest_1samp(case_rates, chance).pvalue)


def _clustered(by_case: Mapping[str, Sequence[float]], seed: int) -> ClusteredRateSummary:
    """Pooled 0/1 rate over cases, each case a cluster of its replies (replicates, response types, MCQs)."""
    cases = sorted(by_case)
    return clustered_rate([int(sum(by_case[c])) for c in cases], [len(by_case[c]) for c in cases], seed=seed)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


SUMMARIZERS.add("cases", CasesSummarizer())
