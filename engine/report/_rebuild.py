"""Rebuild `summary.json`, `report.md` and `report.html` from a run directory's records alone."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from engine.core._errors import ScenarioError
from engine.core._format import format_usd
from engine.report._judge_agreement import judge_agreement_blocks, run_judge_agreement
from engine.report._judging import (
    all_simulated,
    judging_blocks,
    judging_summary,
    played_by_line,
    sim_judge_note,
)
from engine.report._markdown import markdown_blocks
from engine.report._models import model_results, tutor_labels, view_for
from engine.report._page import render_report
from engine.report._sequential import savings, sequential_blocks
from engine.runtime._modes import mode_of
from engine.runtime._plugins import SUMMARIZERS, Summarizer
from engine.runtime._rundir import REPORT, SUMMARY, CurrentRecords, RunDir

__all__ = ("REPORT_HTML", "protocol_line", "write_report")

REPORT_HTML = "report.html"


def write_report(run_dir: RunDir | Path | str) -> dict[str, Any]:
    """Summarise the current records (the last per planned id) with the scenario kind's summariser; returns
    the summary written. Records of ids outside the plan are left out and named in `run.warnings`."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
    manifest = run.read_manifest()
    mode = mode_of(manifest)
    if mode is not None:
        raise ScenarioError(f"{run.path} is the run directory of {mode.noun}: `simrun report {run.path}` rebuilds it")
    current = run.current_records(manifest=manifest)
    records = current.records
    summarizer = summarizer_of(manifest)
    labels = tutor_labels(records, manifest)
    if len(labels) > 1:  # a study of several tutors: the kind's tables per tutor, never over their records pooled
        results = {"models": model_results(records, manifest, summarizer, labels)}
    else:
        found = summarizer.summarize(records, manifest)
        results = found.model_dump(mode="json") if isinstance(found, BaseModel) else dict(found)
    summary: dict[str, Any] = {
        "run": _run_info(manifest, current, summarizer),
        **results,
    }
    summary.setdefault("judge_agreement", run_judge_agreement(records, manifest).model_dump(mode="json"))
    summary.setdefault("judging", judging_summary(records))
    view = view_for(summary, summarizer)
    if view is not summarizer:
        summary["provenance"] = view.provenance(summary)
    elif callable(provenance := getattr(summarizer, "provenance", None)):
        summary["provenance"] = provenance(found)
    summary["sequential"] = sequential = manifest.get("sequential") or {"design": "fixed-sample"}
    if sequential["design"] == "sequential":  # what it spent differs between a resumed and a clean run: run info
        summary["run"]["saved"] = savings(sequential, manifest)
    run.write_json(SUMMARY, summary)
    summarizer = view
    saved = summary["run"].get("saved") or {}
    every_kind = [  # the parts every kind's report carries, after the kind's own
        *judge_agreement_blocks(summary["judge_agreement"]),
        *judging_blocks(summary["judging"]),
        *sequential_blocks(sequential, saved),
    ]
    markdown = summarizer.render_markdown(summary) + "\n" + markdown_blocks(every_kind)
    run.write_text(REPORT, _header(summary["run"]) + markdown)
    run.write_text(REPORT_HTML, render_report(summary, records, manifest, summarizer, lines=current.lines))
    return summary


def _run_info(manifest: Mapping[str, Any], current: CurrentRecords, summarizer: Summarizer) -> dict[str, Any]:
    """summary.json's `run`: what ran, how it ended, its errors, who played what and what it cost."""
    records = current.records
    statuses = Counter(record.status for record in records)
    providers = list(manifest.get("providers") or [])
    first_errors: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.error is not None:
            entry = first_errors.setdefault(record.error.type, {"count": 0, "first": record.error.message})
            entry["count"] += 1
    return {
        "scenario": (manifest.get("scenario") or {}).get("name"),
        "kind": manifest.get("kind"),
        "status": manifest.get("status"),
        "reason": manifest.get("reason"),
        "planned": (manifest.get("counts") or {}).get("planned"),
        "episodes": len(records),
        "ok": statuses.get("ok", 0),
        "error": statuses.get("error", 0),
        "errors_by_type": {kind: entry["count"] for kind, entry in first_errors.items()},
        "errors": first_errors,
        "superseded": current.superseded,
        "warnings": current.warnings,
        "models": manifest.get("models") or {},
        "providers": providers,
        "simulated": "sim" in providers,
        "played_by": manifest.get("played_by") or {},
        "cost_usd": manifest.get("cost_usd"),
        "cache_hits": (manifest.get("calls") or {}).get("cache_hits", 0),
        "protocol": protocol_of(summarizer, manifest),
        "scenario_file": manifest.get("scenario_file") or "",
        "items_intake": manifest.get("items_intake") or [],
        "decoding_refused": manifest.get("decoding_refused") or [],
    }


