"""The response cache: a re-run of a finished scenario answers every model call from disk, at no cost.

Researchers pay for every call, and a crash, a tweak to a judge or a second look at a run should not pay again.
The cache is opt-in (`--cache`, `--cache-path`, or `cache: true` / `cache: path` in the scenario) and lives in
one SQLite file (default `$XDG_CACHE_HOME/simrun/responses.sqlite3`, else `~/.cache/simrun/...`).

**What a key is.** `cache_key` hashes (sha256) a canonical JSON (orjson, sorted keys) of everything that decides
a reply: the provider, the model name, the base URL, the messages, the merged generation parameters, the
`json_output` flag and the response schema (when one is asked for), the request seed, and the engine-side
`RequestContext` (role, task, item, condition, data).

* The *seed* stands for the replicate index and the call's place in the episode. Every built-in agent and judge
  passes `seed=ctx.episode.seed_for(...)`, derived from the run seed, the episode id (which ends in
  `r<replicate>`) and the call (role, turn, vote, attempt). So replicates never collapse into one entry, two
  calls of one episode never share one, and a re-run of the same scenario asks exactly the same keys again.
  `ModelClient.complete` therefore needs no replicate argument, and agents and judges are unchanged.
  The contract for third-party agents: derive the seed from `ctx.episode.seed_for(...)`; a constant seed makes
  identical requests share one answer. `cache_key(..., replicate=N)` adds the index explicitly for callers
  outside the engine whose seeds do not already distinguish replicates.
* The *episode seed itself* is not a field: only the request seed, which already derives from it.
* The *context* is never sent to a real endpoint, but the `sim` provider answers from it, and paired episodes
  (a design's paired factors) share their seed: keying on it keeps two calls that differ only there apart.
  On a re-run it is identical, so it costs no hits. A context that cannot be encoded makes the call uncacheable
  (`TypeError`), never a guessed key.
* Not keyed: the API key variable, timeouts, retries and rate limits (they change no reply).

**What is stored.** Only successful replies (text, usage, model): `put` takes a `ChatReply`, and `ModelClient`
calls it only after the model answered, so an error is never replayed. Identical keys asked twice in one run
keep the first answer (`INSERT OR IGNORE`).

**Concurrency.** Several processes may share one file: WAL mode (readers never block the writer),
`busy_timeout`, autocommit single-statement transactions and `INSERT OR IGNORE`, so concurrent writers of the
same key cannot conflict. In one process there is one connection guarded by a `threading.Lock` (rather than one
connection per thread: anyio's worker threads come and go, and a single connection can be closed
deterministically by `close()`). Every async method runs its SQLite work in a worker thread
(`anyio.to_thread.run_sync`), so the event loop never blocks; the work is microseconds, so the lock is not a
bottleneck. `stats()`, `clear()` and `close()` are synchronous, for the command line.

**Failures.** A cache that cannot be opened is a `CacheError` (a `ScenarioError`: exit code 2, before the run
starts). Once open, a failing read is a miss and a failing write is skipped, each logged as `cache.error`: the
cache may cost a call, but it never turns a good reply into an error record.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import anyio
import orjson
from pydantic import BaseModel, ValidationError

from engine.core._errors import ScenarioError
from engine.core._events import HOST_LOG
from engine.core._records import Usage
from engine.models._provider import ChatReply, ChatRequest, RequestContext
from engine.scenario._spec import ModelSpec, Scenario

__all__ = (
    "KEY_VERSION",
    "CacheError",
    "ResponseCache",
    "cache_key",
    "default_cache_path",
    "resolve_cache_path",
)

log = HOST_LOG

KEY_VERSION = 1
"""Part of every key: bumping it retires all earlier entries instead of misreading them."""

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    model TEXT NOT NULL,
    usage TEXT NOT NULL,
    created_at REAL NOT NULL
) WITHOUT ROWID
"""
_T = TypeVar("_T")


class CacheError(ScenarioError):
    """The cache file cannot be opened or is not a simrun cache (a user error: exit code 2)."""


