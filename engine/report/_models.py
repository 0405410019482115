"""A study of several tutors: the kind's own tables once per tutor, and the comparison every kind gets.

The engine knows no kind, so it never merges the tutors' records into one summary: it runs the kind's summariser
on each tutor's records (summary.json `models.by_model`), and draws the cross-tutor part from the per-episode
scores the kind already gives `simrun compare` (`EpisodeScores`; every numeric metric otherwise). A kind names the
metric its leaderboard ranks by with a `model_headline = (metric, "lower" | "higher")` attribute on its summariser.
A kind whose paper has one table with a row per model (a Human row shown once, a model × subject × dimension
table, a statistic correlated across models) builds it from the tutors' summaries (`ModelTables`), and may draw
each tutor's own section without what that table already shows (`tutor_blocks`). Units the kind's design plays
once for the whole study (`TutorFreeConditions`: records with no tutor label) are summarised once
(`models.shared`), and a kind that reads them says so with `SharedTables`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import fields, is_dataclass, replace
from typing import Any, Protocol, runtime_checkable

from markupsafe import Markup
from pydantic import BaseModel
from rich.console import RenderableType

from engine.core._format import format_estimate, format_fixed, format_interval
from engine.core._records import EpisodeRecord
from engine.core._text import word_count
from engine.report._blocks import (
    SIMRUN_ADDITION,
    Block,
    Forest,
    ForestPanel,
    Heatmap,
    Interval,
    Note,
    Section,
    Table,
    provenance_of,
)
from engine.report._console import console_blocks
from engine.report._html_blocks import html_blocks
from engine.report._markdown import markdown_blocks
from engine.report._sections import EpisodeScores, EpisodeVerdict, default_scores, default_verdict
from engine.report._summarizer import with_protocol
from engine.report._upgrade import upgrade_summary
from engine.stats._families import format_p
from engine.stats._models import (
    Headline,
    ModelScores,
    TutorAssociation,
    TutorComparison,
    TutorPair,
    compare_models,
)

__all__ = (
    "ModelTables",
    "ModelsView",
    "SharedTables",
    "headline_of",
    "model_results",
    "model_scores",
    "tutor_labels",
    "unit_key",
    "view_for",
)

UnitKey = tuple[str, tuple[tuple[str, str], ...], int]
MAX_HEATMAP_LEVELS = 24


@runtime_checkable
class ModelTables(Protocol):
    """A kind's own tables across the tutors of a study, built from each tutor's summary (label → its JSON)."""

    def model_tables(self, by_model: Mapping[str, Mapping[str, Any]], /) -> dict[str, Any]: ...

    def model_blocks(self, tables: Mapping[str, Any], /) -> list[Block]: ...


@runtime_checkable
class SharedTables(Protocol):
    """A kind whose study tables read the tutor-free units once: `tables` from `model_tables`, `shared` the kind's
    summary of the records no tutor played."""

    def with_shared(self, tables: Mapping[str, Any], shared: Mapping[str, Any], /) -> dict[str, Any]: ...


def unit_key(record: EpisodeRecord) -> UnitKey:
    """What pairs two tutors' episodes: the same item, condition and replicate."""
    return (record.item_id, tuple(sorted(record.condition.items())), record.replicate)


def tutor_labels(records: Sequence[EpisodeRecord], manifest: Mapping[str, Any]) -> list[str]:
    """The study's tutor labels in the scenario's order, those without a record too (records' labels outside it
    after them); [] when no record has a tutor label (a one-tutor run)."""
    declared = ((manifest.get("scenario") or {}).get("models") or {}).get("tutor")
    order = (
        [spec.get("label") or spec["model"].split("/", 1)[1] for spec in declared] if isinstance(declared, list) else []
    )
    seen = {r.tutor for r in records if r.tutor is not None}
    return order + sorted(seen - set(order)) if seen else []


def headline_of(summarizer: object, metrics: Sequence[str]) -> Headline:
    declared = getattr(summarizer, "model_headline", None)
    if isinstance(declared, tuple) and len(declared) == 2:
        return Headline(str(declared[0]), declared[1] == "lower")
    return Headline(metrics[0] if metrics else "none", False)


