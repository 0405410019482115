"""The run directory contract: manifest.json, episodes.jsonl (append-only), events.jsonl, summary.json, report.md."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import orjson
from pydantic import ValidationError

from .errors import ScenarioError
from .records import EpisodeRecord
from .spec import Scenario, measured

__all__ = ("RunDir", "utc_now")

MANIFEST = "manifest.json"
EPISODES = "episodes.jsonl"
EVENTS = "events.jsonl"
SUMMARY = "summary.json"
REPORT = "report.md"


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class RunDir:
    """One run's folder. Records are appended as episodes finish and never rewritten."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._episodes: BinaryIO | None = None
        self._lock: anyio.Lock | None = None

    @property
    def episodes_path(self) -> Path:
        return self.path / EPISODES

    @property
    def events_path(self) -> Path:
        return self.path / EVENTS

    @classmethod
    def create(cls, out: Path, name: str) -> RunDir:
        """A new, empty run folder `out/<name>-<UTC time>`; `out` is only ever a parent of run folders."""
        if (out / MANIFEST).exists():
            raise ScenarioError(f"{out} is itself a run directory: pass --resume {out}, or another --out")
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S-%f")
        path = out / f"{name}-{stamp}"
        try:
            path.mkdir(parents=True, exist_ok=False)
        except OSError as exc:
            raise ScenarioError(f"cannot create the run directory {path}: {exc.strerror or exc}") from None
        return cls(path)

    @classmethod
    def for_resume(cls, path: Path, scenario: Scenario) -> RunDir:
        """Reopen a run whose scenario hash matches; a torn last line left by a crash is cut off."""
        run = cls(path)
        manifest = run.read_manifest()
        if manifest.get("scenario_hash") != scenario.content_hash():
            previous = manifest.get("scenario")
            changed = _changed_keys(
                measured(previous) if isinstance(previous, dict) else {}, measured(scenario.resolved())
            )
            raise ScenarioError(
                f"cannot resume {path}: the scenario differs from the one it was started with "
                f"(changed: {', '.join(changed) or 'unknown'})"
            )
        run.repair()
        return run

    def read_manifest(self) -> dict[str, Any]:
        try:
            data = orjson.loads((self.path / MANIFEST).read_bytes())
        except FileNotFoundError:
            raise ScenarioError(f"{self.path}: not a run directory (no {MANIFEST})") from None
        except orjson.JSONDecodeError:
            raise ScenarioError(f"{self.path / MANIFEST}: unreadable manifest") from None
        if not isinstance(data, dict):
            raise ScenarioError(f"{self.path / MANIFEST}: unreadable manifest")
        return data

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Atomic replace: a crash leaves the old manifest or the new one, never half of one."""
        tmp = self.path / f".{MANIFEST}.tmp"
        tmp.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        os.replace(tmp, self.path / MANIFEST)

    def repair(self) -> int:
        """Cut a torn (unterminated) last line; returns the bytes removed."""
        path = self.episodes_path
        if not path.exists():
            return 0
        data = path.read_bytes()
        keep = data.rfind(b"\n") + 1
        if keep < len(data):
            with path.open("r+b") as handle:
                handle.truncate(keep)
        return len(data) - keep

    def iter_records(self) -> Iterator[EpisodeRecord]:
        if not self.episodes_path.exists():
            return
        with self.episodes_path.open("rb") as handle:
            for number, line in enumerate(handle, 1):
                if not line.endswith(b"\n"):
                    break  # torn by a crash; `repair` removes it before a resume
                try:
                    yield EpisodeRecord.model_validate_json(line)
                except ValidationError as exc:
                    raise ScenarioError(f"{self.episodes_path}:{number}: invalid record: {exc}") from None

    def finished_ids(self) -> set[str]:
        return {record.id for record in self.iter_records()}

    async def append(self, record: EpisodeRecord) -> None:
        """Append one record as a whole line and flush it; shielded so cancellation cannot tear it."""
        line = orjson.dumps(record.model_dump(mode="json", exclude_none=False)) + b"\n"
        if self._lock is None:
            self._lock = anyio.Lock()
        with anyio.CancelScope(shield=True):
            async with self._lock:
                await anyio.to_thread.run_sync(self._write, line)

    def _write(self, line: bytes) -> None:
        if self._episodes is None:
            self._episodes = self.episodes_path.open("ab")
        self._episodes.write(line)
        self._episodes.flush()

    def close(self) -> None:
        if self._episodes is not None:
            self._episodes.close()
            self._episodes = None

    def write_text(self, name: str, text: str) -> None:
        (self.path / name).write_text(text, encoding="utf-8")

    def write_json(self, name: str, data: Any) -> None:
        (self.path / name).write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))


def _changed_keys(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        changed: list[str] = []
        for key in sorted(set(old) | set(new)):
            changed.extend(_changed_keys(old.get(key), new.get(key), f"{prefix}{key}."))
        return changed
    return [] if old == new else [prefix.rstrip(".")]