def protocol_of(summarizer: Summarizer, manifest: Mapping[str, Any]) -> str:
    """Which protocol produced the run (a paper's own or simrun's extension), when the kind can tell: a
    summariser opts in with a `protocol(manifest) -> str` method."""
    hook = getattr(summarizer, "protocol", None)
    return str(hook(manifest)) if callable(hook) else ""


def protocol_line(info: Mapping[str, Any]) -> str:
    """`protocol: … (scenarios/x.yaml)`, or "" when the run does not say."""
    protocol, source = info.get("protocol") or "", info.get("scenario_file") or ""
    if not protocol and not source:
        return ""
    return f"protocol: {protocol or 'not stated by the kind'}" + (f" (`{source}`)" if source else "")


def summarizer_of(manifest: Mapping[str, Any]) -> Summarizer:
    return SUMMARIZERS.get(manifest.get("kind") or "")


def _intake_line(intake: Mapping[str, Any]) -> str:
    reasons = ", ".join(f"{reason} {count}" for reason, count in intake["skipped"].items())
    return f"{intake['source']} `{intake['path']}` read {intake['read']}, kept {intake['kept']} ({reasons})"


def _names(model: str | list[str]) -> str:
    return model if isinstance(model, str) else ", ".join(model)


def _header(info: dict[str, Any]) -> str:
    lines = [
        f"# simrun report: {info['scenario']}",
        "",
        f"- kind: `{info['kind']}` · status: **{info['status']}** · episodes: {info['episodes']} of "
        f"{info['planned']} ({info['ok']} ok, {info['error']} error)",
        f"- models: {', '.join(f'{role} `{_names(model)}`' for role, model in info['models'].items() if model)}",
    ]
    if protocol_line(info):
        lines.append(f"- {protocol_line(info)}")
    if info["errors_by_type"]:
        lines.append(f"- errors by type: {', '.join(f'{k} {v}' for k, v in sorted(info['errors_by_type'].items()))}")
    if info.get("reason"):
        lines.append(f"- stopped: {info['reason']}")
    cost = info.get("cost_usd") or {}
    if cost:
        per_model = ", ".join(f"`{m}` {format_usd(usd)}" for m, usd in (cost.get("by_model") or {}).items())
        source = f" · prices: scenario's, else {cost['price_source']}" if cost.get("price_source") else ""
        lines.append(
            f"- spend: {format_usd(cost.get('total'))} ({per_model}){source} · cache hits: {info.get('cache_hits', 0)}"
        )
    played = info.get("played_by") or {}
    if played:
        lines.append(f"- played by: {played_by_line(played)}")
    lines += [f"- warning: {warning}" for warning in info.get("warnings") or []]
    lines += [f"- items skipped: {_intake_line(i)}" for i in info.get("items_intake") or [] if i.get("skipped")]
    lines += [f"- decoding not applied: {refused}" for refused in info.get("decoding_refused") or []]
    note = sim_judge_note(played)
    if note is not None:
        lines += ["", f"> **Keyword verdicts.** The {note}."]
    if info["simulated"] and not all_simulated(played):
        lines += [
            "",
            "> **Mixed run.** Roles played by simrun's `sim` simulator are named above; only the others are a",
            "> language model's output.",
        ]
    elif info["simulated"]:
        lines += [
            "",
            "> **Simulated results.** At least one role was played by simrun's `sim` provider, a deterministic",
            "> simulator with tunable behaviour, not a language model. These numbers show what the pipeline",
            "> measures, not how any real tutor behaves.",
        ]
    return "\n".join(lines) + "\n\n"
