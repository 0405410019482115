"""Agreement between two raters on labelled units: exact match, Cohen's kappa, Krippendorff's alpha, entropy.

The formulas are scikit-learn's (`cohen_kappa_score`, `confusion_matrix`, `f1_score`), the `krippendorff`
package's and scipy's (`entropy`); this module only decides which units enter (both raters gave a label in
the dimension's label set), how the label order makes a scale ordinal, and when a statistic is undefined
(reported as None rather than a NaN and a warning): kappa when chance agreement is total, alpha when only
one value occurs at all. sklearn is imported on first use, so `import engine` stays cheap.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from engine.core._lazy import lazy_module
from engine.stats._agreement_rows import AgreementEstimate, JudgeAgreement, MetricAgreement, PairKappa

if TYPE_CHECKING:
    import numpy as np
    from scipy import stats
else:
    np = lazy_module("numpy")
    stats = lazy_module("scipy.stats")


__all__ = (
    "Agreement",
    "AgreementBounds",
    "AgreementEstimate",
    "JudgeAgreement",
    "MetricAgreement",
    "PairKappa",
    "VotedUnit",
    "agreement",
    "agreement_intervals",
    "cohen_kappa",
    "confusion_statistics",
    "judge_agreement",
    "krippendorff_alpha",
    "label_entropy",
    "label_shares",
    "spec_labels",
    "voted_units",
)


def label_entropy(labels: Sequence[str]) -> float | None:
    """Shannon entropy (natural log, as in ReMath's tables) of the label distribution; None when empty."""
    if not labels:
        return None
    counts = np.array(list(Counter(labels).values()), dtype=float)
    return float(stats.entropy(counts))


def label_shares(labels: Sequence[str], order: Sequence[str]) -> dict[str, float]:
    """Share of each label of `order` (labels outside it are not counted in the denominator either)."""
    kept = [label for label in labels if label in order]
    counts = Counter(kept)
    return {label: (counts[label] / len(kept) if kept else 0.0) for label in order}


def cohen_kappa(
    a: Sequence[str], b: Sequence[str], order: Sequence[str], *, weights: str | None = None
) -> float | None:
    """Cohen's kappa of two raters over the same units; `weights` "linear"/"quadratic" use the order of `order`."""
    if len(a) != len(b):
        raise ValueError(f"paired labels must have equal lengths, got {len(a)} and {len(b)}")
    if not a:
        return None
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an undefined kappa (total chance agreement) is reported as None
        value = float(cohen_kappa_score(a, b, labels=list(order), weights=weights))
    return value if math.isfinite(value) else None


def krippendorff_alpha(
    a: Sequence[str], b: Sequence[str], order: Sequence[str], *, level: Literal["nominal", "ordinal"]
) -> float | None:
    """Krippendorff's alpha of two raters, `level` "nominal" or "ordinal" (ranks follow `order`)."""
    if len(a) != len(b):
        raise ValueError(f"paired labels must have equal lengths, got {len(a)} and {len(b)}")
    if len({*a, *b}) < 2:
        return None  # one value only: no disagreement is possible and alpha is undefined
    import krippendorff

    index = {label: i for i, label in enumerate(order)}
    data = np.array([[index[x] for x in a], [index[x] for x in b]], dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = float(
            krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=list(range(len(order))))
        )
    return value if math.isfinite(value) else None


class AgreementBounds(BaseModel):
    """A statistic's interval (cluster bootstrap over items)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    low: float | None
    high: float | None


class Agreement(BaseModel):
    """How one rater (a judge, a model) agrees with a reference rater (humans) on one dimension.

    Attributes:
        n: Units both raters labelled within the label set.
        accuracy: Share of exact matches.
        kappa: Cohen's kappa (unweighted).
        kappa_quadratic: Quadratically weighted kappa (ordinal scales only).
        alpha_nominal: Krippendorff's alpha, nominal metric.
        alpha_ordinal: Krippendorff's alpha, ordinal metric (ordinal scales only).
        macro_f1: F1 averaged over the labels either rater used.
        labels: The label order of `confusion` (rows: reference, columns: rater).
        confusion: Counts, reference label × rater label.
        entropy_reference / entropy_rater: Label entropy of each rater (diversity of the labels it uses).
        intervals: Per statistic, its interval when the caller computed one (`simrun calibrate`), else empty.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    n: int
    accuracy: float | None = None
    kappa: float | None = None
    kappa_quadratic: float | None = None
    alpha_nominal: float | None = None
    alpha_ordinal: float | None = None
    macro_f1: float | None = None
    labels: tuple[str, ...]
    confusion: tuple[tuple[int, ...], ...]
    entropy_reference: float | None = None
    entropy_rater: float | None = None

    intervals: dict[str, AgreementBounds] = {}

    def value(self, name: str) -> float | None:
        """A statistic by name, as a float (None when it could not be computed)."""
        found = getattr(self, name)
        assert found is None or isinstance(found, float | int)
        return None if found is None else float(found)


def agreement(
    reference: Sequence[str | None],
    rater: Sequence[str | None],
    order: Sequence[str],
    *,
    ordinal: bool = False,
    collapse: Mapping[str, str] | None = None,
) -> Agreement:
    """Agreement over the units where both labels are in `order` (after `collapse`, e.g. lenient Yes/partly).

    `order` lists the labels; for an ordinal scale from lowest to highest. With `collapse`, labels are first
    mapped (unmapped ones kept) and the order becomes the collapsed labels in their first-seen order.
    """
    if len(reference) != len(rater):
        raise ValueError(f"paired labels must have equal lengths, got {len(reference)} and {len(rater)}")
    if collapse:
        order = list(dict.fromkeys(collapse.get(label, label) for label in order))
        reference = [None if x is None else collapse.get(x, x) for x in reference]
        rater = [None if x is None else collapse.get(x, x) for x in rater]
    known = set(order)
    pairs = [(h, j) for h, j in zip(reference, rater, strict=True) if h in known and j in known]
    a = [h for h, _ in pairs if h is not None]
    b = [j for _, j in pairs if j is not None]
    labels = tuple(order)
    if not pairs:
        empty = tuple(tuple(0 for _ in labels) for _ in labels)
        return Agreement(n=0, labels=labels, confusion=empty)
    from sklearn.metrics import confusion_matrix, f1_score

    matrix = confusion_matrix(a, b, labels=list(labels))
    used = sorted({*a, *b}, key=labels.index)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f1 = float(f1_score(a, b, labels=used, average="macro", zero_division=0))
    return Agreement(
        n=len(pairs),
        accuracy=sum(x == y for x, y in pairs) / len(pairs),
        kappa=cohen_kappa(a, b, labels),
        kappa_quadratic=cohen_kappa(a, b, labels, weights="quadratic") if ordinal else None,
        alpha_nominal=krippendorff_alpha(a, b, labels, level="nominal"),
        alpha_ordinal=krippendorff_alpha(a, b, labels, level="ordinal") if ordinal else None,
        macro_f1=f1,
        labels=labels,
        confusion=tuple(tuple(int(v) for v in row) for row in matrix),
        entropy_reference=label_entropy(a),
        entropy_rater=label_entropy(b),
    )


# ------------------------------------------------------------------------------- agreement between judge models

_Value = bool | int | float | str


@dataclass(frozen=True)
class VotedUnit:
    """One judged unit (a reply, a conversation) with each judge spec's vote; `cluster` groups correlated units."""

    cluster: str
    metric: str
    votes: tuple[_Value | None, ...]
    """Indexed by judge spec; None where that spec did not vote."""


def spec_labels(specs: Sequence[Mapping[str, Any] | str]) -> list[str]:
    """Readable, distinct names for judge specs: the model, with its settings where two share a model."""
    models = [s if isinstance(s, str) else str(s.get("model", "?")) for s in specs]
    labels = []
    for index, (spec, model) in enumerate(zip(specs, models, strict=True)):
        label = model
        if models.count(model) > 1:
            params = {} if isinstance(spec, str) else dict(spec.get("params") or {})
            shown = ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
            label = f"{model} #{index + 1}" + (f" ({shown})" if shown else "")
        labels.append(label)
    return labels


def voted_units(judgments: Iterable[tuple[str, Any]], specs: int) -> list[VotedUnit]:
    """Units from `(cluster, Judgment)` pairs: vote `i` came from spec `i % specs` (judges are asked in turn).

    A spec that voted several times on one unit is represented by its first vote. Judgments whose votes are
    not plain values (e.g. dicts) or that have fewer than two votes are skipped.
    """
    units = []
    for cluster, judgment in judgments:
        votes = list(judgment.votes)
        if len(votes) < 2 or not all(v is None or isinstance(v, bool | int | float | str) for v in votes):
            continue
        by_spec: list[_Value | None] = [None] * specs
        for index, vote in enumerate(votes):
            if by_spec[index % specs] is None:
                by_spec[index % specs] = vote
        units.append(VotedUnit(cluster, f"{judgment.judge}.{judgment.metric}", tuple(by_spec)))
    return units


def judge_agreement(
    units: Sequence[VotedUnit],
    judges: Sequence[str],
    *,
    seed: int,
    confidence: float = 0.95,
    n_resamples: int = 2_000,
    pairwise: bool = True,
) -> JudgeAgreement:
    """Agreement between judge specs per metric: Krippendorff's alpha over every spec's vote, pairwise Cohen's kappa.

    Judges are the coders and judged units the units. Booleans and strings are nominal categories; integers
    are nominal when a negative code occurs (−1 codes "not applicable"), else an ordered scale (clarity 1–5):
    ordinal alpha and quadratic-weighted kappa on the ranks; floats are interval, with quadratic kappa. Intervals
    resample whole clusters (a dialogue's replies together), percentile method, from one bootstrap per metric.
    Where only one value occurs, or one judge's votes never vary, alpha (and that judge's kappas) are not
    estimable: None with a `note`, never 1.0 — agreement with a constant says nothing about agreement.
    """
    if len(judges) < 2:
        note = "fewer than two judge specs vote: agreement between judges is not measured"
        return JudgeAgreement(judges=tuple(judges), metrics=(), confidence=confidence, note=note)
    by_metric: dict[str, list[VotedUnit]] = {}
    for unit in units:
        by_metric.setdefault(unit.metric, []).append(unit)
    rows = (
        _metric_agreement(metric, group, list(judges), seed, confidence, n_resamples, pairwise)
        for metric, group in sorted(by_metric.items())
    )
    return JudgeAgreement(judges=tuple(judges), metrics=tuple(r for r in rows if r is not None), confidence=confidence)


def _metric_agreement(
    metric: str,
    units: Sequence[VotedUnit],
    judges: list[str],
    seed: int,
    confidence: float,
    n_resamples: int,
    pairwise: bool,
) -> MetricAgreement | None:
    present = [u for u in units if sum(v is not None for v in u.votes) >= 2]
    if not present:
        return None
    values, level = _scale(present)
    index = {v: i for i, v in enumerate(values)}
    codes = np.array([[index[v] if v is not None else -1 for v in u.votes] for u in present], dtype=int)
    clusters = sorted({u.cluster for u in present})
    where = {c: i for i, c in enumerate(clusters)}
    cluster_of = np.array([where[u.cluster] for u in present])
    pairs = [(a, b) for a in range(len(judges)) for b in range(a + 1, len(judges))] if pairwise else []
    coincidence, confusion = _cluster_matrices(codes, cluster_of, len(clusters), pairs, len(values))
    numeric = np.array([float(v) for v in values]) if level == "interval" else None
    delta = _delta(len(values), numeric)
    if level == "ordinal":
        delta = np.subtract.outer(np.arange(len(values)), np.arange(len(values))).astype(float) ** 2

    def statistics_of(o: np.ndarray, c: np.ndarray) -> np.ndarray:
        """[alpha, kappa per pair] from summed matrices; o: (..., V, V), c: (P, ..., V, V)."""
        alpha = _alpha_ordinal(o) if level == "ordinal" else _alpha_from_coincidence(o, delta)
        kappas = [_kappa_from_confusion(c[p], delta) for p in range(len(pairs))]
        return np.stack([alpha, *kappas])

    point = statistics_of(coincidence.sum(axis=0), confusion.sum(axis=1))
    low, high = _cluster_interval(point, coincidence, confusion, statistics_of, n_resamples, confidence, seed)
    votes_per_judge = [int(np.sum(codes[:, j] >= 0)) for j in range(len(judges))]
    constant = [j for j in range(len(judges)) if len(set(codes[:, j][codes[:, j] >= 0].tolist())) == 1]
    point, low, high = (_not_estimable(x, constant, pairs) for x in (point, low, high))
    note = f"not estimable: {', '.join(judges[j] for j in constant)} never varied" if constant else None
    return MetricAgreement(
        metric=metric,
        level=level,
        units=len(present),
        clusters=len(clusters),
        votes_per_judge=dict(zip(judges, votes_per_judge, strict=True)),
        alpha=AgreementEstimate(value=_number(point[0]), low=_number(low[0]), high=_number(high[0])),
        kappa=tuple(
            PairKappa(
                judges=(judges[a], judges[b]),
                weights="quadratic" if level != "nominal" else None,
                n=int(confusion[p].sum()),
                value=_number(point[p + 1]),
                low=_number(low[p + 1]),
                high=_number(high[p + 1]),
            )
            for p, (a, b) in enumerate(pairs)
        ),
        note=note,
    )


def _not_estimable(values: np.ndarray, constant: Sequence[int], pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """[alpha, kappa per pair] with NaN (reported as None) where a judge that never varied takes part: alpha,
    and every kappa of that judge. Agreement with a constant says nothing, so it is not 1.0."""
    if not constant:
        return values
    flat = np.array([True] + [a in constant or b in constant for a, b in pairs])
    return np.where(flat, np.nan, values)


def _cluster_interval(
    point: np.ndarray,
    coincidence: np.ndarray,
    confusion: np.ndarray,
    statistics_of: Callable[[np.ndarray, np.ndarray], np.ndarray],
    n_resamples: int,
    confidence: float,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bounds of every statistic from one bootstrap over clusters (NaN where nothing can vary)."""
    clusters = coincidence.shape[0]
    if clusters < 2 or not np.isfinite(point).any():
        return np.full(point.shape, np.nan), np.full(point.shape, np.nan)

    def resampled(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        chosen = idx.astype(int)  # (batch, clusters)
        o = coincidence[chosen].sum(axis=-3)
        c = confusion[:, chosen].sum(axis=-3)
        return statistics_of(o, c)

    boot = _resample_clusters(clusters, resampled, n_resamples, confidence, seed, batch=500)
    return np.asarray(boot.confidence_interval.low, dtype=float), np.asarray(boot.confidence_interval.high, dtype=float)


def _scale(units: Sequence[VotedUnit]) -> tuple[list[_Value], Literal["interval", "ordinal", "nominal"]]:
    """The values voted, in order, and their scale: interval (floats), ordinal (non-negative integers, e.g. a
    1–5 rating) or nominal (booleans, strings, integers with a negative "not applicable" code)."""
    values = sorted({v for u in units for v in u.votes if v is not None}, key=lambda v: (str(type(v)), v))
    interval = all(isinstance(v, float) for v in values) or (
        any(isinstance(v, float) for v in values)
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    )
    if interval:
        return values, "interval"
    ordinal = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)
    return values, "ordinal" if ordinal else "nominal"


def _cluster_matrices(
    codes: np.ndarray, cluster_of: np.ndarray, clusters: int, pairs: Sequence[tuple[int, int]], size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster coincidence matrices (alpha) and per-pair confusion matrices (kappa), to be summed over
    the clusters a resample draws."""
    coincidence = np.zeros((clusters, size, size))
    confusion = np.zeros((len(pairs), clusters, size, size))
    for row, cluster in zip(codes, cluster_of, strict=True):
        coded = row[row >= 0]
        m = len(coded)
        if m >= 2:
            for i in range(m):
                for j in range(m):
                    if i != j:
                        coincidence[cluster, coded[i], coded[j]] += 1 / (m - 1)
        for p, (a, b) in enumerate(pairs):
            if row[a] >= 0 and row[b] >= 0:
                confusion[p, cluster, row[a], row[b]] += 1
    return coincidence, confusion


def _number(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _resample_clusters(
    clusters: int, statistic: Any, n_resamples: int, confidence: float, seed: int, *, batch: int
) -> Any:
    """scipy's percentile bootstrap over cluster indices: `statistic(indices)` pools the chosen clusters'
    counts, so units of one conversation or episode are resampled together. Degenerate resamples (a κ with no
    variation) give NaN, which the callers treat as no interval, so scipy's warnings about them are silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return stats.bootstrap(
            (np.arange(clusters, dtype=float),),
            statistic,
            vectorized=True,
            n_resamples=n_resamples,
            batch=batch,
            confidence_level=confidence,
            method="percentile",
            random_state=np.random.default_rng(seed),
        )


def _delta(size: int, numeric: np.ndarray | None) -> np.ndarray:
    """Squared distance between category i and j: 0/1 for nominal, (v_i − v_j)² for interval values."""
    if numeric is None:
        return 1.0 - np.eye(size)
    return np.asarray(np.subtract.outer(numeric, numeric) ** 2, dtype=float)


def _alpha_from_coincidence(o: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Krippendorff's alpha = 1 − (n − 1) Σ o_ck δ_ck / Σ n_c n_k δ_ck (the `krippendorff` package's formula)."""
    marginal = o.sum(axis=-1)
    n = marginal.sum(axis=-1)
    observed = (o * delta).sum(axis=(-2, -1))
    expected = np.einsum("...c,...k,ck->...", marginal, marginal, delta)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = 1.0 - (n - 1) * observed / expected
    return np.where(expected > 0, value, np.nan)


def _kappa_from_confusion(c: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Cohen's kappa from a confusion matrix, weighted by `delta` (0/1 weights: the unweighted kappa)."""
    n = c.sum(axis=(-2, -1))
    rows, columns = c.sum(axis=-1), c.sum(axis=-2)
    observed = (c * delta).sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.einsum("...c,...k,ck->...", rows, columns, delta) / n
        value = 1.0 - observed / expected
    return np.where(expected > 0, value, np.nan)


# ------------------------------------------------------------------------- intervals for rater-vs-reference agreement


def agreement_intervals(
    reference: Sequence[str],
    rater: Sequence[str],
    order: Sequence[str],
    clusters: Sequence[str],
    *,
    ordinal: bool,
    seed: int,
    confidence: float = 0.95,
    n_resamples: int = 2_000,
) -> dict[str, dict[str, float | None]]:
    """Percentile cluster-bootstrap intervals of accuracy, kappa (and quadratic kappa), alpha (nominal, ordinal).

    Pairs are the units both raters labelled within `order`; `clusters[i]` groups correlated pairs (several
    responses to one conversation), and whole clusters are resampled. Every statistic is recomputed on each
    resample from the summed confusion matrix (the formulas sklearn and `krippendorff` use; the point values
    are those of `agreement`). A statistic undefined on a resample (one label only) leaves its interval None
    when that happens in more than 1% of resamples.
    """
    names = ["accuracy", "kappa", "kappa_quadratic", "alpha_nominal", "alpha_ordinal"]
    empty: dict[str, dict[str, float | None]] = {name: {"low": None, "high": None} for name in names}
    if len(reference) != len(rater) or len(reference) != len(clusters):
        raise ValueError("reference, rater and clusters need one entry per pair")
    index = {label: i for i, label in enumerate(order)}
    keep = [i for i in range(len(reference)) if reference[i] in index and rater[i] in index]
    groups = sorted({clusters[i] for i in keep})
    if len(groups) < 2:
        return empty
    where = {c: g for g, c in enumerate(groups)}
    size = len(order)
    confusion = np.zeros((len(groups), size, size))
    for i in keep:
        confusion[where[clusters[i]], index[reference[i]], index[rater[i]]] += 1

    def resampled(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        return confusion_statistics(confusion[idx.astype(int)].sum(axis=-3))

    boot = _resample_clusters(len(groups), resampled, n_resamples, confidence, seed, batch=1_000)
    distribution = np.asarray(boot.bootstrap_distribution)
    alpha = (1 - confidence) / 2
    found: dict[str, dict[str, float | None]] = {}
    for k, name in enumerate(names):
        values = distribution[k]
        finite = values[np.isfinite(values)]
        scale_only = name in ("kappa_quadratic", "alpha_ordinal")
        if (scale_only and not ordinal) or len(finite) < 0.99 * len(values):
            found[name] = {"low": None, "high": None}
        else:
            low, high = np.quantile(finite, [alpha, 1 - alpha])
            found[name] = {"low": float(low), "high": float(high)}
    return found


def confusion_statistics(c: np.ndarray) -> np.ndarray:
    """[accuracy, kappa, quadratic kappa, nominal alpha, ordinal alpha] of confusion matrices `c` (..., V, V)."""
    size = c.shape[-1]
    nominal = 1.0 - np.eye(size)
    quadratic = np.subtract.outer(np.arange(size), np.arange(size)).astype(float) ** 2
    n = c.sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        accuracy = np.trace(c, axis1=-2, axis2=-1) / n
    coincidence = c + np.swapaxes(c, -1, -2)
    return np.stack(
        [
            accuracy,
            _kappa_from_confusion(c, nominal),
            _kappa_from_confusion(c, quadratic),
            _alpha_from_coincidence(coincidence, nominal),
            _alpha_ordinal(coincidence),
        ]
    )


def _alpha_ordinal(o: np.ndarray) -> np.ndarray:
    """Ordinal alpha: δ_ck = (Σ_{g=c..k} n_g − (n_c + n_k)/2)², from each resample's own marginals."""
    marginal = o.sum(axis=-1)
    cumulative = np.cumsum(marginal, axis=-1)
    size = o.shape[-1]
    c, k = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    low, high = np.minimum(c, k), np.maximum(c, k)
    before = np.where(low > 0, np.take(cumulative, np.maximum(low - 1, 0), axis=-1), 0.0)
    between = np.take(cumulative, high, axis=-1) - before
    delta = (between - (np.take(marginal, c, axis=-1) + np.take(marginal, k, axis=-1)) / 2) ** 2
    n = marginal.sum(axis=-1)
    observed = (o * delta).sum(axis=(-2, -1))
    expected = np.einsum("...c,...k,...ck->...", marginal, marginal, delta)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = 1.0 - (n - 1) * observed / expected
    return np.asarray(np.where(expected > 0, value, np.nan))
