"""Rebuild `summary.json`, `report.md` and `report.html` from a run directory's records alone."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from .plugins import SUMMARIZERS
from .report_agreement import judge_agreement_markdown, run_judge_agreement
from .report_html import render_report
from .rundir import REPORT, SUMMARY, RunDir

__all__ = ("REPORT_HTML", "write_report")

REPORT_HTML = "report.html"


def write_report(run_dir: RunDir | Path) -> dict[str, Any]:
    """Summarise the records with the scenario kind's summariser; returns the summary written."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
    manifest = run.read_manifest()
    records = list(run.iter_records())
    summarizer = SUMMARIZERS.get(manifest.get("kind", ""))
    statuses = Counter(record.status for record in records)
    providers = list(manifest.get("providers", []))
    summary: dict[str, Any] = {
        "run": {
            "scenario": manifest.get("scenario", {}).get("name"),
            "kind": manifest.get("kind"),
            "status": manifest.get("status"),
            "planned": manifest.get("counts", {}).get("planned"),
            "episodes": len(records),
            "ok": statuses.get("ok", 0),
            "error": statuses.get("error", 0),
            "errors_by_type": dict(Counter(r.error.type for r in records if r.error is not None)),
            "models": manifest.get("models", {}),
            "providers": providers,
            "simulated": "sim" in providers,
        },
        **summarizer.summarize(records, manifest),
    }
    summary.setdefault("judge_agreement", run_judge_agreement(records, manifest))
    run.write_json(SUMMARY, summary)
    markdown = summarizer.render_markdown(summary) + judge_agreement_markdown(summary["judge_agreement"])
    run.write_text(REPORT, _header(summary["run"]) + markdown)
    run.write_text(REPORT_HTML, render_report(summary, records, manifest, summarizer))
    return summary


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
    if info["simulated"]:
        lines += [
            "",
            "> **Simulated results.** At least one role was played by simrun's `sim` provider, a deterministic",
            "> simulator with tunable behaviour, not a language model. These numbers show what the pipeline",
            "> measures, not how any real tutor behaves.",
        ]
    return "\n".join(lines) + "\n\n"
