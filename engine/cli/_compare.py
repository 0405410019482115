"""`simrun compare RUN_A RUN_B [...]`: compare runs (engine.tools.compare._runs) and print the headline."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from engine.cli._runs import RUN_DIR
from engine.core._format import fit_to_width
from engine.tools.compare._report import render_console, write_comparison

__all__ = ("compare_command",)


@click.command(name="compare")
@click.argument("runs", nargs=-1, required=True, type=RUN_DIR)
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), help="Folder for the comparison report.")
@click.option(
    "--tutors",
    is_flag=True,
    help="Join runs of one scenario that differ only in the tutor into one study of several tutors (docs/models.md).",
)
def compare_command(runs: tuple[Path, ...], out: Path | None, tutors: bool) -> int:
    """Compare RUN_A RUN_B [...] episode by episode; writes compare.md and compare.html (exit 2: not comparable)."""
    target = out or Path("runs") / f"compare-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"
    if tutors:
        return _join(runs, target)
    comparison = write_comparison(runs, target)
    for warning in comparison.warnings:
        click.echo(f"warning: {warning}", err=True)
    console = Console(soft_wrap=True)
    for statement in comparison.statements:
        console.print(Text(statement))
    headline = render_console(comparison)
    if headline is not None:
        console.print(fit_to_width(headline, console.width))
    click.echo(f"wrote {target / 'compare.md'} and {target / 'compare.html'} ({comparison.matched} matched episodes)")
    return 0 if comparison.comparable else 2


def _join(runs: tuple[Path, ...], target: Path) -> int:
    from engine.report._models import view_for
    from engine.runtime._plugins import SUMMARIZERS
    from engine.tools.compare._join import join_tutor_runs

    summary = join_tutor_runs(runs, target)
    console = Console(soft_wrap=True)
    view = view_for(summary, SUMMARIZERS.get(str(summary["run"]["kind"])))
    console.print(fit_to_width(view.render_console(summary), console.width))
    click.echo(f"wrote {target / 'report.md'} and {target / 'report.html'} ({len(runs)} runs joined)")
    return 0
