"""Rebuild `summary.json`, `report.md` and `report.html` from a run directory's records alone."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from engine.core._errors import ScenarioError
from engine.report._judge_agreement import judge_agreement_markdown, run_judge_agreement
from engine.report._page import render_report
from engine.report._sequential import savings, sequential_markdown
from engine.runtime._modes import mode_of
from engine.runtime._plugins import SUMMARIZERS, Summarizer
from engine.runtime._rundir import REPORT, SUMMARY, RunDir
from engine.scenario._budget import format_usd

__all__ = ("REPORT_HTML", "write_report")

REPORT_HTML = "report.html"


def write_report(run_dir: RunDir | Path) -> dict[str, Any]:
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
    found = summarizer.summarize(records, manifest)
    results = found.model_dump(mode="json") if isinstance(found, BaseModel) else dict(found)
    statuses = Counter(record.status for record in records)
    providers = list(manifest.get("providers") or [])
    first_errors: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.error is not None:
            entry = first_errors.setdefault(record.error.type, {"count": 0, "first": record.error.message})
            entry["count"] += 1
    summary: dict[str, Any] = {
        "run": {
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
            "cost_usd": manifest.get("cost_usd"),
            "cache_hits": (manifest.get("calls") or {}).get("cache_hits", 0),
        },
        **results,
    }
    summary.setdefault("judge_agreement", run_judge_agreement(records, manifest))
    summary["sequential"] = sequential = manifest.get("sequential") or {"design": "fixed-sample"}
    if sequential["design"] == "sequential":  # what it spent differs between a resumed and a clean run: run info
        summary["run"]["saved"] = savings(sequential, manifest)
    run.write_json(SUMMARY, summary)
    markdown = summarizer.render_markdown(summary) + judge_agreement_markdown(summary["judge_agreement"])
    markdown += sequential_markdown(sequential, summary["run"].get("saved") or {})
    run.write_text(REPORT, _header(summary["run"]) + markdown)
    run.write_text(REPORT_HTML, render_report(summary, records, manifest, summarizer, lines=current.lines))
    return summary


def summarizer_of(manifest: Mapping[str, Any]) -> Summarizer:
    return SUMMARIZERS.get(manifest.get("kind") or "")


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
    if info["errors_by_type"]:
        lines.append(f"- errors by type: {', '.join(f'{k} {v}' for k, v in sorted(info['errors_by_type'].items()))}")
    if info.get("reason"):
        lines.append(f"- stopped: {info['reason']}")
    cost = info.get("cost_usd") or {}
    if cost:
        per_model = ", ".join(f"`{m}` {format_usd(usd)}" for m, usd in (cost.get("by_model") or {}).items())
        lines.append(
            f"- spend: {format_usd(cost.get('total'))} ({per_model}) · cache hits: {info.get('cache_hits', 0)}"
        )
    lines += [f"- warning: {warning}" for warning in info.get("warnings") or []]
    if info["simulated"]:
        lines += [
            "",
            "> **Simulated results.** At least one role was played by simrun's `sim` provider, a deterministic",
            "> simulator with tunable behaviour, not a language model. These numbers show what the pipeline",
            "> measures, not how any real tutor behaves.",
        ]
    return "\n".join(lines) + "\n\n"
