"""Finding runs without copying their names: `find_runs` lists them (for `simrun runs`), and `latest` (or
`latest~N`, the one N runs before it) stands for a run directory wherever a command expects one."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from engine.core._dirfiles import exists_in
from engine.core._errors import ScenarioError
from engine.core._format import format_count, format_usd
from engine.runtime._modes import mode_of
from engine.runtime._rundir import MANIFEST, RunDir
from engine.scenario._budget import Price, price_of

__all__ = ("DEFAULT_RUNS", "RunInfo", "find_runs", "resolve_run", "scan_runs")

DEFAULT_RUNS = Path("runs")
_LATEST = re.compile(r"^latest(?:~(\d+))?$")


@dataclass(frozen=True)
class RunInfo:
    """One run directory as its manifest describes it."""

    path: Path
    manifest: Mapping[str, Any]

    @property
    def started(self) -> str:
        return str(self.manifest.get("started_at") or "")

    @property
    def kind(self) -> str:
        return str(self.manifest.get("kind") or "?")

    @property
    def scenario(self) -> str:
        scenario = self.manifest.get("scenario")
        return str(scenario.get("name", "?")) if isinstance(scenario, Mapping) else "?"

    @property
    def outcome(self) -> str:
        counts = self.manifest.get("counts") or {}
        mode = mode_of(self.manifest)
        if mode is not None and mode.outcome is not None:
            return mode.outcome(self.manifest)
        return f"{format_count(counts.get('ok', 0))} ok / {format_count(counts.get('error', 0))} error"

    @property
    def spend(self) -> str:
        """Tokens, and dollars where every model's price is known (the scenario's prices, then the catalogue's),
        with the price source the run recorded."""
        by_model = (self.manifest.get("calls") or {}).get("tokens_by_model") or {}
        if not by_model:
            return "–"
        scenario = self.manifest.get("scenario")
        raw_prices = scenario.get("prices", {}) if isinstance(scenario, Mapping) else {}
        prices = {name: Price.model_validate(value) for name, value in (raw_prices or {}).items()}
        tokens, cost = 0, 0.0
        priced = True
        for model, (prompt, completion) in by_model.items():
            tokens += prompt + completion
            price = price_of(model, prices)
            if price is None:
                priced = False
            else:
                cost += (prompt * price.input + completion * price.output) / 1_000_000
        cost_usd = self.manifest.get("cost_usd")
        source = cost_usd.get("price_source") if isinstance(cost_usd, Mapping) else None
        dollars = format_usd(cost) if priced else "$ unknown"
        return f"{_tokens(tokens)} tokens, {dollars}" + (f" ({source})" if source else "")


def _tokens(count: int) -> str:
    return format_count(count, compact=True)


def find_runs(parent: Path = DEFAULT_RUNS) -> list[RunInfo]:
    """Every readable run directory directly under `parent`, oldest first (by start time, then name)."""
    return scan_runs(parent)[0]


def scan_runs(parent: Path = DEFAULT_RUNS) -> tuple[list[RunInfo], list[tuple[Path, str]]]:
    """The run directories under `parent` (as `find_runs`), and the damaged ones set aside with the reason.

    Every manifest is read through `RunDir.read_manifest` (no link followed, no FIFO opened, every field
    type-checked) and every column `simrun runs` shows is computed here, so one damaged entry cannot stop
    the listing.
    """
    if not parent.is_dir():
        return [], []
    found: list[RunInfo] = []
    damaged: list[tuple[Path, str]] = []
    for path in sorted(parent.iterdir()):
        if not exists_in(path, MANIFEST):
            continue  # not a run directory (a comparison, a stray folder or file)
        try:
            run = RunInfo(path, RunDir(path).read_manifest())
            _ = (run.started, run.kind, run.scenario, run.outcome, run.spend)
        except ScenarioError as exc:
            damaged.append((path, str(exc)))
        except (ValidationError, TypeError, ValueError, KeyError, AttributeError) as exc:
            damaged.append((path, f"{path / MANIFEST}: damaged manifest ({type(exc).__name__})"))
        else:
            found.append(run)
    return sorted(found, key=lambda run: (run.started, run.path.name)), damaged


def resolve_run(value: str | Path, parent: Path = DEFAULT_RUNS) -> Path:
    """`latest` → the newest run directory under `parent`; `latest~N` → the one N runs before; else the path.

    `DIR/latest` and `DIR/latest~N` look in DIR instead, so runs kept apart with `--out DIR` are named exactly."""
    match = _LATEST.match(Path(value).name)
    if match is None:
        return Path(value)
    if Path(value).parent != Path("."):
        parent = Path(value).parent
    back = int(match.group(1) or 0)
    runs = find_runs(parent)
    if len(runs) <= back:
        have = f"only {len(runs)} run(s)" if runs else "no runs"
        raise ScenarioError(f"`{value}`: {parent}/ holds {have}")
    return runs[-1 - back].path