def default_cache_path() -> Path:
    """`$XDG_CACHE_HOME/simrun/responses.sqlite3` (an absolute XDG_CACHE_HOME only), else `~/.cache/simrun/...`."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return root / "simrun" / "responses.sqlite3"


def _encode_default(value: object) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"cannot key a {type(value).__name__}")


def _context(context: RequestContext) -> dict[str, Any]:
    return {
        "role": context.role,
        "task": context.task,
        "item": context.item.model_dump(mode="json") if context.item is not None else None,
        "condition": dict(context.condition),
        "data": dict(context.data),
    }


def cache_key(spec: ModelSpec, request: ChatRequest, replicate: int | None = None) -> str:
    """The sha256 hex key of one call (see the module docstring for what is keyed and why).

    Raises `TypeError` if the request holds a value with no canonical JSON form (the call is then not cached).
    """
    material: dict[str, Any] = {
        "v": KEY_VERSION,
        "provider": spec.provider,
        "model": spec.name,
        "base_url": spec.base_url.rstrip("/") if spec.base_url else None,
        "messages": [dict(message) for message in request.messages],
        "params": dict(request.params),
        "json_output": request.json_output,
        "seed": request.seed,
        "context": _context(request.context),
    }
    if request.response_schema is not None:  # only when asked for, so the keys of other calls stay as they were
        material["response_schema"] = dict(request.response_schema)
    if replicate is not None:
        material["replicate"] = replicate
    encoded = orjson.dumps(material, option=orjson.OPT_SORT_KEYS, default=_encode_default)
    return hashlib.sha256(encoded).hexdigest()


def resolve_cache_path(setting: Path | str | bool | None, scenario: Scenario, *, check: bool = True) -> Path | None:
    """The cache file a run uses, or None when caching is off.

    `setting` is the Runner's (the command line's) choice and wins over the scenario's `cache` key: None leaves
    it to the scenario, False turns caching off, True turns it on (at the scenario's path if it names one, else
    the default), and a path names the file (relative to the working directory). A path in the scenario is
    relative to the scenario's folder. With `check`, the file is opened once so that a bad path is a
    `CacheError` before the run starts.
    """
    path: Path | None
    if setting is False:
        path = None
    elif isinstance(setting, str | Path):
        path = Path(setting).expanduser()
    elif isinstance(scenario.cache, str):
        path = scenario.base_dir / Path(scenario.cache).expanduser()
    elif setting is True or scenario.cache is True:
        path = default_cache_path()
    else:
        path = None
    if path is not None and check:
        ResponseCache(path).close()
    return path


class ResponseCache:
    """Successful replies by `cache_key`, in one SQLite file shared safely by threads and processes.

    The constructor opens (and if needed creates) the file, so it does blocking I/O: from async code use
    `await ResponseCache.open(path)`, and `await cache.aclose()` at the end. `get`/`put` are async (their SQLite
    work runs in a worker thread); `get_sync`/`put_sync`, `stats`, `clear` and `close` are for synchronous code.
    """

    def __init__(self, path: Path | str | None = None, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path).expanduser() if path is not None else default_cache_path()
        self.hits = 0
        self.misses = 0
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = self._connect()

    @classmethod
    async def open(cls, path: Path | str | None = None, *, busy_timeout_s: float = 30.0) -> ResponseCache:
        """Open the cache in a worker thread (file creation and schema set-up are blocking I/O)."""
        cache = await anyio.to_thread.run_sync(lambda: cls(path, busy_timeout_s=busy_timeout_s))
        log.info("cache.opened", path=str(cache.path))
        return cache

    # -- async API ----------------------------------------------------------------------------------------------

    async def get(self, key: str) -> ChatReply | None:
        """The stored reply for `key`, or None (a miss)."""
        return await anyio.to_thread.run_sync(self.get_sync, key)

    async def put(self, key: str, reply: ChatReply) -> None:
        """Store a successful reply; a key already present keeps its first reply."""
        await anyio.to_thread.run_sync(self.put_sync, key, reply)

    async def aclose(self) -> None:
        """`close()` in a worker thread, shielded so that a cancelled run still releases the file."""
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.close)

    # -- sync API -----------------------------------------------------------------------------------------------

    def get_sync(self, key: str) -> ChatReply | None:
        row = self._guarded("get", lambda conn: conn.execute(_GET, (key,)).fetchone())
        reply: ChatReply | None = None
        if row is not None:
            try:
                reply = ChatReply(text=row[0], usage=Usage.model_validate(orjson.loads(row[2])), model=row[1])
            except (orjson.JSONDecodeError, ValidationError) as exc:
                log.warning("cache.error", op="decode", path=str(self.path), error=str(exc)[:200])
        with self._lock:
            if reply is None:
                self.misses += 1
            else:
                self.hits += 1
        return reply

    def put_sync(self, key: str, reply: ChatReply) -> None:
        values = (key, reply.text, reply.model, orjson.dumps(reply.usage.model_dump()).decode(), time.time())
        self._guarded("put", lambda conn: conn.execute(_PUT, values))

    def stats(self) -> dict[str, Any]:
        """Entries, bytes on disk (database and WAL), and the hits and misses counted in this process."""
        with self._lock:
            conn = self._open_connection()
            entries = int(conn.execute("SELECT count(*) FROM responses").fetchone()[0])
            by_model = {str(m): int(n) for m, n in conn.execute(_BY_MODEL)}
            hits, misses = self.hits, self.misses
        size = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        return {
            "path": str(self.path),
            "entries": entries,
            "bytes": size,
            "hits": hits,
            "misses": misses,
            "by_model": by_model,
        }

    def clear(self) -> int:
        """Delete every entry (other processes see an empty cache at once); returns how many were removed."""
        with self._lock:
            conn = self._open_connection()
            removed = conn.execute("DELETE FROM responses").rowcount
            try:  # give the space back; skipped, harmlessly, while another process holds the file busy
                conn.execute("VACUUM")
            except sqlite3.OperationalError as exc:
                log.warning("cache.error", op="vacuum", path=str(self.path), error=str(exc))
        return int(removed)

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise `RuntimeError`."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @property
    def closed(self) -> bool:
        return self._conn is None

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> ResponseCache:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"

    # -- internals ----------------------------------------------------------------------------------------------

    def _open_connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"the response cache {self.path} is closed")
        return self._conn

    def _guarded(self, op: str, work: Callable[[sqlite3.Connection], _T]) -> _T | None:
        """Run `work` under the lock; a SQLite failure is logged and becomes None (a miss, a skipped write)."""
        with self._lock:
            conn = self._open_connection()
            try:
                return work(conn)
            except sqlite3.Error as exc:
                log.warning("cache.error", op=op, path=str(self.path), error=str(exc))
                return None

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: autocommit, so every statement is its own short transaction.
            conn = sqlite3.connect(
                self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(f"cannot open the response cache {self.path}: {exc}") from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > _SCHEMA_VERSION:
                raise CacheError(f"the response cache {self.path} was written by a newer simrun (schema {version})")
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                mode = self._retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
                if str(mode).lower() != "wal":
                    raise CacheError(f"the response cache {self.path} cannot use WAL mode (journal mode {mode})")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: durable enough for a cache, no fsync per put
            conn.execute(_SCHEMA)
            if version < _SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            conn.close()
            raise CacheError(f"cannot use {self.path} as a response cache: {exc}") from None
        except CacheError:
            conn.close()
            raise
        return conn

    def _retry_busy(self, work: Callable[[], _T]) -> _T:
        """Switching to WAL may report `database is locked` at once, without waiting: retry until the timeout."""
        deadline = time.monotonic() + self._busy_timeout_s
        while True:
            try:
                return work()
            except sqlite3.OperationalError as exc:
                transient = "locked" in str(exc) or "busy" in str(exc)
                if not transient or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)


_GET = "SELECT text, model, usage FROM responses WHERE key = ?"
_PUT = "INSERT OR IGNORE INTO responses (key, text, model, usage, created_at) VALUES (?, ?, ?, ?, ?)"
_BY_MODEL = "SELECT model, count(*) FROM responses GROUP BY model ORDER BY model"
