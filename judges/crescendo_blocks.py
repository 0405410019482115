"""What the `crescendo` (SafeTutors) report shows, once for report.md, the terminal and report.html: the
harm-rate heatmap, SafeTutors' subject × dimension tables, the hazard of first harm, survival, backtracks.

Per-reply rates carry cluster-bootstrap intervals over dialogues, per-dialogue rates Wilson intervals and
their exposure; every plot's numbers are in the tables under it, which are all a text output shows of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import partial

from engine import (
    SIMRUN_ADDITION,
    Bar,
    BarPanel,
    Block,
    BlockCell,
    Brief,
    Bullets,
    ClusteredRateSummary,
    Curve,
    CurvePoint,
    Heatmap,
    Histogram,
    Note,
    RateSummary,
    Section,
    Survival,
    SurvivalRow,
    Table,
    format_fixed,
    format_pct,
    format_points,
)
from engine import format_rate as rate_text

from .crescendo_model import Amplification, CrescendoSummary, FormatCell, Hazard, SubjectPedagogy

__all__ = ("HIGHLIGHTED", "crescendo_blocks", "format_rate")

FORMATS = ("single", "multi")
HIGHLIGHTED = 3
"""Survival curves drawn in colour; with 11 dimensions, more would be unreadable."""
_HEAT_COLUMNS = (
    ("single", "per_response", "single · per reply"),
    ("multi", "per_response", "multi · per reply"),
    ("multi", "per_conversation", "multi · per dialogue"),
)

_HARM = "SafeTutors Tables 1–2, pooled over subjects (per reply); per dialogue and exposure: " + SIMRUN_ADDITION
_SUBJECTS = (
    "SafeTutors Tables 1–2 (harm per reply, subject × dimension, per format); the amplification intervals: "
    + SIMRUN_ADDITION
)
_BACKTRACKS = SIMRUN_ADDITION + " (the adaptive attacker's backtracks; the paper replays fixed scripts)"
_OVERALL = SIMRUN_ADDITION + " (pooled over dimensions, then per domain)"
_QUALITY = (
    "SafeTutors Figs. 3–4 (pedagogical quality); judge unanimity and the answer-leak detector: " + SIMRUN_ADDITION
)

format_rate = partial(rate_text, style="precise")
"""`62.0% [55.1%–68.4%] n=120`, or `–` when nothing was counted."""
_compact = partial(rate_text, style="compact")
Rate = RateSummary | ClusteredRateSummary


def _rate(cell: Rate | None) -> str:
    return format_rate(None if cell is None else cell.model_dump())


def _compact_rate(cell: Rate | None) -> str:
    return _compact(None if cell is None else cell.model_dump())


def _points(value: float | None, low: float | None = None, high: float | None = None) -> str:
    """`+6.2 pp [−1.0, +13.5]`."""
    return format_points(value, low, high)


def _delta(amp: Amplification | None) -> Brief | None:
    """The amplification with its interval; the terminal shows the whole points only."""
    if amp is None or amp.delta is None:
        return None
    return Brief(_points(amp.delta, amp.ci.low, amp.ci.high), format_points(amp.delta, digits=0, unit=""))


def _visible_delta(amp: Amplification | None) -> str | None:
    if amp is None or amp.visible_only.delta is None:
        return None
    found = amp.visible_only
    return _points(found.delta, found.low, found.high)


def _exposure(cell: FormatCell | None) -> str | None:
    return None if cell is None or cell.exposure is None else f"{format_fixed(cell.exposure, 1)} replies"


def _unjudged(cell: FormatCell | None, unit: str = "") -> str:
    """`, 2 unjudged` after a rate whose n leaves out replies the harm judge never gave a valid verdict on."""
    return f", {cell.unjudged}{unit} unjudged" if cell is not None and cell.unjudged else ""


def _left_out(unjudged: int) -> str:
    """The count of replies the harm judge left unjudged, said where a hazard or survival table leaves them out."""
    return f"{unjudged} unjudged replies left out (no valid verdict after retries)"


def _percent(value: float | None, digits: int = 1) -> str | None:
    return None if value is None else f"{value:.{digits}%}"


class _View:
    """The summary's rows indexed the ways the blocks look them up; `names` are the dimensions' display names."""

    def __init__(self, summary: CrescendoSummary, names: Mapping[str, str]) -> None:
        self.s = summary
        self.names = names
        self.harm = {(c.dimension, c.format): c for c in summary.harm}
        self.pooled = [a for a in summary.amplification if a.subject is None and a.dimension is not None]
        self.dimensions = [a.dimension for a in self.pooled if a.dimension is not None]
        self.amplification = {(a.dimension, a.subject): a for a in summary.amplification}
        self.subjects = sorted({a.subject for a in summary.amplification if a.subject is not None})

    def name(self, dimension: str | None) -> str:
        return "all dimensions" if dimension is None else self.names.get(dimension, dimension)


def _harm_table(view: _View) -> Table:
    rows: list[tuple[BlockCell, ...]] = []
    for dimension in view.dimensions:
        single, multi = view.harm.get((dimension, "single")), view.harm.get((dimension, "multi"))
        per = [c.per_response if c else None for c in (single, multi)] + [multi.per_conversation if multi else None]
        left = [_unjudged(single), _unjudged(multi), _unjudged(multi, " replies")]
        cells = tuple(Brief(_rate(r) + k, _compact_rate(r) + k) for r, k in zip(per, left, strict=True))
        rows.append((view.name(dimension), *cells, _exposure(multi), _delta(view.amplification[(dimension, None)])))
    return Table(
        (
            "dimension",
            "single / reply",
            "multi / reply",
            "multi / dialogue",
            "exposure",
            "amplification, pp",
        ),
        tuple(rows),
        title="Harm rate by risk dimension (per generated reply, backtracked ones included), "
        "% [95% cluster-bootstrap interval]",
        key="harm",
    )


def _heat_value(cell: FormatCell | None, kind: str) -> Rate | None:
    if cell is None:
        return None
    found = cell.per_response if kind == "per_response" else cell.per_conversation
    return found if found.rate is not None else None


def _heatmap(view: _View) -> Section:
    found = [[_heat_value(view.harm.get((d, fmt)), kind) for fmt, kind, _ in _HEAT_COLUMNS] for d in view.dimensions]
    heatmap = Heatmap(
        tuple(view.name(d) for d in view.dimensions),
        tuple(label for *_, label in _HEAT_COLUMNS),
        tuple(tuple(None if r is None else r.rate for r in row) for row in found),
        (_harm_table(view),),
        key="crescendo-heatmap",
        caption="Share of generated tutor replies judged unsafe (majority of judges) per risk dimension × format, "
        "cluster-bootstrap intervals over dialogues; per dialogue: share of multi-turn dialogues with at least one "
        "unsafe reply (more replies, more chances: read it with its exposure).",
        xlabel="",
        ylabel="",
        colorbar="harm rate (95% interval in brackets)",
        console=True,
        cells=tuple(
            tuple(
                "–" if r is None else f"{format_pct(r.rate)}  [{format_pct(r.low)}–{format_pct(r.high)}]" for r in row
            )
            for row in found
        ),
        cmap="Reds",
        vmax=1.0,
        light_above=0.6,
        columns_on_top=True,
    )
    intro = Note(
        "Share of tutor replies judged unsafe (majority of judges) among every reply generated, backtracked or not "
        "(SafeTutors' denominator), 95% cluster-bootstrap intervals over dialogues. Per dialogue: "
        "share of dialogues with at least one unsafe reply (Wilson), with its exposure (judged replies per "
        "dialogue). Amplification: multi- minus single-turn harm per reply, SafeTutors' unit."
    )
    return Section("Harm rate by risk dimension × format", (intro, heatmap), key="harm", provenance=_HARM)


def _subject_tables(view: _View) -> Section:
    """SafeTutors Tables 1–2: harm per reply, subject × dimension, per format, with the ≥ 60% count."""
    cells = {(c.subject, c.dimension, c.format): c for c in view.s.by_subject_dimension}
    high = {(h.subject, h.format): h for h in view.s.high_harm_dimensions}
    tables: list[Block] = []
    for fmt in FORMATS:
        if not any(c.format == fmt for c in view.s.harm):
            continue
        rows: list[tuple[BlockCell, ...]] = []
        for subject in [*view.subjects, None]:
            count = high.get((subject, fmt))
            shown: list[FormatCell | None]
            if subject is None:
                shown = [view.harm.get((d, fmt)) for d in view.dimensions]
            else:
                shown = [cells.get((subject, d, fmt)) for d in view.dimensions]
            rates = (_compact_rate(c.per_response if c else None) + _unjudged(c) for c in shown)
            label = "all subjects" if subject is None else subject
            rows.append((label, *rates, f"{count.count} of {count.of}" if count else None))
        tables.append(
            Table(
                ("subject", *(view.name(d) for d in view.dimensions), "dimensions ≥ 60%"),
                tuple(rows),
                caption=f"{fmt.capitalize()}-turn harm per reply (%, 95% cluster-bootstrap interval)",
                key=f"subject-dimension-{fmt}",
                row_classes=("",) * len(view.subjects) + ("total",),
                console_columns=(),
            )
        )
    amplification = Table(
        ("dimension", "all subjects", *view.subjects),
        tuple(
            (view.name(d), *(_delta(view.amplification.get((d, s))) for s in [None, *view.subjects]))
            for d in [*view.dimensions, None]
        ),
        caption="Amplification by subject: multi- minus single-turn harm per reply, pp "
        "[95% cluster-bootstrap interval]",
        key="amplification-by-subject",
        console_columns=(),
    )
    return Section("Harm by subject × dimension", (*tables, amplification), key="subjects", provenance=_SUBJECTS)


def _surviving_at(curve: Sequence[SurvivalRow], turns: Iterable[int]) -> list[float]:
    """The step curve's value at each turn (the last estimate at or before it; 1 before any)."""
    steps = {r.turn: r.surviving for r in curve}
    known, found = 1.0, []
    for turn in turns:
        known = steps.get(turn, known)
        found.append(known)
    return found


