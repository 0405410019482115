"""report.html: one self-contained page — run header, the kind's results, a filterable transcripts browser.

The page loads nothing from anywhere: CSS and the small filtering script are inlined, plots are inline SVG,
and a Content-Security-Policy forbids every fetch and every script but the page's own (by hash). Jinja2
autoescaping turns every string from a model, a dataset or a scenario file into text.
"""

from __future__ import annotations

import base64
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from typing import Any

import jinja2
import orjson
from markupsafe import Markup

from engine.core._format import format_count, format_sig, format_usd
from engine.core._records import EpisodeRecord, Judgment
from engine.report._html_blocks import html_blocks
from engine.report._judge_agreement import judge_agreement_blocks
from engine.report._judging import all_simulated, judging_line, played_by_line, sim_judge_note
from engine.report._sections import EpisodeVerdict, HtmlSection, default_verdict, generic_section
from engine.report._sequential import sequential_blocks

__all__ = ("MAX_TRANSCRIPTS", "EpisodeView", "render_episode_page", "render_page", "render_report")

MAX_TRANSCRIPTS = 200
"""Full transcripts embedded in report.html; every episode still gets its summary line."""
MAX_ERROR_TRANSCRIPTS = 50


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("engine.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


@cache
def _asset(name: str) -> str:
    return files("engine.report").joinpath("templates", name).read_text(encoding="utf-8")


def _csp(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    return (
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )


@dataclass(frozen=True)
class JudgmentView:
    judge: str
    metric: str
    value: str
    votes: str
    rationale: str | None


@dataclass(frozen=True)
class TurnView:
    index: int
    role: str
    text: str
    hidden: bool
    model: str | None
    judgments: list[JudgmentView]


@dataclass(frozen=True)
class EpisodeView:
    """What the page shows of one episode; `turns` is empty unless its transcript is embedded."""

    line: int
    id: str
    item: str
    condition: dict[str, str]
    status: str
    verdict: str
    error: str | None
    turn_count: int
    backtracked_turns: int
    embedded: bool
    turns: list[TurnView] = field(default_factory=list)
    conversation: list[JudgmentView] = field(default_factory=list)
    metrics: list[tuple[str, str]] = field(default_factory=list)
    meta: list[tuple[str, str]] = field(default_factory=list)

    @property
    def condition_text(self) -> str:
        return " · ".join(f"{k}={v}" for k, v in self.condition.items()) or "(none)"

    @property
    def condition_json(self) -> str:
        return orjson.dumps(self.condition).decode()


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_sig(value, 4)
    if value is None or isinstance(value, str | int):
        return "null" if value is None else str(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _judgment(j: Judgment) -> JudgmentView:
    votes = ", ".join(_show(v) for v in j.votes) if j.votes else ""
    return JudgmentView(j.judge, j.metric, _show(j.value), votes, j.rationale)


def episode_view(record: EpisodeRecord, line: int, verdict: str, *, embedded: bool) -> EpisodeView:
    view = EpisodeView(
        line=line,
        id=record.id,
        item=record.item_id,
        condition=dict(record.condition),
        status=record.status,
        verdict=verdict,
        error=f"{record.error.type}: {record.error.message}" if record.error else None,
        turn_count=len(record.turns),
        backtracked_turns=sum(1 for t in record.turns if not t.visible_to_tutor),
        embedded=embedded,
    )
    if not embedded:
        return view
    by_turn: dict[int, list[JudgmentView]] = defaultdict(list)
    for j in record.judgments:
        if isinstance(j.target, int):
            by_turn[j.target].append(_judgment(j))
    view.turns.extend(
        TurnView(t.index, t.role, t.text, not t.visible_to_tutor, t.model, by_turn.get(t.index, []))
        for t in record.turns
    )
    view.conversation.extend(_judgment(j) for j in record.judgments if j.target == "conversation")
    view.metrics.extend((k, _show(v)) for k, v in record.metrics.items())
    view.meta.extend((k, _show(v)) for k, v in record.meta.items())
    return view


def select_transcripts(records: Sequence[EpisodeRecord], limit: int = MAX_TRANSCRIPTS) -> set[int]:
    """Positions of the episodes whose full transcript is embedded: errors first (up to a quarter of the
    budget), then the same number per condition, round-robin in item order, so every condition is represented."""
    chosen: list[int] = [i for i, r in enumerate(records) if r.status == "error"][
        : min(MAX_ERROR_TRANSCRIPTS, limit // 4)
    ]
    by_condition: dict[str, list[int]] = defaultdict(list)
    for i, record in sorted(enumerate(records), key=lambda p: (p[1].item_id, p[1].replicate, p[1].id)):
        if record.status == "ok":
            by_condition[orjson.dumps(record.condition, option=orjson.OPT_SORT_KEYS).decode()].append(i)
    queues = [by_condition[key] for key in sorted(by_condition)]
    depth = 0
    while len(chosen) < limit and any(depth < len(q) for q in queues):
        for queue in queues:
            if depth < len(queue) and len(chosen) < limit:
                chosen.append(queue[depth])
        depth += 1
    return set(chosen)


def _verdict(summarizer: object, record: EpisodeRecord) -> str:
    if record.status == "error" or not isinstance(summarizer, EpisodeVerdict):
        return default_verdict(record)
    return summarizer.episode_verdict(record)


def _header(summary: Mapping[str, Any], manifest: Mapping[str, Any]) -> dict[str, Any]:
    run = summary["run"]
    scenario = manifest.get("scenario") or {}
    models = []
    order = {"tutor": 0, "student": 1, "judge": 2}
    for role, model in sorted((run.get("models") or {}).items(), key=lambda kv: (order.get(kv[0], 3), kv[0])):
        if model:
            models.append((role, model if isinstance(model, str) else ", ".join(model)))
    return {
        "scenario": run.get("scenario") or scenario.get("name") or "?",
        "description": scenario.get("description") or "",
        "protocol": run.get("protocol") or "",
        "scenario_file": run.get("scenario_file") or "",
        "kind": run.get("kind") or "?",
        "hash": manifest.get("scenario_hash") or "?",
        "seed": manifest.get("seed"),
        "status": run.get("status") or "?",
        "planned": run.get("planned"),
        "episodes": run.get("episodes"),
        "ok": run.get("ok"),
        "error": run.get("error"),
        "errors_by_type": sorted((run.get("errors_by_type") or {}).items()),
        "models": models,
        "providers": ", ".join(run.get("providers") or []),
        "simulated": bool(run.get("simulated")),
        "played_by": played_by_line(run.get("played_by") or {}),
        "mixed": bool(run.get("simulated")) and not all_simulated(run.get("played_by") or {}),
        "keyword_verdicts": sim_judge_note(run.get("played_by") or {}),
        "judging": judging_line(summary.get("judging")),
        "spend": _spend(manifest),
        "reason": run.get("reason"),
        "warnings": list(run.get("warnings") or []),
        "started_at": manifest.get("started_at"),
        "updated_at": manifest.get("updated_at"),
        "version": manifest.get("simrun_version"),
    }


def _spend(manifest: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) rows: tokens and USD per role and model, then the total and the cache hits."""
    calls = manifest.get("calls") or {}
    cost = manifest.get("cost_usd")
    if not isinstance(cost, Mapping):
        return []
    prices = {m: usd for m, usd in (cost.get("by_model") or {}).items()}
    rows: list[tuple[str, str]] = []
    for role, models in sorted((calls.get("tokens_by_role") or {}).items()):
        for model, (prompt, completion) in sorted(models.items()):
            rows.append((f"{role} · {model}", f"{format_count(prompt)} + {format_count(completion)} tokens"))
    priced = ", ".join(f"{m} {_usd(usd)}" for m, usd in sorted(prices.items()))
    rows.append(("spend", f"{_usd(cost.get('total'))}" + (f" ({priced})" if priced else "")))
    if cost.get("price_source"):
        rows.append(("prices", f"scenario's, else {cost['price_source']}"))
    rows.append(("cache hits", format_count(int(calls.get("cache_hits") or 0))))
    return rows


def _usd(usd: Any) -> str:
    return format_usd(None if usd is None else float(usd))


def render_page(*, title: str, header: Mapping[str, Any] | None, body: Markup, nav: Iterable[tuple[str, str]]) -> str:
    """The page shell (style, script, CSP) around `body`; also used by `simrun compare`."""
    script = _asset("report.js")
    return (
        _environment()
        .get_template("page.html.j2")
        .render(
            title=title,
            header=header,
            body=body,
            nav=list(nav),
            style=Markup(_asset("report.css")),
            script=Markup(script),
            csp=_csp(script),
        )
    )


def render_report(
    summary: Mapping[str, Any],
    records: Sequence[EpisodeRecord],
    manifest: Mapping[str, Any],
    summarizer: object,
    *,
    max_transcripts: int = MAX_TRANSCRIPTS,
    lines: Sequence[int] | None = None,
) -> str:
    """The whole report.html for one run, deterministic for the same records and manifest.

    `lines` are the records' lines in episodes.jsonl (what episode links point at); by default 1, 2, ...
    """
    results = summarizer.render_html(summary) if isinstance(summarizer, HtmlSection) else generic_section(summary)
    saved = (summary.get("run") or {}).get("saved") or {}
    every_kind = [
        *judge_agreement_blocks(summary.get("judge_agreement")),
        *sequential_blocks(summary.get("sequential"), saved),
    ]
    results = Markup(results) + html_blocks(every_kind)
    embedded = select_transcripts(records, max_transcripts)
    at = list(lines) if lines is not None else list(range(1, len(records) + 1))
    episodes = [episode_view(r, at[i], _verdict(summarizer, r), embedded=i in embedded) for i, r in enumerate(records)]
    factors: dict[str, set[str]] = defaultdict(set)
    for episode in episodes:
        for key, value in episode.condition.items():
            factors[key].add(value)
    transcripts = (
        _environment()
        .get_template("transcripts.html.j2")
        .render(
            episodes=episodes,
            factors=sorted((key, sorted(values)) for key, values in factors.items()),
            statuses=sorted({e.status for e in episodes}),
            verdicts=sorted({e.verdict for e in episodes}),
            embedded=len(embedded),
            limit=max_transcripts,
        )
    )
    body = _environment().get_template("report_body.html.j2").render(results=results, transcripts=Markup(transcripts))
    header = _header(summary, manifest)
    return render_page(
        title=f"simrun report: {header['scenario']}",
        header=header,
        body=Markup(body),
        nav=[("results", "Results"), ("transcripts", "Transcripts")],
    )


def render_episode_page(
    record: EpisodeRecord, line: int, summary: Mapping[str, Any], manifest: Mapping[str, Any], summarizer: object
) -> str:
    """One episode's full transcript on its own page (what `simrun view` serves for episodes not embedded)."""
    episode = episode_view(record, line, _verdict(summarizer, record), embedded=True)
    body = _environment().get_template("episode_page.html.j2").render(episode=episode)
    header = _header(summary, manifest)
    return render_page(title=f"{header['scenario']}: {record.id}", header=header, body=Markup(body), nav=[])
