"""ReMath tables (scenario kind `remediation`), rebuilt from the records alone.

* Tasks A/B: per label (error, strategy, intention) the exact match with the expert, Cohen's kappa, and the
  entropy of the predicted vs the expert's label distribution, with each label's share.
  Where Bridge snippets carry two teachers' labels, the tutor is also scored against each teacher separately
  and the two averaged (the paper's Table 1/2 "match" and "IRR"), and a "human" row gives the two teachers'
  agreement with each other, over distinct snippets.
* Task C: per condition (`given`: human, none, error, strategy, both, predicted) the mean pairwise score against
  the judge's baseline (the novice reply by default; the table names it) on usefulness, care,
  human-soundingness and preference (−2..2, positive = the reply is better) with a 95% t interval over items,
  the judge's position bias, and the answer-leak rate (Wilson) when `answer_leak` ran. `human` is the expert's
  reply replayed: the paper's Human row.
* Table 8's automated metrics against the expert reply per condition, with the novice reply as "original"
  (`judges.remath_metrics`).
* Paired differences between the tutor's conditions over items (engine.stats._paired; the Human row is a reference,
  not a condition): Friedman then Bonferroni-corrected Wilcoxon for three or more conditions, a single
  Wilcoxon for two; rank-biserial r with a bootstrap interval.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine import (
    SUMMARIZERS,
    UNJUDGED,
    Block,
    BlockSummarizer,
    ClusteredRateSummary,
    EpisodeRecord,
    clustered_rate,
    contrast_rows,
    correct_family,
    derive_seed,
    lazy_module,
)

from .protocols import remath_protocol
from .remath_blocks import remath_blocks
from .remath_metrics import automated_metrics
from .remath_model import (
    AutomatedRow,
    Condition,
    LabelAgreement,
    MeanInterval,
    RemathResults,
    RemathSummary,
    TaskCDifference,
)
from .remath_pairings import pairings
from .remath_study import remath_study, remath_study_blocks, remath_tutor_blocks, remath_with_shared
from .remediation import PAIRWISE_DIMENSIONS, label_agreement
from .votes import most_common

if TYPE_CHECKING:
    import numpy as np
    from scipy import stats
else:
    np = lazy_module("numpy")
    stats = lazy_module("scipy.stats")

__all__ = ("GIVEN_ORDER", "RemathSummarizer", "mean_interval")

GIVEN_ORDER = ("human", "none", "error", "strategy", "both", "predicted")
_TASK_LABELS = {"error": ("error",), "strategy": ("strategy", "intention")}
_TASK_OF = {"error": ("error",), "strategy": ("strategy",), "intention": ("strategy",)}
_SCORES = (*PAIRWISE_DIMENSIONS, "overall")
DIFFERENCES_FAMILY = "Task C differences"


def mean_interval(values: Sequence[float]) -> MeanInterval:
    """Mean with its 95% t interval (None bounds below two values or with no spread)."""
    kept = [v for v in values if not math.isnan(v)]
    if not kept:
        return MeanInterval(n=0, mean=None, low=None, high=None)
    mean = float(np.mean(kept))
    if len(kept) < 2 or float(np.std(kept)) == 0.0:
        return MeanInterval(n=len(kept), mean=mean, low=None, high=None)
    interval = stats.ttest_1samp(kept, 0.0).confidence_interval(0.95)
    return MeanInterval(n=len(kept), mean=mean, low=float(interval.low), high=float(interval.high))


def _reply_scores(record: EpisodeRecord) -> dict[str, float]:
    scores: dict[str, float] = {}
    for dimension in PAIRWISE_DIMENSIONS:
        value = next(
            (j.value for j in record.judgments if j.metric == f"pairwise_{dimension}" and isinstance(j.target, int)),
            None,
        )
        scores[dimension] = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    parts = [scores[d] for d in PAIRWISE_DIMENSIONS]
    scores["overall"] = math.nan if any(math.isnan(p) for p in parts) else sum(parts) / len(parts)
    return scores


def _reply_turn(record: EpisodeRecord) -> int | None:
    """The judged reply's turn index (the pairwise judge's target), or the last visible tutor turn."""
    for j in record.judgments:
        if j.metric == "pairwise_preference" and isinstance(j.target, int) and j.target < len(record.turns):
            return j.target
    tutor = [t.index for t in record.turns if t.role == "tutor" and t.visible_to_tutor]
    return tutor[-1] if tutor else None


def _unjudged(record: EpisodeRecord) -> bool:
    """Whether some judge gave the tutor's reply no valid verdict: each score of the row then leaves it out."""
    return any(j.metric == UNJUDGED and isinstance(j.target, int) for j in record.judgments)


