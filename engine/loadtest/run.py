"""A whole load test: one run, or a sweep that steps the rate until the SLOs break; then the files on disk."""

from __future__ import annotations

import platform
import sys
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
from pydantic import ValidationError

from ..errors import ScenarioError
from ..items import Item, ItemBank
from ..rundir import SUMMARY, RunDir, utc_now
from .config import LoadConfig
from .generator import Health
from .html import render_load_html
from .metrics import summarize
from .records import RequestRecord
from .report import HEALTH, REQUESTS, read_health, read_requests, render_markdown, write_requests
from .workers import run_step

__all__ = ("LoadResult", "load_items", "rebuild_summary", "run_load")

DEFAULT_ITEMS = Path(__file__).resolve().parents[2] / "scenarios" / "items" / "stem.yaml"


class LoadResult:
    """What `run_load` leaves: the run directory and its summary (also in `summary.json`)."""

    def __init__(self, run_dir: RunDir, summary: dict[str, Any]) -> None:
        self.run_dir, self.summary = run_dir, summary

    @property
    def valid(self) -> bool:
        return bool(self.summary["valid"])


def load_items(config: LoadConfig) -> list[Item]:
    path = config.items or DEFAULT_ITEMS
    if not path.is_file():
        raise ScenarioError(f"item bank {path} not found: point `items` (--items) at a simrun YAML item bank")
    return ItemBank()(path, {})


def step_passes(config: LoadConfig, step: dict[str, Any]) -> bool:
    target = config.sweep.goodput_target if config.sweep else 0.0
    return bool(step["gates"]["valid"]) and step["goodput"]["share"] >= target


def combine(config: LoadConfig, steps: list[dict[str, Any]], *, status: str) -> dict[str, Any]:
    """The summary: a single run's figures at the top level, or the sweep's steps and its knee."""
    summary: dict[str, Any] = {"name": config.name, "status": status, "transport": config.transport}
    if config.sweep is None:
        return summary | steps[0] | {"valid": steps[0]["gates"]["valid"]}
    passed = [step for step in steps if step_passes(config, step)]
    knee = passed[-1] if passed else None  # steps stop at the first failure, so `passed` is a prefix
    summary["sweep"] = {
        "goodput_target": config.sweep.goodput_target,
        "knee_rate": knee["target_rate"] if knee else None,
        "knee_requests_per_s": knee["throughput"]["requests_per_s"] if knee else None,
        "broke_at": steps[len(passed)]["target_rate"] if len(passed) < len(steps) else None,
    }
    return summary | {"steps": steps, "valid": all(step["gates"]["valid"] for step in steps[: len(passed) + 1])}


async def run_load(config: LoadConfig, *, out: Path = Path("runs"), stop: anyio.Event | None = None) -> LoadResult:
    """Run the load test and write manifest.json, requests.csv, client_health.json, summary.json and the reports.

    Setting `stop` ends the run early (status `interrupted`); everything measured until then is written.
    """
    items, run_dir, manifest = await anyio.to_thread.run_sync(_prepare, config, out)
    rates = config.sweep.rates if config.sweep else [config.rate]
    rows: list[RequestRecord] = []
    healths: list[Health] = []
    steps: list[dict[str, Any]] = []
    status = "finished"
    try:
        for step, rate in enumerate(rates):
            found, health = await run_step(config, items, rate=rate, step=step, stop=stop)
            rows += found
            healths += health
            steps.append(summarize(config, found, health, rate=rate))
            if stop is not None and stop.is_set():
                status = "interrupted"
                break
            if config.sweep is not None and not step_passes(config, steps[-1]):
                break
    except BaseException:
        status = "interrupted"
        raise
    finally:
        with anyio.CancelScope(shield=True):
            summary = await anyio.to_thread.run_sync(_write, run_dir, config, manifest, rows, healths, steps, status)
    return LoadResult(run_dir, summary)


def _prepare(config: LoadConfig, out: Path) -> tuple[list[Item], RunDir, dict[str, Any]]:
    """The file work before the first request, off the event loop."""
    items = load_items(config)
    run_dir = RunDir.create(out, config.name)
    manifest: dict[str, Any] = {
        "kind": "load",
        "scenario": {"name": config.name},
        "config": config.model_dump(mode="json"),
        "status": "running",
        "started_at": utc_now(),
        "versions": {"simrun": metadata.version("simrun"), "python": sys.version.split()[0]},
        "platform": platform.platform(),
    }
    run_dir.write_manifest(manifest)
    return items, run_dir, manifest


def _write(
    run_dir: RunDir, config: LoadConfig, manifest: dict[str, Any], rows: list[RequestRecord],
    healths: list[Health], steps: list[dict[str, Any]], status: str,
) -> dict[str, Any]:  # fmt: skip
    write_requests(run_dir.path / REQUESTS, rows)
    run_dir.write_json(HEALTH, [asdict(health) for health in healths])
    summary = combine(config, steps, status=status) if steps else {"name": config.name, "status": status}
    if steps:
        _write_reports(run_dir, config, summary, rows)
    else:
        run_dir.write_json(SUMMARY, summary)
    manifest |= {"status": status, "finished_at": utc_now(), "counts": {"requests": len(rows), "steps": len(steps)}}
    run_dir.write_manifest(manifest)
    return summary


def rebuild_summary(run_dir: RunDir) -> dict[str, Any]:
    """`simrun report` on a load run: recompute every figure from requests.csv and client_health.json."""
    manifest = run_dir.read_manifest()
    try:
        config = LoadConfig.model_validate(manifest.get("config"))
    except ValidationError:
        raise ScenarioError(f"{run_dir.path}: manifest.json says `kind: load` but holds no valid load config") from None
    try:
        rows, healths = read_requests(run_dir.path / REQUESTS), read_health(run_dir.path / HEALTH)
    except (OSError, ValueError, TypeError, StopIteration) as exc:
        raise ScenarioError(f"{run_dir.path}: cannot read the load test's measurements ({exc})") from None
    rates = config.sweep.rates if config.sweep else [config.rate]
    steps = []
    for step, rate in enumerate(rates):
        found = [row for row in rows if row.step == step]
        health = healths[step * config.workers : (step + 1) * config.workers]
        if health:
            steps.append(summarize(config, found, health, rate=rate))
    summary = combine(config, steps, status=str(manifest.get("status")))
    _write_reports(run_dir, config, summary, rows)
    return summary


def _write_reports(run_dir: RunDir, config: LoadConfig, summary: dict[str, Any], rows: list[RequestRecord]) -> None:
    run_dir.write_json(SUMMARY, summary)
    run_dir.write_text("report.md", render_markdown(summary))
    run_dir.write_text("report.html", render_load_html(summary, config.model_dump(mode="json"), rows))