def _scores(summarizer: object, record: EpisodeRecord) -> dict[str, float]:
    found = summarizer.episode_scores(record) if isinstance(summarizer, EpisodeScores) else default_scores(record)
    return {name: float(value) for name, value in found.items() if not math.isnan(float(value))}


def _dump(found: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
    return found.model_dump(mode="json") if isinstance(found, BaseModel) else dict(found)


def model_scores(records: Sequence[EpisodeRecord], summarizer: Any, labels: Sequence[str]) -> ModelScores:
    """Each tutor's per-episode scores by unit (ok records only), with each unit's item and table cell."""
    scores: dict[str, dict[UnitKey, dict[str, float]]] = {label: {} for label in labels}
    words: dict[str, dict[UnitKey, float]] = {label: {} for label in labels}
    item_of: dict[UnitKey, str] = {}
    cell_of: dict[UnitKey, str] = {}
    for record in records:
        if record.status != "ok" or record.tutor not in scores:
            continue
        key = unit_key(record)
        scores[record.tutor][key] = _scores(summarizer, record)
        replies = [word_count(turn.text) for turn in record.turns if turn.role == "tutor"]
        if replies:
            words[record.tutor][key] = sum(replies) / len(replies)
        item_of[key] = record.item_id
        domain = str(record.meta.get("domain") or "")
        cell_of[key] = " · ".join([domain, *(v for _, v in key[1])]).strip(" ·") or "all"
    return ModelScores(tuple(labels), scores, item_of, cell_of, words)


def model_results(
    records: Sequence[EpisodeRecord], manifest: Mapping[str, Any], summarizer: Any, labels: Sequence[str]
) -> dict[str, Any]:
    """summary.json's `models`: each tutor's kind summary, how balanced the records are, and the comparison."""
    ordered = sorted(records, key=lambda r: r.id)  # the same tables however the records were gathered
    by_model = {
        label: _dump(summarizer.summarize([r for r in ordered if r.tutor == label], manifest)) for label in labels
    }
    data = model_scores(ordered, summarizer, labels)
    compared = compare_models(data, headline_of(summarizer, data.metrics), seed=int(manifest.get("seed") or 0))
    comparison = compared.as_json()
    comparison["by_level"] = _by_level(data.scores, compared.headline.metric, labels)
    counts = manifest.get("counts") or {}
    free = int(counts.get("tutor_free") or 0)
    planned = (int(counts.get("planned") or 0) - free) // max(1, len(labels))
    balance = {
        label: {
            "planned": planned,
            "ok": sum(1 for r in records if r.tutor == label and r.status == "ok"),
            "error": sum(1 for r in records if r.tutor == label and r.status == "error"),
        }
        for label in labels
    }
    found = {"labels": list(labels), "by_model": by_model, "balance": balance, "comparison": comparison}
    unplayed = [r for r in ordered if r.tutor is None]
    shared = _dump(summarizer.summarize(unplayed, manifest)) if unplayed and labels else None
    if shared is not None:
        found["shared"] = shared
    if isinstance(summarizer, ModelTables):
        tables = summarizer.model_tables(by_model)
        if shared is not None and isinstance(summarizer, SharedTables):
            tables = summarizer.with_shared(tables, shared)
        found["tables"] = tables
    return found


def _by_level(
    scores: Mapping[str, Mapping[UnitKey, Mapping[str, float]]], metric: str, labels: Sequence[str]
) -> dict[str, dict[str, dict[str, float | None]]]:
    """factor → level → tutor → mean headline over the units every tutor has (a heatmap's numbers)."""
    common = set.intersection(*(set(scores[label]) for label in labels)) if labels else set()
    found: dict[str, dict[str, dict[str, list[float]]]] = {}
    for key in sorted(common):  # a fixed order, so the means repeat to the last digit
        for factor, level in key[1]:
            for label in labels:
                value = scores[label][key].get(metric)
                if value is not None:
                    found.setdefault(factor, {}).setdefault(level, {}).setdefault(label, []).append(value)
    return {
        factor: {
            level: {label: (sum(v) / len(v) if (v := per.get(label)) else None) for label in labels}
            for level, per in sorted(levels.items())
        }
        for factor, levels in sorted(found.items())
        if 1 < len(levels) <= MAX_HEATMAP_LEVELS
    }


def _num(value: float | None) -> str:
    return format_fixed(value, 3)


def _leaderboard(comparison: TutorComparison, balance: Mapping[str, Any]) -> list[Block]:
    head = comparison.headline
    better = "lower" if head.lower_is_better else "higher"
    rows = []
    for row in comparison.leaderboard:
        rank = str(row.rank_low) if row.rank_low == row.rank_high else f"{row.rank_low}-{row.rank_high}"
        tied = ", ".join(row.tied_with) or "–"
        rows.append((rank, row.model, _num(row.mean), format_interval(row.ci_low, row.ci_high, 3), tied))
    table = Table(
        ("rank", "tutor", head.metric, "95% CI", "tied with"),
        tuple(rows),
        title=f"Leaderboard: {head.metric} ({better} is better)",
        left=("tutor", "tied with"),
    )
    counts = ", ".join(f"{label} {b['ok']}/{b['planned']}" for label, b in balance.items())
    units = comparison.complete_units
    note = (
        f"Rank intervals: 95% from a bootstrap over items on the {units} units every tutor played; tutors whose "
        f"intervals overlap are tied. Episodes ok per tutor: {counts}."
    )
    blocks: list[Block] = [table, Note(note, console=True)]
    found = comparison.length_vs_headline
    if found:
        blocks.append(
            Note(
                f"Across the {found.tutors} tutors, Spearman's ρ between mean reply length (words) and "
                f"{head.metric}: {_rho_interval(found)}{_readable(found)}.",
                console=True,
            )
        )
    return blocks


def _readable(found: TutorAssociation) -> str:
    """The exact permutation p over the tutors, and whether so few tutors can give a significant ρ at all."""
    if found.p is None:
        return ""
    said = f"; exact permutation p over the tutors {format_p(found.p)}"
    if not found.readable:
        said += (
            f", and {format_p(found.min_p)} is the smallest p {found.tutors} tutors can give, so this ρ cannot "
            "be read as evidence either way"
        )
    return said


def _rho_interval(found: TutorAssociation) -> str:
    """ρ with its interval; a zero-width one (every resample ranked the few tutors alike) is said in words,
    since "+1.00 [+1.00, +1.00]" reads as a certainty the handful of tutors cannot give."""
    rho, low, high = found.rho, found.low, found.high
    if low is None or high is None:
        return format_fixed(rho, signed=True)
    if high - low < 0.005:
        shown = format_fixed(rho, signed=True)
        return f"{shown}, the same in every bootstrap resample over items (no spread to show an interval)"
    return f"{format_estimate(rho, low, high, signed=True)} (95%, bootstrap over items)"


def typed_comparison(found: Mapping[str, Any]) -> TutorComparison:
    """summary.json's `comparison` as the type `compare_models` returned; `by_level` is the report's own."""
    return TutorComparison.model_validate({key: value for key, value in found.items() if key != "by_level"})


def _pairs(comparison: TutorComparison, *, findings_only: bool = False) -> list[TutorPair]:
    return [row for row in comparison.pairs if row.finding or not findings_only]


def _pairs_table(comparison: TutorComparison, *, findings_only: bool = False) -> Table:
    rows = []
    findings: list[bool] = []
    for row in _pairs(comparison, findings_only=findings_only):
        if row.status != "ok":
            continue
        diff = format_fixed(row.mean_diff, 3, signed=True)
        interval = format_interval(row.mean_low, row.mean_high, 3, signed=True)
        effect = format_fixed(row.r, signed=True)
        verdict = "finding" if row.finding else ("gated" if row.gated else "–")
        rows.append((row.metric, f"{row.a} − {row.b}", diff, interval, effect, format_p(row.p_family), verdict))
        findings.append(row.finding)
    family = comparison.family
    return Table(
        ("metric", "pair", "mean diff", "95% CI", "r", "p (BH)", "verdict"),
        tuple(rows),
        title="Pairwise differences (paired on units)",
        caption=(
            f"Wilcoxon signed-rank per pair, rank-biserial r; Benjamini–Hochberg over all {family.size} pairs × "
            f"metrics at q = {family.q}; a pair whose metric's omnibus test does not pass is gated. "
            f"{family.findings} findings."
        ),
        findings=tuple(findings),
        decided_by="p (BH)",
        console_columns=("metric", "pair", "mean diff", "p (BH)", "verdict"),
        left=("pair", "verdict"),
    )


def _omnibus_table(comparison: TutorComparison) -> Table:
    rows = tuple(
        (row.metric, row.test or "–", row.n, format_fixed(row.statistic), format_p(row.p), format_p(row.p_family))
        for row in comparison.omnibus
    )
    return Table(
        ("metric", "test", "units", "χ²", "p", "p (BH)"),
        rows,
        title="Omnibus test per metric",
        caption="Friedman over the tutors on complete units (Cochran's Q, the same χ², for 0/1 metrics).",
        console_columns=(),
    )


def _cells_table(comparison: TutorComparison) -> Table:
    rows = tuple(
        (f"{row.a} → {row.b}", row.cells, row.b_worse, row.b_better, format_p(row.p)) for row in comparison.cells
    )
    head = comparison.headline.metric
    return Table(
        ("A → B", "cells", "B worse", "B better", "sign test p"),
        rows,
        title=f"Cell by cell ({head})",
        caption="Cells are subject × condition; a sign test over the cells where the two tutors differ.",
        console_columns=(),
    )


def _forest(comparison: TutorComparison) -> list[Block]:
    findings = _pairs(comparison, findings_only=True)
    if not findings:
        return [Note("No pairwise difference between tutors is a finding after the family correction.", console=True)]
    panels = []
    for metric in dict.fromkeys(row.metric for row in findings):
        shown = [r for r in findings if r.metric == metric]
        intervals = tuple(Interval(f"{r.a} − {r.b}", r.mean_diff, r.mean_low, r.mean_high, True) for r in shown)
        panels.append(ForestPanel(metric, intervals))
    numbers = replace(_pairs_table(comparison, findings_only=True), console_columns=())
    return [
        Forest(
            tuple(panels),
            numbers,
            key="model-findings",
            caption="Pairwise differences that are findings, with 95% bootstrap intervals of the mean difference.",
            xlabel="mean difference (A − B)",
        )
    ]


def _heatmaps(comparison: TutorComparison, by_level: Mapping[str, Any]) -> list[Block]:
    head = comparison.headline.metric
    labels = comparison.labels
    blocks: list[Block] = []
    for factor, levels in by_level.items():
        names = tuple(levels)
        values = tuple(tuple(levels[level][label] for level in names) for label in labels)
        numbers = Table(
            ("tutor", *names),
            tuple((label, *(_num(v) for v in row)) for label, row in zip(labels, values, strict=True)),
            title=f"{head} by tutor × {factor}",
            console_columns=(),
        )
        blocks.append(
            Heatmap(
                tuple(labels),
                names,
                values,
                (numbers,),
                key=f"model-{factor}",
                caption=f"Mean {head} per tutor and {factor}, on the units every tutor played.",
                xlabel=factor,
                ylabel="tutor",
                colorbar=head,
                cells=tuple(tuple(_num(v) for v in row) for row in values),
                cmap="Reds" if comparison.headline.lower_is_better else "Blues",
            )
        )
    return blocks


def _keyed(block: Any, label: str) -> Any:
    """A tutor's copy of a kind's block, its HTML ids (and those of the blocks inside it) made the tutor's own."""
    if not is_dataclass(block) or isinstance(block, type):
        return block
    changes: dict[str, Any] = {}
    for part in fields(block):
        value = getattr(block, part.name)
        if part.name == "key" and isinstance(value, str) and value:
            changes["key"] = f"{label}-{value}"
        elif is_dataclass(value):
            changes[part.name] = _keyed(value, label)
        elif isinstance(value, tuple) and any(is_dataclass(v) for v in value):
            changes[part.name] = tuple(_keyed(v, label) for v in value)
    return replace(block, **changes) if changes else block


_COMPARED = (
    "the papers' one row per model, compared: the rank intervals, omnibus and paired tests and cell counts are "
    + SIMRUN_ADDITION
)
_TABLES = "the papers' tables with a row or column per model, each built from the tutors' own tables below"
_OWN = "this tutor's own tables, each section naming the paper's table it reproduces"


class ModelsView:
    """The kind's summariser seen through a study of several tutors: the comparison first, then each tutor's
    own tables; episode verdicts and scores stay the kind's."""

    def __init__(self, summarizer: Any) -> None:
        self.kind = summarizer

    def blocks(self, summary: Mapping[str, Any]) -> list[Block]:
        summary = upgrade_summary(summary)  # a study written before the typed contrast rows reads the same
        models = summary["models"]
        found = models["comparison"]
        comparison = typed_comparison(found)
        head = comparison.headline.metric
        compared = Section(
            "Tutors compared",
            (
                Section("Leaderboard", tuple(_leaderboard(comparison, models["balance"])), key="leaderboard"),
                Section(
                    f"{head} by tutor", tuple(_heatmaps(comparison, found.get("by_level", {}))), key="model-heatmaps"
                ),
                Section(
                    "Differences between tutors",
                    (_omnibus_table(comparison), _pairs_table(comparison), *_forest(comparison)),
                    key="model-pairs",
                ),
                Section("Cell by cell", (_cells_table(comparison),), key="model-cells"),
            ),
            key="models",
            provenance=_COMPARED,
        )
        kind_tables = (
            [
                Section(
                    "The papers' tables, a row per tutor",
                    tuple(self.kind.model_blocks(tables)),
                    key="model-tables",
                    provenance=_TABLES,
                )
            ]
            if isinstance(self.kind, ModelTables) and (tables := models.get("tables")) is not None
            else []
        )
        return [compared, *kind_tables, *(self._tutor(summary, label) for label in models["labels"])]

    def _tutor(self, summary: Mapping[str, Any], label: str) -> Section:
        own = {"run": summary.get("run"), **summary["models"]["by_model"][label]}
        heading = Note(f"── tutor {label} ──", console=True)
        if hasattr(self.kind, "blocks") and hasattr(self.kind, "read"):
            draw = self.kind.tutor_blocks if hasattr(self.kind, "tutor_blocks") else self.kind.blocks
            own_blocks = (_keyed(block, label) for block in draw(self.kind.read(own)))
            return Section(f"Tutor {label}", (heading, *own_blocks), key=f"tutor-{label}", provenance=_OWN)
        own_text = Note(self.kind.render_markdown(own))
        return Section(f"Tutor {label}", (heading, own_text), key=f"tutor-{label}", provenance=_OWN)

    def provenance(self, summary: Mapping[str, Any], /) -> list[dict[str, str]]:
        return provenance_of(self.blocks(summary))

    def render_markdown(self, summary: Mapping[str, Any], /) -> str:
        return markdown_blocks(self.blocks(summary))

    def render_console(self, summary: Mapping[str, Any], /) -> RenderableType:
        return with_protocol(summary, console_blocks(self.blocks(summary)))

    def render_html(self, summary: Mapping[str, Any], /) -> Markup:
        return html_blocks(self.blocks(summary))

    def episode_verdict(self, record: EpisodeRecord, /) -> str:
        if isinstance(self.kind, EpisodeVerdict):
            return (
                f"{record.tutor}: {self.kind.episode_verdict(record)}"
                if record.tutor
                else self.kind.episode_verdict(record)
            )
        return default_verdict(record)


def view_for(summary: Mapping[str, Any], summarizer: Any) -> Any:
    """The summariser that renders `summary`: the kind's own, or the tutors' view of it in a study of several."""
    return ModelsView(summarizer) if isinstance(summary.get("models"), Mapping) else summarizer
