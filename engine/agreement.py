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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

__all__ = ("Agreement", "agreement", "cohen_kappa", "krippendorff_alpha", "label_entropy", "label_shares")


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


@dataclass(frozen=True)
class Agreement:
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
    """

    n: int
    accuracy: float | None
    kappa: float | None
    kappa_quadratic: float | None
    alpha_nominal: float | None
    alpha_ordinal: float | None
    macro_f1: float | None
    labels: tuple[str, ...]
    confusion: tuple[tuple[int, ...], ...]
    entropy_reference: float | None
    entropy_rater: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "accuracy": self.accuracy,
            "kappa": self.kappa,
            "kappa_quadratic": self.kappa_quadratic,
            "alpha_nominal": self.alpha_nominal,
            "alpha_ordinal": self.alpha_ordinal,
            "macro_f1": self.macro_f1,
            "labels": list(self.labels),
            "confusion": [list(row) for row in self.confusion],
            "entropy_reference": self.entropy_reference,
            "entropy_rater": self.entropy_rater,
        }


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
        return Agreement(0, None, None, None, None, None, None, labels, empty, None, None)
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
