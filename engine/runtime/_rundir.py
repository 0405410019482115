"""The run directory contract: manifest.json, plan.json, episodes.jsonl (append-only), events.jsonl, summary.json,
report.md, and `.lock`, held by the one process writing the directory.

Records are only ever appended. An episode run again (`--resume --retry-errors`) appends a newer record that
supersedes the older one, so every reader takes `RunDir.current_records`: the last record of each planned id,
in plan order, refusing records another scenario wrote and setting aside ids outside the plan.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import socket
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import anyio
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.core._dirfiles import exists_in, open_append_in, open_in, read_in, read_lines_in, write_in
from engine.core._errors import ScenarioError
from engine.core._records import EpisodeRecord
from engine.scenario._spec import Scenario, measured

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, a second writer is not detected
    fcntl = None  # type: ignore[assignment]

__all__ = ("CurrentRecords", "RunDir", "plan_hash", "stored_hash", "utc_now")

MANIFEST = "manifest.json"
PLAN = "plan.json"
EPISODES = "episodes.jsonl"
EVENTS = "events.jsonl"
SUMMARY = "summary.json"
REPORT = "report.md"
LOCK = ".lock"


class _Counts(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    planned: int | None = None
    ok: int | None = None
    error: int | None = None


_Tokens = Annotated[list[int], Field(min_length=2, max_length=2)]
"""[prompt, completion]"""


class _Calls(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries_by_kind: dict[str, int] = {}
    failures_by_kind: dict[str, int] = {}
    tokens_by_model: dict[str, _Tokens] = {}
    tokens_by_role: dict[str, dict[str, _Tokens]] = {}


class _Manifest(BaseModel):
    """The fields readers rely on, type-checked so a damaged manifest is a message, not a traceback."""

    model_config = ConfigDict(extra="allow", strict=True)
    kind: str | None = None
    status: str | None = None
    scenario: dict[str, Any] | None = None
    scenario_hash: str | None = None
    stored_scenario_hash: str | None = None
    plan_hash: str | None = None
    seed: int | None = None
    started_at: str | None = None
    counts: _Counts | None = None
    calls: _Calls | None = None
    models: dict[str, Any] | None = None
    providers: list[str] | None = None


def plan_hash(ids: Sequence[str]) -> str:
    """Identity of a plan: its episode ids in order."""
    return hashlib.sha256(orjson.dumps(list(ids))).hexdigest()


@dataclass
class CurrentRecords:
    """What a run directory's records say now: the last record of each planned id, in plan order."""

    records: list[EpisodeRecord]
    lines: list[int]
    """The line of episodes.jsonl each record is on (1-based), for links to a single episode."""
    superseded: int = 0
    """Older records of an id that a newer one replaced (errors retried by `--resume --retry-errors`)."""
    outside_plan: list[str] = field(default_factory=list)
    """Ids of records whose episode is not in the plan: set aside, never counted."""

    @property
    def warnings(self) -> list[str]:
        if not self.outside_plan:
            return []
        shown = ", ".join(self.outside_plan[:5]) + (", …" if len(self.outside_plan) > 5 else "")
        return [f"ignored {len(self.outside_plan)} record(s) whose episode is not in the run's plan: {shown}"]


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class RunDir:
    """One run's folder. Records are appended as episodes finish and never rewritten."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._episodes: BinaryIO | None = None
        self._lock: anyio.Lock | None = None
        self._held: BinaryIO | None = None

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
        """Reopen (and lock) a run whose scenario hash matches; a torn last line left by a crash is cut off."""
        run = cls(path)
        manifest = run.read_manifest()
        from engine.runtime._modes import mode_of  # modes read run directories: imported here, not at module level

        mode = mode_of(manifest)
        if mode is not None:
            raise ScenarioError(
                f"cannot resume {path}: it is the run directory of {mode.noun} (`{mode.command}` writes it)"
            )
        if manifest.get("scenario_hash") != scenario.content_hash():
            previous = manifest.get("scenario")
            changed = _changed_keys(
                measured(previous) if isinstance(previous, dict) else {}, measured(scenario.resolved())
            )
            raise ScenarioError(
                f"cannot resume {path}: the scenario differs from the one it was started with "
                f"(changed: {', '.join(changed) or 'unknown'})"
            )
        run.acquire("resume")
        try:
            run.repair()
        except BaseException:
            run.release()
            raise
        return run

    def read_manifest(self) -> dict[str, Any]:
        """The manifest as data, its known fields type-checked (`ScenarioError` when damaged)."""
        path = self.path / MANIFEST
        try:
            data = orjson.loads(read_in(self.path, MANIFEST))
        except FileNotFoundError:
            raise ScenarioError(f"{self.path}: not a run directory (no {MANIFEST})") from None
        except orjson.JSONDecodeError:
            raise ScenarioError(f"{path}: unreadable manifest") from None
        if not isinstance(data, dict):
            raise ScenarioError(f"{path}: unreadable manifest")
        try:
            _Manifest.model_validate(data)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(map(str, problem["loc"]))
            raise ScenarioError(f"{path}: damaged manifest: {where}: {problem['msg']}") from None
        _check_stored_scenario(path, data)
        return data

    def write_plan(self, ids: Sequence[str]) -> str:
        """Write plan.json once (atomically); returns the plan's hash, which the manifest keeps."""
        write_in(self.path, PLAN, orjson.dumps({"ids": list(ids)}))
        return plan_hash(ids)

    def read_plan(self, manifest: dict[str, Any] | None = None) -> list[str] | None:
        """The planned ids, checked against the manifest; None for a run written before plans were kept."""
        manifest = manifest if manifest is not None else self.read_manifest()
        path = self.path / PLAN
        if not exists_in(self.path, PLAN):
            if manifest.get("plan_hash"):
                raise ScenarioError(f"{self.path}: {PLAN} is missing (the manifest names a plan)")
            return None
        try:
            data = orjson.loads(read_in(self.path, PLAN))
            ids = data["ids"]
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise TypeError
        except (OSError, orjson.JSONDecodeError, TypeError, KeyError):
            raise ScenarioError(f"{path}: unreadable plan") from None
        wanted = manifest.get("plan_hash")
        if wanted is not None and wanted != plan_hash(ids):
            raise ScenarioError(f"{path} is not the plan manifest.json was written with (plan hashes differ)")
        planned = (manifest.get("counts") or {}).get("planned")
        if planned is not None and planned != len(ids):
            raise ScenarioError(f"{self.path}: manifest.json plans {planned} episodes, {PLAN} {len(ids)}")
        return ids

    def current_records(
        self, plan: Sequence[str] | None = None, *, manifest: dict[str, Any] | None = None
    ) -> CurrentRecords:
        """The last record of each planned id, in plan order (see the module docstring).

        `plan` defaults to plan.json. Raises `ScenarioError` when a record was written by another scenario
        than the manifest's, or episodes.jsonl cannot be read.
        """
        manifest = manifest if manifest is not None else self.read_manifest()
        wanted = manifest.get("scenario_hash")
        latest: dict[str, tuple[int, EpisodeRecord]] = {}
        total = 0
        for line, record in self.iter_numbered():
            if record.scenario_hash is not None and wanted is not None and record.scenario_hash != wanted:
                raise ScenarioError(
                    f"{self.episodes_path}:{line}: written by another scenario (hash {record.scenario_hash[:12]}) "
                    f"than manifest.json's ({str(wanted)[:12]}): this directory mixes two runs"
                )
            latest[record.id] = (line, record)
            total += 1
        ids = list(plan) if plan is not None else self.read_plan(manifest)
        order = ids if ids is not None else list(latest)
        planned = set(order)
        kept = [latest[i] for i in order if i in latest]
        return CurrentRecords(
            records=[record for _, record in kept],
            lines=[line for line, _ in kept],
            superseded=total - len(latest),
            outside_plan=[i for i in latest if i not in planned],
        )

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Atomic replace: a crash leaves the old manifest or the new one, never half of one."""
        write_in(self.path, MANIFEST, orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))

    def acquire(self, command: str) -> None:
        """Hold the directory's exclusive lock until `release` (or the process ends, however it ends).

        Raises `ScenarioError` naming the holder when another process has it.
        """
        if self._held is not None or fcntl is None:
            return
        try:
            handle = os.fdopen(open_in(self.path, LOCK, os.O_RDWR | os.O_CREAT, single_link=True), "r+b")
        except OSError as exc:
            raise ScenarioError(f"cannot write to the run directory {self.path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read(512).decode("utf-8", "replace").strip() or "another process"
            handle.close()
            raise ScenarioError(
                f"{self.path} is in use by {holder}: one process at a time may write a run directory; "
                "wait for it to end (or stop it), then try again"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"simrun {command} (pid {os.getpid()} on {socket.gethostname()}, since {utc_now()})".encode())
        handle.flush()
        self._held = handle
        self._unlock = weakref.finalize(self, handle.close)  # a RunDir dropped unreleased still lets go

    def release(self) -> None:
        if self._held is not None:
            self._unlock()  # closing the file drops the lock
            self._held = None

    def repair(self) -> int:
        """Cut a torn (unterminated) last line; returns the bytes removed."""
        try:
            fd = open_in(self.path, EPISODES, os.O_RDWR, single_link=True)
        except FileNotFoundError:
            return 0
        with os.fdopen(fd, "r+b") as handle:
            size = end = os.fstat(fd).st_size
            while end > 0:  # from the end backwards: the file may be far larger than memory
                start = max(0, end - 65536)
                handle.seek(start)
                found = handle.read(end - start).rfind(b"\n")
                if found >= 0:
                    end = start + found + 1
                    break
                end = start
            if end < size:
                handle.truncate(end)
        return size - end

    def iter_records(self) -> Iterator[EpisodeRecord]:
        """Every record in file order, superseded ones included (readers want `current_records`)."""
        for _, record in self.iter_numbered():
            yield record

    def iter_numbered(self) -> Iterator[tuple[int, EpisodeRecord]]:
        path = self.episodes_path
        try:
            lines = read_lines_in(self.path, EPISODES)
            first = next(lines, None)
        except FileNotFoundError:
            return
        if first is None:
            return
        with contextlib.closing(lines):
            for number, line in enumerate(itertools.chain([first], lines), 1):
                if not line.endswith(b"\n"):
                    break  # torn by a crash; `repair` removes it before a resume
                try:
                    yield number, EpisodeRecord.model_validate_json(line)
                except ValidationError as exc:
                    problem = exc.errors()[0]
                    where = ".".join(map(str, problem["loc"])) or "line"
                    raise ScenarioError(f"{path}:{number}: not a valid record ({where}: {problem['msg']})") from None

    def finished_ids(self) -> set[str]:
        return {record.id for record in self.iter_records()}

    async def append(self, record: EpisodeRecord) -> None:
        """Append one record as a whole line and flush it; shielded so cancellation cannot tear it."""
        unset = {"tutor"} if record.tutor is None else None  # a one-tutor run's lines stay as they were
        line = orjson.dumps(record.model_dump(mode="json", exclude_none=False, exclude=unset)) + b"\n"
        if self._lock is None:
            self._lock = anyio.Lock()
        with anyio.CancelScope(shield=True):
            async with self._lock:
                await anyio.to_thread.run_sync(self._write, line)

    def _write(self, line: bytes) -> None:
        if self._episodes is None:
            self._episodes = open_append_in(self.path, EPISODES)
        self._episodes.write(line)
        self._episodes.flush()

    def close(self) -> None:
        if self._episodes is not None:
            self._episodes.close()
            self._episodes = None

    def write_text(self, name: str, text: str) -> None:
        write_in(self.path, name, text.encode("utf-8"))

    def write_json(self, name: str, data: Any) -> None:
        write_in(self.path, name, orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))


def _check_stored_scenario(path: Path, manifest: dict[str, Any]) -> None:
    """The stored scenario must be the one its hash names: a swapped scenario would be reported (or resumed)
    under another's identity. A scenario stored with a secret redacted is checked by `stored_scenario_hash`."""
    scenario, wanted = manifest.get("scenario"), manifest.get("scenario_hash")
    if scenario is None or wanted is None:
        return
    try:
        found = stored_hash(scenario)
    except (TypeError, ValueError, AttributeError, orjson.JSONEncodeError):
        found = None
    if "stored_scenario_hash" not in manifest and "[redacted]" in str(scenario):
        return  # written before the stored form had its own hash: a redacted scenario cannot be re-hashed
    if found not in (wanted, manifest.get("stored_scenario_hash")):
        raise ScenarioError(f"{path}: damaged manifest: the stored scenario does not match scenario_hash")


def stored_hash(scenario: dict[str, Any]) -> str:
    """`Scenario.content_hash` of a scenario as stored in a manifest (plain data)."""
    return hashlib.sha256(orjson.dumps(measured(scenario), option=orjson.OPT_SORT_KEYS)).hexdigest()


def _changed_keys(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        changed: list[str] = []
        for key in sorted(set(old) | set(new)):
            changed.extend(_changed_keys(old.get(key), new.get(key), f"{prefix}{key}."))
        return changed
    return [] if old == new else [prefix.rstrip(".")]
