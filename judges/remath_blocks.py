"""What the `remediation` (ReMath) report shows, once for report.md, the terminal and report.html.

Confusion matrices put the expert's (gold) label on the rows and the tutor's on the columns, the counts being
`engine.stats._agreement`'s. Task C scores are −2..2 against the judge's baseline, named in the heading (positive: the
reply is rated better), drawn with their 95% t intervals over items; every plot's numbers are in the table below it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from engine import (
    MEANINGFUL_R,
    SIMRUN_ADDITION,
    Block,
    BlockCell,
    Brief,
    Forest,
    ForestPanel,
    Heatmap,
    Interval,
    Note,
    Section,
    Strong,
    Table,
    family_caption,
    format_effect,
    format_estimate,
    format_fixed,
    format_p,
    format_pct,
    format_rate,
    pct_or_none,
)

from .remath_metrics import AUTOMATED_METRICS
from .remath_model import Condition, LabelAgreement, MeanInterval, RemathResults, SummaryRate, TaskCDifference
from .remath_pairings import pairing_blocks

__all__ = ("SCORES", "remath_blocks")

SCORES = ("usefulness", "care", "human", "preference", "overall")
ROW_NAMES = {"human": "Human (expert reply)", "predicted": "predicted (own A/B labels)"}
_LABEL_NAMES = {"error": "Task A · error type", "strategy": "Task B · strategy", "intention": "Task B · intention"}


def _num(value: float | None, *, pct: bool = False) -> str | None:
    if value is None or math.isnan(value):
        return None
    return format_pct(value) if pct else format_fixed(value)


def _interval(cell: MeanInterval) -> Brief | None:
    """Mean [95% CI] (n items); the terminal leaves out n, which the replies column already gives."""
    if cell.mean is None:
        return None
    if cell.low is None or cell.high is None:
        return Brief(f"{format_fixed(cell.mean, signed=True)} (n={cell.n})", format_fixed(cell.mean, signed=True))
    short = format_estimate(cell.mean, cell.low, cell.high, signed=True)
    return Brief(f"{short} (n={cell.n})", short)


def _rate(cell: SummaryRate | None) -> str | None:
    if cell is None or cell.rate is None:
        return None
    return f"{format_rate(cell.model_dump())} ({cell.k}/{cell.n})"


def _top(shares: Mapping[str, float]) -> str | None:
    if not shares or not any(shares.values()):
        return None
    label = max(shares, key=lambda k: shares[k])
    return f"{label} ({format_pct(shares[label])})"


def _row_name(given: str) -> str:
    return ROW_NAMES.get(given, given)


def _baseline(data: RemathResults) -> str:
    names = {"novice": "the novice tutor's reply", "reference": "the expert's reference reply"}
    return " / ".join(names.get(a, a) for a in data.against) or "the baseline"


_APART = "the two teachers against each other: once, in the study's human–human table"


def _agreement(rows: Sequence[LabelAgreement], teachers_apart: bool) -> Table:
    """The tutor's row per label and, where snippets have two teachers, the teachers' own (human–human) row."""
    body: list[tuple[BlockCell, ...]] = []
    for r in rows:
        both = r.per_annotator
        body.append(
            (r.label, "tutor", r.n, _num(r.match, pct=True), _num(r.kappa))
            + (_num(both.match, pct=True) if both else None, _num(both.kappa) if both else None)
            + (_num(r.entropy_pred), _num(r.entropy_gold), _top(r.shares_pred))
        )
        if r.human:
            h = r.human
            body.append((r.label, "human–human", h.n, None, None, _num(h.match, pct=True), _num(h.kappa)))
            body[-1] += (_num(h.entropy), None, None)
    columns = ("label", "who", "n", "match", "kappa", "match (2 teachers)", "kappa (2 teachers)", "entropy")
    return Table(
        (*columns, "entropy (expert)", "most frequent"),
        tuple(body),
        title="ReMath Tasks A/B (Tables 1-2): agreement with the expert; 2 teachers = averaged",
        caption="2 teachers: against each teacher of a doubly-labelled snippet, averaged (the paper's match and "
        f"IRR); {_APART if teachers_apart else 'human–human: the two teachers against each other'}.",
        key="remath-agreement",
        console_columns=(*columns, "most frequent"),
        left=("who", "most frequent"),
    )


def _paper_table(row: LabelAgreement, teachers_apart: bool) -> Table:
    """The paper's Table 1 (error) or 2 (strategy, intention) for this run: each label's share, the entropy, the
    match and the kappa, for the tutor and for the human row (the expert's labels; their match and kappa are
    the two teachers' with each other, where snippets have two)."""
    labels = tuple(row.labels)
    both, human = row.per_annotator, row.human
    tutor_match, tutor_kappa = (both.match, both.kappa) if both else (row.match, row.kappa)
    human_match, human_kappa = (human.match, human.kappa) if human else (None, None)
    body: tuple[tuple[BlockCell, ...], ...] = (
        ("tutor", *(pct_or_none(row.shares_pred.get(label)) for label in labels))
        + (_num(row.entropy_pred), _num(tutor_match, pct=True), _num(tutor_kappa)),
        ("human (expert)", *(pct_or_none(row.shares_gold.get(label)) for label in labels))
        + (
            _num(row.entropy_gold),
            _num(human.match, pct=True) if human else None,
            _num(human.kappa) if human else None,
        ),
    )
    return Table(
        ("", *labels, "entropy", "match", "kappa (IRR)"),
        body,
        caption=f"ReMath Table {1 if row.label == 'error' else 2} layout: share of each label; the tutor's match and "
        "kappa against the expert (averaged over the two teachers where a snippet has two); the human row's against "
        f"{'the other teacher: ' + _APART if teachers_apart else 'the other teacher (– where no snippet has two)'}.",
        key=f"remath-shares-{row.label}",
    )


def _confusion(row: LabelAgreement, teachers_apart: bool) -> Section:
    """Heatmap of gold × predicted counts, then the same counts and each label's share as tables."""
    labels, matrix, size = tuple(row.labels), row.confusion, len(row.labels)
    body: list[tuple[BlockCell, ...]] = []
    for i, (label, counts) in enumerate(zip(labels, matrix, strict=True)):
        cells = tuple(Strong(str(c)) if j == i and c else c for j, c in enumerate(counts))
        body.append((label, *cells, sum(counts)))
    body.append(("total", *(sum(counts[j] for counts in matrix) for j in range(size)), sum(map(sum, matrix))))
    key = f"remath-confusion-{row.label}"
    counts_table = Table(
        ("expert ↓ / tutor →", *labels, "total"),
        tuple(body),
        caption="Counts; bold: the tutor agreed with the expert.",
        key=key,
        row_classes=("",) * size + ("total",),
    )
    shares = _paper_table(row, teachers_apart)
    heatmap = Heatmap(
        labels,
        labels,
        tuple(tuple(counts) for counts in matrix),
        (counts_table, shares),
        key=key,
        caption=f"{_LABEL_NAMES.get(row.label, row.label)}: the expert's label (rows) against the tutor's "
        f"(columns), {row.n} items; the diagonal is agreement.",
        xlabel="tutor's label",
        ylabel="expert's label",
        colorbar="episodes",
    )
    return Section(f"{row.label}: confusion matrix and share of each label", (heatmap,), key=f"cm-{row.label}")


def _conditions(data: RemathResults) -> list[Block]:
    rows = data.conditions
    numbers = Table(
        ("given", "against", "replies", "unjudged replies", *SCORES),
        tuple(
            (_row_name(r.given), r.against, r.replies, r.unjudged, *(_interval(r.score(m)) for m in SCORES))
            for r in rows
        ),
        title=f"ReMath Task C (Table 3): reply vs {_baseline(data)} (−2..2, both orders; 95% CI)",
        key="remath-conditions",
        console_columns=("given", *SCORES, *(("unjudged replies",) if any(r.unjudged for r in rows) else ())),
    )
    forest = Forest(
        tuple(
            ForestPanel(m, tuple(Interval(r.given, r.score(m).mean, r.score(m).low, r.score(m).high) for r in rows))
            for m in SCORES
        ),
        numbers,
        key="remath-conditions",
        caption="Task C: the tutor's reply against the judge's baseline per condition (what the tutor was told), "
        "judged in both presentation orders; means over items.",
        xlabel="mean score vs the baseline (−2..2; > 0: the tutor's reply is better), 95% t interval",
        xlim=(-2.1, 2.1),
        xticks=(-2.0, 0.0, 2.0),
    )
    return [
        Note(
            "Mean pairwise score (−2..2; positive: the reply is rated better than the baseline), both presentation "
            "orders combined, with 95% t intervals over items. The Human row is the expert's reply, judged the "
            "same way."
        ),
        forest,
        *_bias_and_leak(rows),
        *(
            [
                Note(
                    "Against the expert's reference the Human row compares the expert's reply with itself; the "
                    "paper's Human row is against the novice reply (`against: novice`)."
                )
            ]
            if any(r.given == "human" and r.against == "reference" for r in rows)
            else []
        ),
    ]


def _bias_and_leak(rows: Sequence[Condition]) -> list[Block]:
    return [
        Note(
            "Position bias: half the sum of the judge's two raw scores for the same pair, i.e. its lean towards "
            "whichever response it saw second (0 = none). Asking in both orders cancels it from the scores above. "
            "Answer leak (deterministic detector) and strategy adherence (the reply uses the expert's strategy) "
            "with 95% intervals over items."
        ),
        Table(
            ("given", "position bias (mean)", "answer leak", "strategy adherence"),
            tuple(
                (_row_name(r.given), _num(r.position_bias), _rate(r.answer_leak), _rate(r.strategy_adherence))
                for r in rows
            ),
            title="ReMath Task C: position bias, answer leak, strategy adherence",
            key="remath-position-bias",
        ),
    ]


def _mean_difference(c: TaskCDifference) -> str | None:
    """The mean difference, flagged where it points the other way from r (the test's direction)."""
    shown = _num(c.mean_diff)
    return shown if shown is None or not c.direction_disagrees else f"{shown} (sign differs from r)"


def _contrast(c: TaskCDifference) -> str:
    return f"Friedman: {c.a}" if c.test == "friedman" else f"{c.a} − {c.b}"


def _differences(rows: Sequence[TaskCDifference]) -> list[Block]:
    if not rows:
        return [Note("Fewer than two Task C conditions: nothing to compare.")]
    size = sum(c.tested for c in rows)
    method = next((c.family_method for c in rows if c.family_method), "bh")
    numbers = Table(
        (
            "metric",
            "test",
            "contrast",
            "r [95% CI]",
            "Hodges–Lehmann",
            "mean diff",
            "p",
            "p (Bonferroni)",
            "p (BH)",
            "n",
        ),
        tuple(
            (c.metric, c.test, _contrast(c), format_effect(c, "items"), _num(c.estimate))
            + (_mean_difference(c),)
            + (format_p(c.p), format_p(c.p_within), format_p(c.p_family), c.n)
            for c in rows
        ),
        title="ReMath Task C: paired differences over items",
        caption=(
            f"Findings: {family_caption(method, size, 0.05)}, on each test's own p (column p (BH)); "
            "p (Bonferroni) is the pair's p within its Friedman family, shown, not deciding."
        ),
        key="remath-differences",
        findings=tuple(c.finding for c in rows),
        decided_by="p (BH)",
        console_columns=("metric", "contrast", "r [95% CI]", "mean diff", "p (BH)", "n"),
        left=("contrast", "r [95% CI]"),
    )
    note = Note(
        "Items are the pairs. With three or more conditions a Friedman test comes first, then the pairwise "
        "Wilcoxon tests. Marked: a finding, p (BH) ≤ 0.05 over every paired test of this table "
        f"(Benjamini–Hochberg). |r| ≥ {format_fixed(MEANINGFUL_R)} is practically meaningful (shaded band: below it)."
    )
    shown = [c for c in rows if c.r is not None and c.ci_low is not None]
    if not shown:
        return [note, numbers]
    forest = Forest(
        (
            ForestPanel(
                "r",
                tuple(Interval(f"{c.metric} · {c.a} − {c.b}", c.r, c.ci_low, c.ci_high, c.finding) for c in shown),
            ),
        ),
        numbers,
        key="remath-differences",
        caption="Task C: paired differences between conditions over items.",
        xlabel="rank-biserial r with 95% bootstrap CI (positive: the first condition scores higher)",
        xlim=(-1.05, 1.05),
        band=MEANINGFUL_R,
    )
    return [note, forest]


def _automated(data: RemathResults) -> list[Block]:
    if not data.automated:
        return []
    table = Table(
        ("given", "n", *AUTOMATED_METRICS),
        tuple((_row_name(r.given), r.n, *(_num(r.metric(m)) for m in AUTOMATED_METRICS)) for r in data.automated),
        title="ReMath Task C (Table 8): automated metrics vs the expert reply",
        key="remath-automated",
    )
    note = Note(
        "ROUGE-1/L F1 and BLEU (0..1) per reply, averaged; Self-BLEU (bigrams) within the row; entropy: "
        "word-distribution entropy per reply (nats; the paper used a language model's entropy); length in "
        'words. "original" is the novice tutor\'s reply.'
    )
    title = "Task C: automated metrics against the expert reply (the paper's Table 8)"
    return [Section(title, (note, table), key="remath-table8", provenance="ReMath Table 8")]


def remath_blocks(data: RemathResults, *, teachers_apart: bool = False) -> list[Block]:
    """The ReMath results: Tasks A/B agreement with confusion matrices, Task C per condition and its tests.

    `teachers_apart`: a tutor's section in a study, whose human–human rows the study's tables show once."""
    blocks: list[Block] = []
    if data.agreement:
        intro = Note(
            "Exact match, Cohen's kappa, and the entropy (natural log) of the predicted and the expert's labels: a "
            "tutor that always gives the same label can match often and still be useless. Where snippets are "
            'labelled by two teachers, "2 teachers" scores the tutor against each teacher and averages the two '
            "(the paper's match and IRR), and the human row is the teachers' agreement with each other"
            + (" (shown once for the study)." if teachers_apart else ".")
        )
        title = "Tasks A and B: agreement with the expert's labels (the paper's Tables 1 and 2)"
        confusions = tuple(_confusion(r, teachers_apart) for r in data.agreement)
        agreement: tuple[Block, ...] = (intro, _agreement(data.agreement, teachers_apart), *confusions)
        blocks.append(Section(title, agreement, key="remath-agreement", provenance="ReMath Tables 1–2"))
    if data.conditions:
        title = f"Task C: replies against {_baseline(data)} (the paper's Table 3)"
        origin = "ReMath Table 3; the `predicted` row: " + SIMRUN_ADDITION
        blocks.append(Section(title, tuple(_conditions(data)), key="remath-conditions", provenance=origin))
    blocks += pairing_blocks(data.pairings)
    blocks += _automated(data)
    title = "Task C: paired differences between conditions"
    differences = tuple(_differences(data.differences))
    blocks.append(Section(title, differences, key="remath-differences", provenance=SIMRUN_ADDITION))
    return blocks
