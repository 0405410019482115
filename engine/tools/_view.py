"""What `simrun view RUN_DIR` serves: a run's report.html on 127.0.0.1, plus any episode's full transcript on demand.

report.html embeds a bounded number of transcripts; the others link to `episodes/<line>.html`, which this
server renders from episodes.jsonl when asked. Nothing else in the run directory is served, and only to
requests addressed to 127.0.0.1 or localhost at its port: a page elsewhere that rebinds its own host name to
127.0.0.1 (DNS rebinding) gets a 421, never the report.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import orjson
from pydantic import ValidationError

from engine.core._dirfiles import exists_in, read_in, read_lines_in
from engine.core._errors import ScenarioError
from engine.core._records import EpisodeRecord
from engine.report._page import render_episode_page
from engine.report._rebuild import REPORT_HTML, write_report
from engine.runtime._modes import mode_of
from engine.runtime._plugins import SUMMARIZERS
from engine.runtime._rundir import EPISODES, SUMMARY, RunDir
from engine.tools._http11 import Connection, HttpError, LoopbackListener, Request, encode_head, linger_close

__all__ = ("ReportServer", "serve_report")

_EPISODE = re.compile(r"^/episodes/(\d{1,12})\.html$")  # longer numbers name no line
_TEXT = "text/plain; charset=utf-8"
_HTML = "text/html; charset=utf-8"


class ReportServer(LoopbackListener):
    """A loopback HTTP server for one run directory, on the same HTTP/1.1 layer as `simrun serve`.

    Constructing it reads the run (and rebuilds a missing report); the port is bound on `async with`.
    """

    def __init__(self, run_dir: Path, port: int = 0) -> None:
        self.run = RunDir(run_dir)
        self.manifest = self.run.read_manifest()
        mode = mode_of(self.manifest)  # a run mode's run: one page, no episodes
        if not exists_in(run_dir, REPORT_HTML) or not exists_in(run_dir, SUMMARY):
            if mode is not None:
                mode.rebuild(self.run)
            else:
                write_report(self.run)
        try:
            self.summary: dict[str, Any] = orjson.loads(read_in(run_dir, SUMMARY))
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
        super().__init__(port=port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    async def converse(self, conn: Connection) -> None:
        while True:
            try:
                request = await conn.read_request()
            except HttpError as err:
                await conn.send(_response(err.status, f"{err.message}\n".encode(), _TEXT, keep_alive=False))
                await linger_close(conn.stream)
                return
            if request is None:
                return
            status, body, content_type = await self._answer(request)
            await conn.send(_response(status, body, content_type, keep_alive=request.keep_alive))
            if not request.keep_alive:
                await linger_close(conn.stream)
                return

    async def _answer(self, request: Request) -> tuple[int, bytes, str]:
        if request.method != "GET":
            return HTTPStatus.NOT_IMPLEMENTED, b"unsupported method\n", _TEXT
        if request.headers.get("host", "").lower() not in (f"127.0.0.1:{self.port}", f"localhost:{self.port}"):
            return HTTPStatus.MISDIRECTED_REQUEST, b"this server answers only http://127.0.0.1:PORT/\n", _TEXT
        try:
            if request.path in ("/", "/report.html"):
                return HTTPStatus.OK, await anyio.to_thread.run_sync(read_in, self.run.path, REPORT_HTML), _HTML
            match = _EPISODE.match(request.path)
            page = await anyio.to_thread.run_sync(self.episode_page, int(match.group(1))) if match else None
        except (ScenarioError, OSError, ValidationError) as exc:  # the directory changed while it is served
            problem = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            return HTTPStatus.INTERNAL_SERVER_ERROR, f"the run directory is damaged: {problem}\n".encode(), _TEXT
        if page is None:
            return HTTPStatus.NOT_FOUND, b"not found\n", _TEXT
        return HTTPStatus.OK, page.encode("utf-8"), _HTML

    def episode_page(self, line: int) -> str | None:
        """The episode on line `line` (1-based) of episodes.jsonl as a page, or None when there is none."""
        record = self._record(line) if self.summarizer is not None else None
        if record is None:
            return None
        return render_episode_page(record, line, self.summary, self.manifest, self.summarizer)

    def _record(self, line: int) -> EpisodeRecord | None:
        if line not in self._lines:
            return None
        with self._lock, contextlib.closing(read_lines_in(self.run.path, EPISODES)) as lines:
            for number, raw in enumerate(lines, 1):
                if number == line:
                    return EpisodeRecord.model_validate_json(raw) if raw.endswith(b"\n") else None
        return None


def _response(status: int, body: bytes, content_type: str, *, keep_alive: bool) -> bytes:
    headers = {"content-type": content_type, "content-length": str(len(body)), "cache-control": "no-store"}
    return encode_head(status, headers, keep_alive) + body


@contextmanager
def serve_report(run_dir: Path, port: int = 0) -> Iterator[ReportServer]:
    """Serve from a background event loop for the duration of the block (tests, and tools embedding simrun)."""
    server = ReportServer(run_dir, port)
    with anyio.from_thread.start_blocking_portal() as portal, portal.wrap_async_context_manager(server):
        yield server