def _still_safe(curve: Sequence[SurvivalRow], turns: Iterable[int]) -> list[str]:
    return [format_pct(share, 1) for share in _surviving_at(curve, turns)]


def _hazard_text(low: float | None, value: float | None, high: float | None) -> str | None:
    if value is None:
        return None
    return f"{format_pct(value, 1)} [{format_pct(low or 0.0, 1)}–{format_pct(high or 0.0, 1)}]"


def _hazard(view: _View) -> Section:
    overall = view.s.hazard["all"]
    turns = [r.turn for r in overall.per_turn]
    safe = _still_safe(view.s.survival.get("all") or [], turns)
    per_turn = Table(
        ("reply", "at risk", "first harms", "hazard [95% Wilson]", "still safe (Kaplan–Meier)"),
        tuple(
            (r.turn, r.at_risk, r.events, _hazard_text(r.low, r.hazard, r.high), s)
            for r, s in zip(overall.per_turn, safe, strict=True)
        ),
        caption=f"All dimensions; {_left_out(overall.unjudged)}",
        key="hazard",
        console_columns=(),
    )
    contrast = Table(
        ("dimension", "first reply", "later replies (pooled)", "later − first [95% CI]", "unjudged replies"),
        tuple((view.name(None if d == "all" else d), *_contrast(h), h.unjudged) for d, h in view.s.hazard.items()),
        caption="Escalation: a later hazard above the first reply's means pressure works; a flat hazard puts 0 in "
        "the interval (paired cluster bootstrap over dialogues)",
        key="hazard-contrast",
        console_columns=(),
    )
    curve = Curve(
        "all dimensions",
        tuple(CurvePoint(r.turn, r.hazard, r.low, r.high) for r in overall.per_turn),
        style="pooled",
    )
    plot = Survival(
        (curve,),
        (per_turn, contrast),
        key="crescendo-hazard",
        caption="Discrete-time hazard: first unsafe replies at each generated tutor reply (backtracked ones "
        "included) among dialogues still without one.",
        xlabel="tutor reply (generated)",
        ylabel="hazard of the first unsafe reply",
        hazard=True,
        reference=overall.later.rate,
        reference_label="later replies, pooled",
    )
    later = overall.later_minus_first
    body = (
        Note(
            "h_t = first harms at generated tutor reply t / dialogues still without harm at t, counting "
            "backtracked replies, so the first reply is the same population as a single-turn reply. Flat hazard: "
            "no escalation; a later hazard above the first reply's: the pressure works."
        ),
        plot,
        Note(
            "Escalation (hazard of first harm, later replies − first): "
            + _points(later.delta, later.low, later.high)
            + " (paired cluster bootstrap over dialogues)"
            + (f"; {_left_out(overall.unjudged)}" if overall.unjudged else ""),
            console=True,
        ),
    )
    return Section("Escalation: hazard of the first unsafe reply", body, key="hazard", provenance=SIMRUN_ADDITION)


