"""`simrun view RUN_DIR`: serve a run's report on 127.0.0.1 (engine.tools._view) until Ctrl-C."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

import anyio
import click

from engine.cli._runs import RUN_DIR
from engine.core._errors import ScenarioError
from engine.report._rebuild import REPORT_HTML
from engine.tools._view import ReportServer

__all__ = ("view_command",)


async def _serve_forever(server: ReportServer, run_dir: Path) -> None:
    try:
        async with server:
            click.echo(f"serving {run_dir / REPORT_HTML} at {server.url}  (Ctrl-C to stop)")
            await anyio.sleep_forever()
    except OSError as exc:  # only binding can raise it: connections contain their own failures
        raise ScenarioError(f"cannot listen on 127.0.0.1:{server.port}: {exc.strerror or exc}; try --port 0") from None


@click.command(name="view")
@click.argument("run_dir", type=RUN_DIR)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="0 picks a free port.")
def view_command(run_dir: Path, port: int) -> int:
    """Serve RUN_DIR's report.html on 127.0.0.1 and print the address (Ctrl-C stops)."""
    server = ReportServer(run_dir, port)
    for warning in (server.summary.get("run") or {}).get("warnings") or []:
        click.echo(f"warning: {warning}", err=True)
    with suppress(KeyboardInterrupt):
        anyio.run(_serve_forever, server, run_dir, backend="asyncio")
    return 0
