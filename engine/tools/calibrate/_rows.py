"""Scoring one judge against the human labels: per dimension accuracy, Cohen's kappa (quadratic-weighted for
ordinal scales), Krippendorff's alpha, macro-F1 and the confusion matrix, exact and lenient, with intervals from
resampling whole conversations (see `engine.stats._agreement`); and the human label rates themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.core._records import Judgment
from engine.core._seeds import derive_seed
from engine.stats._agreement import agreement, agreement_intervals, judge_agreement, label_shares, voted_units
from engine.tools.calibrate._labels import Dimension, LabelMap, LabelSet, Reader

__all__ = ("Failure", "dimension_row", "human_rates", "judge_entry")

Failure = tuple[str, str, str]
"""A failed judgment: (example id, error type, message)."""


def judge_entry(
    label_set: LabelSet,
    name: str,
    outcomes: Sequence[list[Judgment] | None],
    failures: Sequence[Failure],
    *,
    models: Sequence[str],
    labels: Sequence[str],
    seed: int,
) -> dict[str, Any]:
    """One judge's part of the calibration result; `models` is empty for a deterministic judge."""
    rows = [
        dimension_row(label_set, dimension, reader, outcomes, seed=derive_seed(seed, name))
        for dimension in label_set.dimensions
        if (reader := label_set.readers[name].get(dimension.name)) is not None
    ]
    failed = sorted(failures)
    kinds: dict[str, dict[str, Any]] = {}
    for example_id, kind, message in failed:
        entry = kinds.setdefault(kind, {"count": 0, "first": f"{example_id}: {message}"})
        entry["count"] += 1
    judged = [
        (example.item.id, judgment)
        for example, found in zip(label_set.examples, outcomes, strict=True)
        for judgment in found or ()
    ]
    return {
        "judgments": len(label_set.examples),
        "errors": len(failed),
        "errors_by_kind": kinds,
        "error_examples": [f"{example_id}: {message}" for example_id, _, message in failed[:5]],
        "deterministic": not models,
        "models": list(models),
        "dimensions": rows,
        "judge_agreement": None
        if not models or len(labels) < 2
        else judge_agreement(
            voted_units(judged, len(labels)), labels, seed=derive_seed(seed, "judges", bits=32)
        ).model_dump(mode="json"),
    }


def human_rates(label_set: LabelSet) -> dict[str, Any]:
    """Per dimension and group (all groups pooled under "all"), the share of each human label, over every example."""
    found: dict[str, Any] = {}
    for dimension in label_set.dimensions:
        by_group: dict[str, list[str]] = {}
        for example in label_set.examples:
            label = example.labels.get(dimension.name)
            if label is not None:
                by_group.setdefault(example.group or "all", []).append(label)
        if not by_group:
            continue
        groups = {"all": [label for labels in by_group.values() for label in labels]} | dict(sorted(by_group.items()))
        found[dimension.name] = {
            group: {"n": len(labels), "shares": label_shares(labels, dimension.labels)}
            for group, labels in groups.items()
        }
    return found


def _interval_fields(exact: dict[str, Any], intervals: Mapping[str, Mapping[str, float | None]]) -> dict[str, Any]:
    return exact | {"intervals": {name: dict(bounds) for name, bounds in intervals.items()}}


def dimension_row(
    label_set: LabelSet,
    dimension: Dimension,
    reader: Reader,
    outcomes: Sequence[list[Judgment] | None],
    *,
    seed: int,
) -> dict[str, Any]:
    human: list[str | None] = []
    judged: list[str | None] = []
    clusters: list[str] = []
    groups: list[str] = []
    no_verdict = 0
    for example, judgments in zip(label_set.examples, outcomes, strict=True):
        label = example.labels.get(dimension.name)
        if label is None or judgments is None:
            continue
        verdict = reader(judgments)
        if verdict is None:
            no_verdict += 1
        human.append(label)
        judged.append(verdict)
        clusters.append(example.item.id)
        groups.append(example.group)
    exact = agreement(human, judged, dimension.labels, ordinal=dimension.ordinal)
    both = [i for i in range(len(human)) if human[i] in dimension.labels and judged[i] in dimension.labels]
    intervals = agreement_intervals(
        [str(human[i]) for i in both],
        [str(judged[i]) for i in both],
        dimension.labels,
        [clusters[i] for i in both],
        ordinal=dimension.ordinal,
        seed=derive_seed(seed, dimension.name, bits=32),
    )
    described = reader.describe() if isinstance(reader, LabelMap) else None
    row: dict[str, Any] = {
        "dimension": dimension.name,
        "ordinal": dimension.ordinal,
        "no_verdict": no_verdict,
        "map": described,
        "proxy": described["proxy"] if described else None,
        "exact": _interval_fields(exact.model_dump(mode="json"), intervals),
        "lenient": None,
        "by_group": _by_group(human, judged, groups, dimension),
    }
    if dimension.lenient:
        lenient = agreement(human, judged, dimension.labels, ordinal=False, collapse=dimension.lenient)
        order = list(dict.fromkeys(dimension.lenient.get(label, label) for label in dimension.labels))
        collapse = dimension.lenient
        lenient_intervals = agreement_intervals(
            [collapse.get(str(human[i]), str(human[i])) for i in both],
            [collapse.get(str(judged[i]), str(judged[i])) for i in both],
            order,
            [clusters[i] for i in both],
            ordinal=False,
            seed=derive_seed(seed, dimension.name, "lenient", bits=32),
        )
        row["lenient"] = _interval_fields(lenient.model_dump(mode="json"), lenient_intervals)
    return row


def _by_group(
    human: Sequence[str | None], judged: Sequence[str | None], groups: Sequence[str], dimension: Dimension
) -> list[dict[str, Any]]:
    """Per response author: units, accuracy, and the label shares of the humans and of the judge side by side."""
    rows = []
    for group in sorted(set(groups)):
        pairs = [
            (h, j)
            for h, j, g in zip(human, judged, groups, strict=True)
            if g == group and h in dimension.labels and j in dimension.labels
        ]
        if not pairs:
            continue
        rows.append(
            {
                "group": group,
                "n": len(pairs),
                "accuracy": sum(h == j for h, j in pairs) / len(pairs),
                "human": label_shares([h for h, _ in pairs if h is not None], dimension.labels),
                "judge": label_shares([j for _, j in pairs if j is not None], dimension.labels),
            }
        )
    return rows
