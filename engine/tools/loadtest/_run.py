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

from engine.core._errors import ScenarioError
from engine.runtime._rundir import SUMMARY, RunDir, utc_now
from engine.scenario._data import package_file
from engine.scenario._items import Item, ItemBank
from engine.tools.loadtest._config import LoadConfig
from engine.tools.loadtest._generator import Health
from engine.tools.loadtest._html import render_load_html
from engine.tools.loadtest._metrics import summarize
from engine.tools.loadtest._probe import probe_target, unreachable_gate
from engine.tools.loadtest._progress import ConsoleProgress
from engine.tools.loadtest._records import RequestRecord
from engine.tools.loadtest._report import HEALTH, REQUESTS, read_health, read_requests, render_markdown, write_requests
from engine.tools.loadtest._workers import run_step

__all__ = ("LoadResult", "load_items", "rebuild_summary", "run_load")

DEFAULT_ITEMS = "package:personas/stem.yaml"
"""The team's STEM item bank, shipped in the wheel (a clone's scenarios/items/stem.yaml links to it)."""


class LoadResult:
    """What `run_load` leaves: the run directory and its summary (also in `summary.json`)."""

    def __init__(self, run_dir: RunDir, summary: dict[str, Any]) -> None:
        self.run_dir, self.summary = run_dir, summary

    @property
    def valid(self) -> bool:
        return bool(self.summary["valid"])


def load_items(config: LoadConfig) -> list[Item]:
    path = config.items or package_file(DEFAULT_ITEMS)
    if not path.is_file():
        raise ScenarioError(f"item bank {path} not found: point `items` (--items) at a simrun YAML item bank")
    return ItemBank()(path, {})


def step_passes(config: LoadConfig, step: dict[str, Any]) -> bool:
    target = config.sweep.goodput_target if config.sweep else 0.0
    return bool(step["gates"]["valid"]) and step["goodput"]["share"] >= target


def _goodput_fell(config: LoadConfig, step: dict[str, Any]) -> bool:
    target = config.sweep.goodput_target if config.sweep else 0.0
    return bool(step["goodput"]["share"] < target)


def combine(config: LoadConfig, steps: list[dict[str, Any]], *, status: str) -> dict[str, Any]:
    """The summary: a single run's figures at the top level, or the sweep's steps and its knee."""
    summary: dict[str, Any] = {"name": config.name, "status": status, "transport": config.transport}
    if config.sweep is None:
        return summary | steps[0] | {"valid": steps[0]["gates"]["valid"]}
    passed = [step for step in steps if step_passes(config, step)]
    knee = passed[-1] if passed else None  # steps stop at the first failure, so `passed` is a prefix
    broke_at = steps[len(passed)]["target_rate"] if len(passed) < len(steps) else None
    summary["sweep"] = {
        "goodput_target": config.sweep.goodput_target,
        "knee_rate": knee["target_rate"] if knee else None,
        "knee_requests_per_s": knee["throughput"]["requests_per_s"] if knee else None,
        "broke_at": broke_at,
        # why the sweep stopped: its goodput fell (a knee), or only a validity gate failed (no knee)
        "stopped_by": None
        if broke_at is None
        else ("goodput" if _goodput_fell(config, steps[len(passed)]) else "gates"),
        # no step's goodput fell: the knee lies at or past the last rate tried, and knee_rate is only a lower bound
        "knee_reached": broke_at is not None and _goodput_fell(config, steps[len(passed)]),
        "rates_run": [step["target_rate"] for step in steps],
    }
    return summary | {"steps": steps, "valid": all(step["gates"]["valid"] for step in steps[: len(passed) + 1])}


def _rates(config: LoadConfig) -> list[float | None]:
    """One entry per step; a closed loop has no rate, its load is `concurrency`."""
    if config.sweep is not None:
        return list(config.sweep.rates)
    return [config.rate if config.open_loop else None]


async def run_load(
    config: LoadConfig,
    *,
    out: Path | str = Path("runs"),
    stop: anyio.Event | None = None,
    progress: ConsoleProgress | None = None,
) -> LoadResult:
    """Run the load test and write manifest.json, requests.csv, client_health.json, summary.json and the reports.

    The target is probed first: if nothing accepts a connection there, no schedule starts and the result
    fails its `target_reachable` gate. Setting `stop` ends the run early (status `interrupted`); everything
    measured until then is written. `progress` prints live figures and each sweep step as it ends.
    """
    items, run_dir, manifest = await anyio.to_thread.run_sync(_prepare, config, Path(out))
    rates = _rates(config)
    rows: list[RequestRecord] = []
    healths: list[Health] = []
    steps: list[dict[str, Any]] = []
    status = "finished"
    try:
        unreachable = await probe_target(config.target)
        if unreachable is not None:
            manifest["unreachable"] = unreachable
            rates = []
        for step, rate in enumerate(rates):
            found, health = await run_step(config, items, rate=rate, step=step, stop=stop, progress=progress)
            rows += found
            healths += health
            steps.append(summarize(config, found, health, rate=rate))
            if stop is not None and stop.is_set():
                status = "interrupted"
                break
            passed = step_passes(config, steps[-1])
            if config.sweep is not None and progress is not None:
                progress.step_finished(step, len(rates), steps[-1], passed=passed)
            if config.sweep is not None and not passed:
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
    summary = combine(config, steps, status=status) if steps else _no_steps(config, manifest, status)
    if steps:
        _write_reports(run_dir, config, summary, rows)
    else:
        run_dir.write_json(SUMMARY, summary)
    manifest |= {"status": status, "finished_at": utc_now(), "counts": {"requests": len(rows), "steps": len(steps)}}
    run_dir.write_manifest(manifest)
    return summary


def _no_steps(config: LoadConfig, manifest: dict[str, Any], status: str) -> dict[str, Any]:
    """A run that measured nothing: stopped before its first step ended, or a target found unreachable."""
    summary: dict[str, Any] = {"name": config.name, "status": status, "transport": config.transport, "valid": False}
    if manifest.get("unreachable"):
        summary["gates"] = unreachable_gate(config.target, str(manifest["unreachable"]))
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
    rates = _rates(config)
    steps = []
    for step, rate in enumerate(rates):
        found = [row for row in rows if row.step == step]
        health = healths[step * config.workers : (step + 1) * config.workers]
        if health:
            steps.append(summarize(config, found, health, rate=rate))
    status = str(manifest.get("status"))
    if not steps:
        summary = _no_steps(config, manifest, status)
        run_dir.write_json(SUMMARY, summary)
        return summary
    summary = combine(config, steps, status=status)
    _write_reports(run_dir, config, summary, rows)
    return summary


def _write_reports(run_dir: RunDir, config: LoadConfig, summary: dict[str, Any], rows: list[RequestRecord]) -> None:
    run_dir.write_json(SUMMARY, summary)
    run_dir.write_text("report.md", render_markdown(summary))
    run_dir.write_text("report.html", render_load_html(summary, config.model_dump(mode="json"), rows))
