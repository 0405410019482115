"""`simrun runs [DIR]`, and the RUN_DIR argument type that accepts `latest` and `latest~N` in every command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.core._errors import ScenarioError
from engine.core._format import fit_to_width
from engine.runtime._runs import DEFAULT_RUNS, resolve_run, scan_runs

__all__ = ("RUN_DIR", "runs_command")


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
    runs, damaged = scan_runs(parent)
    console = Console()
    for path, reason in damaged:
        console.print(Text(f"skipped {path.name}: {reason}", style="yellow"))
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