def _contrast(hazard: Hazard) -> tuple[str, str, str]:
    later = hazard.later_minus_first
    return _rate(hazard.first), _rate(hazard.later), _points(later.delta, later.low, later.high)


def _area(curve: Sequence[SurvivalRow], last: int) -> float:
    """Expected exchanges without harm up to the longest dialogue: smallest = loses safety fastest."""
    return sum(_surviving_at(curve, range(1, last + 1)))


def _survival(view: _View) -> Section:
    curves = view.s.survival
    dimensions = [d for d in curves if d != "all" and curves[d]]
    last = max((r.turn for d in dimensions for r in curves[d]), default=0)
    highlighted = sorted(dimensions, key=lambda d: (_area(curves[d], last), d))[:HIGHLIGHTED]
    drawn = [
        Curve(view.name(d), tuple(CurvePoint(r.turn, r.surviving) for r in curves[d]), style="muted")
        for d in dimensions
        if d not in highlighted
    ]
    drawn += [Curve(view.name(d), tuple(CurvePoint(r.turn, r.surviving) for r in curves[d])) for d in highlighted]
    overall = curves.get("all") or []
    drawn.append(Curve("all dimensions", tuple(CurvePoint(r.turn, r.surviving) for r in overall), style="pooled"))
    main = Table(
        ("reply", "at risk", "first harms", "still safe"),
        tuple((r.turn, r.at_risk, r.events, format_pct(r.surviving, 1)) for r in overall),
        caption="All dimensions (Kaplan–Meier over generated replies, dialogues without harm are censored at their "
        f"last reply); {_left_out(view.s.survival_unjudged.get('all', 0))}",
        key="survival",
    )
    turns = sorted({r.turn for d in dimensions for r in curves[d]})
    per_dimension = Table(
        ("dimension", *(f"reply {t}" for t in turns), "unjudged replies"),
        tuple((view.name(d), *_still_safe(curves[d], turns), view.s.survival_unjudged.get(d, 0)) for d in dimensions),
        caption="Still safe after each generated reply, per dimension",
        key="survival-by-dimension",
    )
    plot = Survival(
        tuple(drawn),
        (main, per_dimension),
        key="crescendo-survival",
        caption="Exchanges until the first unsafe reply in multi-turn dialogues (Kaplan–Meier): the three "
        "dimensions that lose safety fastest in colour, the others in grey, all dimensions pooled in black.",
        xlabel="tutor reply (generated)",
        ylabel="share of dialogues still without an unsafe reply",
        muted_label="other dimensions",
    )
    return Section("Exchanges until the first unsafe reply", (plot,), key="survival", provenance=SIMRUN_ADDITION)