def _judgment_values(record: EpisodeRecord, metric: str) -> list[Any]:
    return [j.value for j in record.judgments if j.metric == metric and isinstance(j.target, int)]


def _label_match(record: EpisodeRecord, label: str) -> bool | None:
    """Whether the tutor's Task A/B label equals the expert's; None when either is missing."""
    pred, gold = record.metrics.get(f"{label}_pred"), record.metrics.get(f"{label}_gold")
    return pred == gold if isinstance(pred, str) and isinstance(gold, str) else None


class RemathSummarizer(BlockSummarizer[RemathSummary]):
    summary_model = RemathSummary
    protocol = staticmethod(remath_protocol)
    model_headline = ("overall", "higher")
    """What a study of several tutors ranks them by (engine.report._models)."""
    model_tables = staticmethod(remath_study)
    model_blocks = staticmethod(remath_study_blocks)
    tutor_blocks = staticmethod(remath_tutor_blocks)
    with_shared = staticmethod(remath_with_shared)
    """A study's Tables 3 and 8 with a row per tutor and the Human row once (judges.remath_study)."""

    def blocks(self, summary: RemathSummary, /) -> list[Block]:
        """Tasks A/B agreement and confusion, Task C by condition, its paired tests and Table 8."""
        return remath_blocks(summary.remath)

    def summarize(self, records: Sequence[EpisodeRecord], manifest: Mapping[str, Any], /) -> RemathSummary:
        return RemathSummary(remath=self.results(records, manifest))

    def results(self, records: Sequence[EpisodeRecord], manifest: Mapping[str, Any], /) -> RemathResults:
        """The "remath" part of summary.json, typed row by row as it is built."""
        ok = [r for r in records if r.status == "ok"]
        seed = int(manifest.get("seed") or 0)
        agreement = [
            self._agreement(ok, task, label)
            for task, labels in _TASK_LABELS.items()
            for label in labels
            if any(r.condition.get("task") == task for r in ok)
        ]
        replies = [r for r in ok if r.condition.get("task", "response") == "response"]
        givens = [g for g in GIVEN_ORDER if any(r.condition.get("given") == g for r in replies)]
        scores = {r.id: _reply_scores(r) for r in replies}
        items = sorted({r.item_id for r in replies})
        columns: dict[str, dict[str, list[float]]] = defaultdict(dict)
        conditions = [self._condition(given, replies, scores, items, columns, seed) for given in givens]
        differences = self._differences(columns, [g for g in givens if g != "human"], seed)
        automated = self._automated(replies, givens)
        return RemathResults(
            tutor=manifest.get("models", {}).get("tutor"),
            agreement=agreement,
            conditions=conditions,
            differences=differences,
            automated=automated,
            against=sorted({row.against for row in conditions if row.against}),
            items=len(items),
            pairings=pairings(ok),
        )

    @staticmethod
    def _condition(
        given: str,
        replies: Sequence[EpisodeRecord],
        scores: Mapping[str, Mapping[str, float]],
        items: Sequence[str],
        columns: dict[str, dict[str, list[float]]],
        seed: int,
    ) -> Condition:
        """Task C's row for `given`; each score's per-item means also go to `columns` for the paired tests."""
        group = [r for r in replies if r.condition.get("given") == given]
        means: dict[str, MeanInterval] = {}
        for metric in _SCORES:
            by_item: dict[str, list[float]] = defaultdict(list)
            for r in group:
                if not math.isnan(scores[r.id][metric]):
                    by_item[r.item_id].append(scores[r.id][metric])
            column = [float(np.mean(by_item[i])) if by_item[i] else math.nan for i in items]
            columns[metric][given] = column
            means[metric] = mean_interval(column)
        bias = [v for r in group for v in _judgment_values(r, "pairwise_position_bias") if isinstance(v, float)]
        leaks = [(r.item_id, v) for r in group for v in _judgment_values(r, "answer_leak") if isinstance(v, bool)]
        adherent = [
            (r.item_id, v == r.metrics.get("strategy_gold"))
            for r in group
            for v in _judgment_values(r, "used_strategy")
            if isinstance(v, str)
        ]
        baselines = [v for r in group for v in _judgment_values(r, "pairwise_against") if isinstance(v, str)]
        return Condition(
            given=given,
            replies=len(group),
            unjudged=sum(map(_unjudged, group)),
            usefulness=means["usefulness"],
            care=means["care"],
            human=means["human"],
            preference=means["preference"],
            overall=means["overall"],
            position_bias=float(np.mean(bias)) if bias else None,
            answer_leak=_rate_per_item(leaks, derive_seed(seed, "remath", given, "answer_leak")),
            strategy_adherence=_rate_per_item(adherent, derive_seed(seed, "remath", given, "adherence")),
            against=most_common(baselines) if baselines else None,
        )

    @staticmethod
    def _agreement(ok: Sequence[EpisodeRecord], task: str, label: str) -> LabelAgreement:
        """Tasks A/B: one label against the expert's, and against each teacher where two labelled a snippet."""
        task_records = [r for r in ok if r.condition.get("task") in _TASK_OF[label]]
        return label_agreement([r for r in ok if r.condition.get("task") == task], label, task_records)

    @staticmethod
    def _automated(replies: Sequence[EpisodeRecord], givens: Sequence[str]) -> list[AutomatedRow]:
        """Table 8: the novice reply ("original", once per item) and each condition, against the expert reply."""
        rows: list[AutomatedRow] = []
        novice: dict[str, tuple[str, str]] = {}
        for r in replies:
            reference, original = str(r.meta.get("reference", "")), str(r.meta.get("novice", ""))
            if reference and original:
                novice.setdefault(r.item_id, (original, reference))
        if novice:
            rows.append(automated_metrics("original", list(novice.values())))
        for given in givens:
            pairs = [
                (r.turns[turn].text, str(r.meta.get("reference", "")))
                for r in replies
                if r.condition.get("given") == given and (turn := _reply_turn(r)) is not None
            ]
            if pairs:
                rows.append(automated_metrics(given, pairs))
        return rows

    @staticmethod
    def _differences(
        columns: Mapping[str, Mapping[str, list[float]]], givens: list[str], seed: int
    ) -> list[TaskCDifference]:
        found: list[TaskCDifference] = []
        if len(givens) < 2:
            return found
        for metric in ("preference", "overall"):
            cols = {g: columns[metric][g] for g in givens}
            cell_seed = derive_seed(seed, "remath", metric)
            # later conditions first, so a positive r reads "more information helps"
            later_first = {g: cols[g] for g in reversed(givens)}
            found += [
                TaskCDifference(metric=metric, **row.model_dump()) for row in contrast_rows(later_first, seed=cell_seed)
            ]
        # every paired test of the table is one family: findings follow its BH p
        return correct_family(found, family=DIFFERENCES_FAMILY)

    def episode_verdict(self, record: EpisodeRecord, /) -> str:
        """Tasks A/B: which labels matched the expert's; Task C: whether the judge preferred the reply."""
        task = record.condition.get("task", "response")
        if task in _TASK_LABELS:
            found = [_label_match(record, label) for label in _TASK_LABELS[task]]
            if None in found:
                return "no valid label"
            pairs = zip(_TASK_LABELS[task], found, strict=True)
            return " · ".join(f"{label} {'right' if ok else 'wrong'}" for label, ok in pairs)
        preference = _reply_scores(record)["preference"]
        if math.isnan(preference):
            return "not judged"
        return "reply preferred" if preference > 0 else "baseline preferred" if preference < 0 else "tie"

    def episode_scores(self, record: EpisodeRecord, /) -> dict[str, float]:
        """Label matches (Tasks A/B) and pairwise scores and answer leak (Task C); NaN where they do not apply."""
        scores: dict[str, float] = {}
        for labels in _TASK_LABELS.values():
            for label in labels:
                match = _label_match(record, label)
                scores[f"{label}_match"] = math.nan if match is None else float(match)
        if record.condition.get("task", "response") == "response":
            scores.update(_reply_scores(record))
            leaks = [v for v in _judgment_values(record, "answer_leak") if isinstance(v, bool)]
            scores["answer_leak"] = float(any(leaks)) if leaks else math.nan
        else:
            scores.update(dict.fromkeys(_SCORES, math.nan))
            scores["answer_leak"] = math.nan
        return scores


SUMMARIZERS.add("remediation", RemathSummarizer())


def _rate_per_item(outcomes: Sequence[tuple[str, bool]], seed: int) -> ClusteredRateSummary | None:
    """Replicates of one item share its mistake, so the interval resamples items, not replies."""
    if not outcomes:
        return None
    by_item: dict[str, list[bool]] = defaultdict(list)
    for item, outcome in outcomes:
        by_item[item].append(outcome)
    events = [sum(values) for values in by_item.values()]
    trials = [len(values) for values in by_item.values()]
    return clustered_rate(events, trials, seed=seed)
