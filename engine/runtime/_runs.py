"""Finding runs without copying their names: `simrun runs [DIR]` lists them, and `latest` (or `latest~N`, the
one N runs before it) stands for a run directory wherever a command expects one."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import orjson
from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.core._errors import ScenarioError
from engine.core._format import fit_to_width
from engine.runtime._modes import mode_of
from engine.runtime._rundir import MANIFEST
from engine.scenario._budget import Price, price_of

__all__ = ("RUN_DIR", "RunInfo", "find_runs", "resolve_run", "runs_command")

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
        return f"{counts.get('ok', 0):,} ok / {counts.get('error', 0):,} error"

    @property
    def spend(self) -> str:
        """Tokens, and dollars where every model's price is known (the scenario's prices, then the built-in ones)."""
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
        return f"{_tokens(tokens)} tokens, " + (f"${cost:,.2f}" if priced else "$ unknown")


def _tokens(count: int) -> str:
    return f"{count / 1e6:.1f}M" if count >= 1_000_000 else f"{count / 1e3:.1f}k" if count >= 1000 else str(count)


def find_runs(parent: Path = DEFAULT_RUNS) -> list[RunInfo]:
    """Every run directory directly under `parent`, oldest first (by start time, then name)."""
    if not parent.is_dir():
        return []
    found = []
    for path in parent.iterdir():
        try:
            manifest = orjson.loads((path / MANIFEST).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue  # not a run directory (a comparison, a stray folder) or one being created
        if isinstance(manifest, dict):
            found.append(RunInfo(path, manifest))
    return sorted(found, key=lambda run: (run.started, run.path.name))


def resolve_run(value: str | Path, parent: Path = DEFAULT_RUNS) -> Path:
    """`latest` → the newest run directory under `parent`; `latest~N` → the one N runs before; else the path."""
    match = _LATEST.match(str(value))
    if match is None:
        return Path(value)
    back = int(match.group(1) or 0)
    runs = find_runs(parent)
    if len(runs) <= back:
        have = f"only {len(runs)} run(s)" if runs else "no runs"
        raise ScenarioError(f"`{value}`: {parent}/ holds {have}")
    return runs[-1 - back].path


class _RunDirType(click.ParamType[Path]):
    """A run directory argument that also accepts `latest` and `latest~N`."""

    name = "RUN_DIR"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        try:
            path = resolve_run(value)
        except ScenarioError as exc:
            self.fail(str(exc), param, ctx)
        if not path.is_dir():
            self.fail(f"{str(path)!r} is not a directory (`simrun runs` lists the runs)", param, ctx)
        return path


RUN_DIR = _RunDirType()


@click.command(name="runs")
@click.argument("parent", required=False, default=DEFAULT_RUNS, type=click.Path(path_type=Path, file_okay=False))
def runs_command(parent: Path) -> int:
    """List the runs in PARENT (default runs/), oldest first; `latest` names the last one."""
    runs = find_runs(parent)
    console = Console()
    if not runs:
        console.print(Text(f"no runs in {parent}/"))
        return 0
    table = Table(
        title=f"runs in {parent}/, oldest first",
        caption=f"folders: {parent}/<scenario>-<UTC start>",
        box=None,  # no rules: seven columns then fit 80 characters, row per run
        pad_edge=False,
        header_style="bold",
    )
    for column in ("name", "scenario", "kind", "status", "outcome", "started (UTC)", "spend"):
        table.add_column(column, overflow="fold")
    for index, run in enumerate(runs):
        back = len(runs) - 1 - index
        status = str(run.manifest.get("status") or "?")
        table.add_row(
            *map(Text, ("latest" if back == 0 else f"latest~{back}", run.scenario, run.kind)),
            Text(status, style="" if status == "finished" else "yellow"),
            *map(Text, (run.outcome, run.started[:19].replace("T", " "), run.spend)),
        )
    console.print(fit_to_width(table, console.width))
    return 0