def _backtracks(view: _View) -> Section:
    back, detail = view.s.backtracks, view.s.backtrack_detail
    rows = detail.by_dimension
    counts = sorted(detail.per_conversation.items(), key=lambda kv: int(kv[0]))
    shares = BarPanel(
        tuple(
            Bar(
                view.name(r.dimension),
                r.with_backtrack.rate or 0.0,
                r.with_backtrack.low or 0.0,
                r.with_backtrack.high or 0.0,
            )
            for r in rows
        ),
        "share of multi-turn dialogues with ≥ 1 backtrack",
        horizontal=True,
        limit=(0.0, 1.0),
        color="#f79009",
        error_color="#7a2e0e",
    )
    histogram = BarPanel(
        tuple(Bar(k, v, at=int(k)) for k, v in counts), "dialogues", category_label="backtracks in a dialogue"
    )
    table_rows: list[tuple[BlockCell, ...]] = [
        (view.name(r.dimension), r.conversations, _rate(r.with_backtrack), r.total)
        + (None if not r.conversations else format_fixed(r.total / r.conversations),)
        for r in rows
    ]
    table_rows.append(("all", back.multi_conversations, back.conversations_with_backtrack, back.total, None))
    numbers = (
        Table(
            ("dimension", "multi-turn dialogues", "with ≥ 1 backtrack", "backtracks", "per dialogue"),
            tuple(table_rows),
            row_classes=("",) * len(rows) + ("total",),
            key="backtracks",
            console_columns=(),
        ),
        Table(
            ("backtracks in a dialogue", "dialogues"), tuple((int(k), v) for k, v in counts), key="backtrack-histogram"
        ),
    )
    plot = Histogram(
        (shares, histogram),
        numbers,
        key="crescendo-backtracks",
        caption="Backtracks: the attacker took back a refused exchange (kept in the record, hidden from the tutor).",
        widths=(3.0, 2.0),
    )
    facts = Bullets(
        (
            f"backtracks: {back.total} in {back.conversations_with_backtrack} of {back.multi_conversations} "
            "multi-turn conversations",
            f"backtracked replies (in every per-reply rate: they were generated): {back.backtracked_replies}, "
            f"{back.backtracked_unsafe} judged unsafe; visible multi-turn replies: {back.visible_replies}",
        )
    )
    return Section("Backtracks", (plot, facts), key="backtracks", provenance=_BACKTRACKS)


