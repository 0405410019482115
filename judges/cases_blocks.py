"""What the `cases` report shows, once for report.md, the terminal and report.html: success, criteria, MCQ
against chance, reference gain, de-escalation and diversity.

Every plot is followed by the table of the numbers it draws. Intervals are the summary's: resampling cases
for rates, bootstrap for r.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine import (
    MEANINGFUL_R,
    SIMRUN_ADDITION,
    Block,
    BlockCell,
    ClusteredRateSummary,
    Dot,
    DotPanel,
    Dots,
    DotSeries,
    Note,
    Section,
    Table,
    family_caption,
    format_effect,
    format_fixed,
    format_p,
    format_pct,
    format_points,
    format_rate,
    pct_or_none,
)

from .cases_model import CasesResults, CriteriaRow, GainRow, McqRow
from .cases_origin import demographics_section, mcq_options_origin

__all__ = ("cases_blocks", "rate_cell")

ALL = "all"
DISTINCT_N = (1, 2, 3, 4, 5)
_ABOVE_CHANCE = "#12b76a"


_GAIN_COLUMNS = (
    "metric",
    "response",
    "without",
    "with retrieved",
    "gain",
    "Hodges–Lehmann",
    "r [95% CI]",
    "p",
    "p (BH)",
    "cases",
)


def rate_cell(row: ClusteredRateSummary | None) -> str:
    """ "rate [low, high] (k/n)", then ", 2 unjudged" when a judge left some out of n; "–" without data."""
    if row is None or row.rate is None or row.low is None or row.high is None:
        return "–"
    shown = f"{format_pct(row.rate)} [{format_pct(row.low)}, {format_pct(row.high)}] ({row.k}/{row.n})"
    return shown + _left(getattr(row, "unjudged", 0))


def _left(unjudged: int) -> str:
    return f", {unjudged} unjudged" if unjudged else ""


def _dot(row: ClusteredRateSummary | None, *, highlight: bool = False) -> Dot | None:
    return None if row is None or row.rate is None else Dot(row.rate, row.low, row.high, highlight)


def _columns(data: CasesResults) -> list[tuple[str, str]]:
    return sorted({(r.response, r.reference) for r in data.success})


def _success(data: CasesResults) -> Section:
    title, key = "Open responses: success rate by challenge type", "cases-success"
    origin = "TutorCaseBench Table 1 and Fig. 6 (open-response success by challenge type)"
    if not data.success:
        why = "No open response was judged, so there is no success rate (the open task did not run)."
        return Section(title, (Note(why, console=True),), key=key, provenance=origin)
    columns = _columns(data)
    challenges = (*data.challenge_types, ALL)
    cells = {(r.challenge_type, r.response, r.reference): r for r in data.success}
    names = tuple(f"{resp} · ref {ref}" for resp, ref in columns)
    numbers = Table(
        ("challenge type", *names),
        tuple((c, *(rate_cell(cells.get((c, *col))) for col in columns)) for c in challenges),
        title="Open responses (Table 1): success rate (≥ 1 criterion holds), 95% case-bootstrap CI (k/n)",
        key=key,
        row_classes=("",) * len(data.challenge_types) + ("total",),
    )
    xlabel = "success rate (≥ 1 checklist criterion holds), 95% interval resampling cases"
    responses = sorted({resp for resp, _ in columns})
    plots = tuple(
        Dots(
            tuple(
                DotPanel(
                    challenges,
                    (DotSeries(f"ref {ref}", tuple(_dot(cells.get((c, resp, ref))) for c in challenges)),),
                    title=f"ref {ref}",
                    xticks=(0.0, 0.5, 1.0),
                )
                for r, ref in columns
                if r == resp
            ),
            (numbers,) if index == len(responses) - 1 else (),
            key=f"{key}-{resp}",
            caption=f"{resp} responses: share that satisfy at least one criterion of the case's checklist "
            "(majority of judge votes per criterion) per challenge type, one panel per reference.",
            console=index == len(responses) - 1,
            xlabel=xlabel,
        )
        for index, resp in enumerate(responses)
    )
    intro = Note(
        "A response succeeds when at least one criterion of the case's checklist holds (majority of the judge "
        'votes per criterion); "overall" pools both response types.'
    )
    return Section(title, (intro, *plots), key=key, provenance=origin)


def _pooled_dot(row: CriteriaRow | None) -> Dot | None:
    if row is None or row.pooled is None:
        return None
    return Dot(row.pooled, row.pooled_low, row.pooled_high)


def _pooled_cell(row: CriteriaRow) -> str:
    if row.pooled is None or row.pooled_low is None or row.pooled_high is None:
        return "–"
    shown = f"{format_pct(row.pooled)} [{format_pct(row.pooled_low)}, {format_pct(row.pooled_high)}]"
    return f"{shown} ({row.criteria_held}/{row.criteria})" + _left(row.unjudged)


def _criteria(data: CasesResults) -> Section:
    title, key = "Criterion satisfaction", "cases-criteria"
    origin = SIMRUN_ADDITION + " (per-criterion satisfaction of the checklists)"
    if not data.criteria:
        return Section(title, (Note("No open response was judged against its checklist."),), key=key, provenance=origin)
    columns = sorted({(r.response, r.reference) for r in data.criteria})
    challenges = (*data.challenge_types, ALL)
    cells = {(r.challenge_type, r.response, r.reference): r for r in data.criteria}
    ordered = sorted(data.criteria, key=lambda r: (r.challenge_type == ALL, challenges.index(r.challenge_type)))
    numbers = Table(
        ("challenge type", "response", "reference", "responses", "mean rate per response", "criteria held [95% CI]"),
        tuple(
            (r.challenge_type, r.response, r.reference, r.responses, pct_or_none(r.mean_rate), _pooled_cell(r))
            for r in ordered
        ),
        key=key,
        console_columns=(),
    )
    series = tuple(
        DotSeries(f"{resp} · ref {ref}", tuple(_pooled_dot(cells.get((c, resp, ref))) for c in challenges))
        for resp, ref in columns
    )
    xlabel = "share of checklist criteria satisfied (pooled), 95% interval resampling cases"
    plot = Dots(
        (DotPanel(challenges, series, xlabel=xlabel),),
        (numbers,),
        key=key,
        caption="Criterion satisfaction: of all checklist criteria judged for the group's responses, the share "
        "that held.",
    )
    return Section(title, (plot,), key=key, provenance=origin)


def _mcq_panel(rows: Sequence[McqRow], variant: str, types: Sequence[str]) -> DotPanel:
    own = [r for r in rows if r.variant == variant]
    by_type = {r.challenge_type: r for r in own if r.response == ALL}
    by_response = {r.response: r for r in own if r.response != ALL and r.challenge_type == ALL}
    shown = [(t, by_type.get(t)) for t in types] + [(f"{resp} (all types)", r) for resp, r in by_response.items()]
    dots = tuple(
        _dot(r, highlight=r is not None and r.chance is not None and (r.low or 0.0) > r.chance) for _, r in shown
    )
    chances = sorted({r.chance for r in own if r.chance is not None})
    return DotPanel(
        tuple(label for label, _ in shown),
        (DotSeries("accuracy", dots),),
        title=f"{variant} (chance {', '.join(format_pct(c) for c in chances) or '?'})",
        xlabel="accuracy, 95% interval resampling cases (dashed: chance; green: interval above chance)",
        lines=tuple(chances),
        highlight_color=_ABOVE_CHANCE,
    )


def _mcq(data: CasesResults) -> Section:
    title, key = "Multiple choice: accuracy vs chance", "cases-mcq"
    origin = "TutorCaseBench Table 3 (4-option MCQ) and its binary items; " + mcq_options_origin(data.mcq_construction)
    rows = data.mcq
    if not rows:
        return Section(title, (Note("No multiple-choice task ran.", console=True),), key=key, provenance=origin)
    types = (*data.challenge_types, ALL)
    ordered = sorted(rows, key=lambda r: (r.variant, r.response != ALL, r.challenge_type == ALL))
    numbers = Table(
        ("variant", "response", "challenge type", "accuracy [95% CI] (k/n)", "chance", "p vs chance", "invalid"),
        tuple(
            (r.variant, r.response, r.challenge_type, rate_cell(r), pct_or_none(r.chance), format_p(r.p_vs_chance))
            + (r.invalid,)
            for r in ordered
        ),
        title="Multiple choice: accuracy vs chance (per-case t-test)",
        key=key,
        row_classes=tuple("total" if r.response == ALL and r.challenge_type == ALL else "" for r in ordered),
    )
    plot = Dots(
        tuple(_mcq_panel(rows, variant, types) for variant in sorted({r.variant for r in rows})),
        (numbers,),
        key=key,
        caption="Choosing the fitting intervention: accuracy against chance (1 / options), two-sided one-sample "
        "t-test of per-case accuracy; an invalid answer counts as wrong.",
        stacked=True,
        console=True,
    )
    return Section(title, (plot,), key=key, provenance=origin)


def _signed(value: float | None, metric: str) -> str | None:
    if value is None:
        return None
    return format_points(value, unit=" pts") if metric == "success" else format_fixed(value, 3, signed=True)


def _mean(value: float | None) -> Dot | None:
    return None if value is None else Dot(value)


def _gain_panels(rows: Sequence[GainRow]) -> tuple[DotPanel, DotPanel]:
    labels = tuple(f"{r.metric} · {r.response}" for r in rows)
    means = DotPanel(
        labels,
        (
            DotSeries("without", tuple(None if r.mean_none is None else Dot(r.mean_none) for r in rows)),
            DotSeries(
                "with retrieved", tuple(None if r.mean_retrieved is None else Dot(r.mean_retrieved) for r in rows)
            ),
        ),
        xlabel="mean per case: ○ without, ● with retrieved",
        joined=True,
    )
    effects = DotPanel(
        labels,
        (
            DotSeries(
                "r",
                tuple(None if r.ci_low is None else Dot(r.r, r.ci_low, r.ci_high, r.finding) for r in rows),
            ),
        ),
        xlabel="rank-biserial r, 95% bootstrap CI",
        xlim=(-1.05, 1.05),
        band=MEANINGFUL_R,
    )
    return means, effects


def _gain(row: GainRow) -> str | None:
    """The mean gain, flagged where it points the other way from r (the test's direction)."""
    shown = _signed(row.gain, row.metric)
    return shown if shown is None or not row.direction_disagrees else f"{shown} (sign differs from r)"


def _reference_gain(data: CasesResults) -> Section:
    title, key = "Reference gain (paired per case)", "cases-reference-gain"
    origin = "TutorCaseBench Fig. 8 (reference-based responses)"
    rows = data.reference_gain
    if not rows:
        why = "No run with retrieved references (design.reference: false), so there is no paired gain."
        return Section(title, (Note(why),), key=key, provenance=origin)
    size = sum(r.tested for r in rows)
    method = next((r.family_method for r in rows if r.family_method), "bh")
    numbers = Table(
        (*_GAIN_COLUMNS, "unjudged responses"),
        tuple(
            (r.metric, r.response, pct_or_none(r.mean_none), pct_or_none(r.mean_retrieved), _gain(r))
            + (
                _signed(r.estimate, r.metric),
                format_effect(r, "cases"),
                format_p(r.p),
                format_p(r.p_family),
                r.n,
                r.unjudged,
            )
            for r in rows
        ),
        console_columns=(*_GAIN_COLUMNS, *(("unjudged responses",) if any(r.unjudged for r in rows) else ())),
        title="Reference gain (paired per case: with − without retrieved strategies)",
        caption=f"Findings: {family_caption(method, size, 0.05)} (column p (BH)).",
        key=key,
        findings=tuple(r.finding for r in rows),
        decided_by="p (BH)",
    )
    plot = Dots(
        _gain_panels(rows),
        (numbers,),
        key=key,
        caption="Reference gain, paired per case: with the strategies of similar cases in the prompt minus without "
        "(Wilcoxon, rank-biserial r; red: a finding, Benjamini–Hochberg adjusted p ≤ 0.05 over every gain; "
        "fewer than 15 cases is insufficient).",
        console=True,
    )
    return Section(title, (plot,), key=key, provenance=origin)


def _deescalation(data: CasesResults) -> Section:
    title, key = "Interactive continuation: de-escalation", "cases-deescalation"
    origin = SIMRUN_ADDITION + " (the interactive continuation)"
    if not data.deescalation:
        why = "No interactive continuation was judged, so there is no de-escalation rate."
        return Section(title, (Note(why),), key=key, provenance=origin)
    order = {t: i for i, t in enumerate([*data.challenge_types, ALL])}
    ordered = sorted(data.deescalation, key=lambda r: (r.by, order.get(r.group, len(order)), r.group))
    numbers = Table(
        ("by", "group", "de-escalated [95% CI] (k/n)"),
        tuple((r.by.replace("_", " "), r.group, rate_cell(r)) for r in ordered),
        title="Interactive continuation: de-escalation rate",
        key=key,
        row_classes=tuple("total" if r.group == ALL else "" for r in ordered),
    )
    panel = DotPanel(
        tuple(r.group for r in ordered),
        (DotSeries("de-escalated", tuple(_dot(r) for r in ordered)),),
        xlabel="share of dialogues de-escalated, 95% interval resampling cases",
    )
    plot = Dots(
        (panel,),
        (numbers,),
        key=key,
        caption="Interactive continuation: share of dialogues where the student's behaviour had eased by the end "
        "(judged over the whole dialogue), per challenge type and by whether the first response met its checklist.",
        console=True,
    )
    return Section(title, (plot,), key=key, provenance=origin)


def _diversity(data: CasesResults) -> Section:
    title, key = "Diversity of responses (distinct-n)", "cases-diversity"
    origin = "TutorCaseBench Fig. 7 (distinct-n diversity)"
    if not data.diversity:
        return Section(title, (Note("No open responses to measure."),), key=key, provenance=origin)
    body: list[tuple[BlockCell, ...]] = [
        (r.response, r.reference, r.responses)
        + tuple(None if (d := r.distinct(n)) is None else format_fixed(d, 3) for n in DISTINCT_N)
        + (r.top_4gram, pct_or_none(r.top_4gram_share))
        for r in data.diversity
    ]
    table = Table(
        ("response", "reference", "responses", *(f"distinct-{n}" for n in DISTINCT_N), "top 4-gram", "share"),
        tuple(body),
        title="Diversity of open responses",
        key=key,
        console_columns=("response", "reference", "responses", "distinct-2", "distinct-4", "top 4-gram", "share"),
    )
    note = Note(
        "Distinct-n: unique n-grams over all n-grams of the group's responses (low: templated replies). The top "
        "4-gram is the one found in the most responses, with the share of responses containing it."
    )
    return Section(title, (note, table), key=key, provenance=origin)


def _recovery(data: CasesResults) -> list[Block]:
    rows = data.case_recovery
    if not rows:
        return []
    table = Table(
        ("response", "responses", "recovered [95% Wilson]", "chance"),
        tuple(
            (r.response, r.n, format_rate(r.model_dump(), style="precise"), format_pct(r.chance, 1))
            for r in data.case_recovery
        ),
        key="cases-recovery",
        console_columns=(),
    )
    note = Note(
        "Share of open responses whose nearest other response in the run (TF-IDF cosine, same response type) "
        "answers the same case; chance: the share of other responses from the same case (a neighbour drawn at random)."
    )
    origin = (
        "TutorCaseBench §5 and App. P (case-recovery rate); here the neighbour is the run's own nearest response, "
        "not another model's by embedding"
    )
    return [Section("Case specificity: case-recovery rate", (note, table), key="cases-recovery", provenance=origin)]


def cases_blocks(data: CasesResults) -> list[Block]:
    """The cases results from `summary["cases"]`."""
    blocks: list[Block] = [
        _success(data),
        _criteria(data),
        _mcq(data),
        _reference_gain(data),
        _deescalation(data),
        _diversity(data),
        *_recovery(data),
        demographics_section(),
    ]
    if data.skipped:
        skipped = ", ".join(f"{task} {count}" for task, count in data.skipped.items())
        note = Note(f"Skipped (the case lacks the material for the task): {skipped}.", console=True)
        blocks.append(Section("Skipped tasks", (note,), key="cases-skipped", provenance=SIMRUN_ADDITION))
    return blocks
