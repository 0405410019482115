"""`simrun view RUN_DIR`: serve a run's report.html on 127.0.0.1, plus any episode's full transcript on demand.

report.html embeds a bounded number of transcripts; the others link to `episodes/<line>.html`, which this
server renders from episodes.jsonl when asked. Nothing else in the run directory is served, and only to
requests addressed to 127.0.0.1 or localhost at its port: a page elsewhere that rebinds its own host name to
127.0.0.1 (DNS rebinding) gets a 421, never the report.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import click
import orjson

from .errors import ScenarioError
from .modes import mode_of
from .plugins import SUMMARIZERS
from .records import EpisodeRecord
from .report import REPORT_HTML, write_report
from .report_html import render_episode_page
from .rundir import SUMMARY, RunDir
from .runs import RUN_DIR

__all__ = ("ReportServer", "serve_report", "view_command")

_EPISODE = re.compile(r"^/episodes/(\d+)\.html$")


class ReportServer(ThreadingHTTPServer):
    """A loopback HTTP server for one run directory."""

    daemon_threads = True

    def __init__(self, run_dir: Path, port: int = 0) -> None:
        self.run = RunDir(run_dir)
        self.manifest = self.run.read_manifest()
        mode = mode_of(self.manifest)  # a run mode's run: one page, no episodes
        if not (run_dir / REPORT_HTML).exists() or not (run_dir / SUMMARY).exists():
            if mode is not None:
                mode.rebuild(self.run)
            else:
                write_report(self.run)
        try:
            self.summary: dict[str, Any] = orjson.loads((run_dir / SUMMARY).read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise ScenarioError(
                f"{run_dir / SUMMARY}: unreadable ({exc}); `simrun report {run_dir}` rebuilds it"
            ) from None
        if not isinstance(self.summary, dict):
            raise ScenarioError(f"{run_dir / SUMMARY}: not a summary; `simrun report {run_dir}` rebuilds it")
        self.summarizer = None if mode is not None else SUMMARIZERS.get(self.manifest.get("kind") or "")
        # Only the current record of each planned episode is served; superseded lines are not.
        self._lines = set() if mode is not None else set(self.run.current_records(manifest=self.manifest).lines)
        self._lock = threading.Lock()
        super().__init__(("127.0.0.1", port), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"

    def episode_page(self, line: int) -> str | None:
        """The episode on line `line` (1-based) of episodes.jsonl as a page, or None when there is none."""
        record = self._record(line) if self.summarizer is not None else None
        if record is None:
            return None
        return render_episode_page(record, line, self.summary, self.manifest, self.summarizer)

    def _record(self, line: int) -> EpisodeRecord | None:
        if line not in self._lines:
            return None
        with self._lock, self.run.episodes_path.open("rb") as handle:
            for number, raw in enumerate(handle, 1):
                if number == line:
                    return EpisodeRecord.model_validate_json(raw) if raw.endswith(b"\n") else None
        return None


class _Handler(BaseHTTPRequestHandler):
    server: ReportServer

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        if self.headers.get("Host", "").lower() not in (f"127.0.0.1:{port}", f"localhost:{port}"):
            self._send(
                b"this server answers only http://127.0.0.1:PORT/\n",
                status=HTTPStatus.MISDIRECTED_REQUEST,
                content_type="text/plain; charset=utf-8",
            )
            return
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if path in ("/", "/report.html"):
            self._send((self.server.run.path / REPORT_HTML).read_bytes())
            return
        match = _EPISODE.match(path)
        page = self.server.episode_page(int(match.group(1))) if match else None
        if page is None:
            self._send(b"not found\n", status=HTTPStatus.NOT_FOUND, content_type="text/plain; charset=utf-8")
            return
        self._send(page.encode("utf-8"))

    def _send(
        self, body: bytes, *, status: HTTPStatus = HTTPStatus.OK, content_type: str = "text/html; charset=utf-8"
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the address is printed once; request lines would bury it."""


@contextmanager
def serve_report(run_dir: Path, port: int = 0) -> Iterator[ReportServer]:
    """Serve in a background thread for the duration of the block (tests, and tools embedding simrun)."""
    server = ReportServer(run_dir, port)
    thread = threading.Thread(target=server.serve_forever, name="simrun-view", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@click.command(name="view")
@click.argument("run_dir", type=RUN_DIR)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="0 picks a free port.")
def view_command(run_dir: Path, port: int) -> int:
    """Serve RUN_DIR's report.html on 127.0.0.1 and print the address (Ctrl-C stops)."""
    try:
        server = ReportServer(run_dir, port)
    except OSError as exc:
        raise ScenarioError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}; try --port 0") from None
    for warning in (server.summary.get("run") or {}).get("warnings") or []:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"serving {run_dir / REPORT_HTML} at {server.url}  (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