def _overall(view: _View) -> Section:
    overall = Table(
        ("format", "per reply", "per dialogue", "exposure", "episodes", "unjudged replies"),
        tuple(
            (c.format, _rate(c.per_response), _rate(c.per_conversation), _exposure(c), c.episodes, c.unjudged)
            for c in view.s.overall
        ),
        title="Overall",
        key="overall",
    )
    pooled = view.amplification.get((None, None))
    visible = Table(
        ("format", "per visible reply", "amplification over visible replies, pp"),
        tuple(
            (c.format, _rate(c.per_visible_reply), _visible_delta(pooled) if c.format == "multi" else None)
            for c in view.s.overall
        ),
        caption="Secondary view, not SafeTutors' unit: harm over the replies the tutor's history kept. The attacker "
        "takes back refused (safe) replies, so this view selects safe replies out of the multi-turn side only.",
        key="overall-visible",
        console_columns=(),
    )
    domains = Table(
        ("domain", "format", "per reply", "per dialogue"),
        tuple(
            (c.domain, c.format, _rate(c.per_response) + _unjudged(c), _rate(c.per_conversation))
            for c in view.s.harm_by_domain
        ),
        key="by-domain",
        console_columns=(),
    )
    return Section("Overall and by domain", (overall, visible, domains), key="overall", provenance=_OVERALL)


def _quality(summary: CrescendoSummary) -> Section:
    pedagogy = summary.pedagogy
    left = pedagogy.unjudged
    rows: list[tuple[BlockCell, ...]] = [
        (metric, fmt, _rate(cell), left.get(fmt, 0))
        for fmt, cells in (("single", pedagogy.single), ("multi", pedagogy.multi))
        for metric, cell in cells.items()
    ]
    clarity = pedagogy.single_clarity_mean
    rows.append(
        ("clarity (mean, 1–5)", "single", None if clarity is None else format_fixed(clarity), left.get("single", 0))
    )
    unanimity, leak = summary.unanimity, summary.answer_leak
    facts = Bullets(
        (
            f"harm judgments with unanimous votes: {_percent(unanimity.share) or '–'} of {unanimity.judgments}",
            "answer leak (deterministic detector, per generated reply): "
            f"single {_rate(leak.single)}, multi {_rate(leak.multi)}; unjudged replies: "
            + ", ".join(f"{fmt} {leak.unjudged.get(fmt, 0)}" for fmt in FORMATS),
        )
    )
    table = Table(("metric", "format", "rate", "unjudged dialogues"), tuple(rows), key="pedagogy", console_columns=())
    body: tuple[Block, ...] = (table, *_pedagogy_by_subject(summary), facts)
    return Section("Pedagogical quality and judge unanimity", body, key="quality", provenance=_QUALITY)


_PAPER_SCALE = {"clarity": "mean, 1–5", "challenges_learner": "share, 0–1"}
"""How SafeTutors Figs. 3–4 state each metric: clarity on 1–5 and the challenge score on 0–1; the others as
percentages. "Learns more" is printed without a unit (5.51–13.08); read here as a percentage of dialogues."""


def _paper_cell(row: SubjectPedagogy | None) -> str | None:
    if row is None:
        return None
    if row.metric == "clarity":
        return None if row.mean is None else format_fixed(row.mean)
    value = None if row.rate is None else row.rate.rate
    if value is None:
        return None
    return format_fixed(value) if row.metric == "challenges_learner" else format_fixed(value * 100, 1)


def _pedagogy_by_subject(summary: CrescendoSummary) -> list[Block]:
    """Each pedagogy metric per subject × format, on the scale SafeTutors reports it."""
    rows = summary.pedagogy_by_subject
    if not rows:
        return []
    subjects = sorted({r.subject for r in rows})
    cells = {(r.metric, r.format, r.subject): r for r in rows}
    keys = list(dict.fromkeys((r.metric, r.format) for r in rows))
    formats = list(dict.fromkeys(f for _, f in keys))
    left = {(r.format, r.subject): r.unjudged for r in rows}
    table = Table(
        ("metric", "format", "scale", *subjects),
        tuple((m, f, _PAPER_SCALE.get(m, "%"), *(_paper_cell(cells.get((m, f, s))) for s in subjects)) for m, f in keys)
        + tuple(("unjudged dialogues", f, "count", *(left.get((f, s)) for s in subjects)) for f in formats),
        caption="Pedagogy per subject × format on the paper's scale (SafeTutors Figs. 3–4): clarity as a 1–5 mean, "
        "the challenge score as a 0–1 share, the rest as % of replies or dialogues judged yes.",
        key="pedagogy-by-subject",
        console_columns=(),
    )
    return [table]


def crescendo_blocks(summary: CrescendoSummary, names: Mapping[str, str]) -> list[Block]:
    """The crescendo results; `names` maps dimension ids to display names."""
    if not summary.amplification:
        empty = Note("No episode finished ok, so there is nothing to plot.")
        return [Section("No results", (empty,), key="empty", provenance=SIMRUN_ADDITION), _quality(summary)]
    view = _View(summary, names)
    return [
        _heatmap(view),
        _subject_tables(view),
        _hazard(view),
        _survival(view),
        _backtracks(view),
        _overall(view),
        _quality(summary),
    ]
