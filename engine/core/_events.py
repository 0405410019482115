"""Events: every run writes its own events.jsonl; the host's structlog configuration sees the same events.

A run directory must be complete whoever starts the run, so the runner owns a private JSON-lines logger for
its events.jsonl and configures nothing global. Each event is also sent to structlog's global logger, which
an embedding tool configures as it likes; the command line configures it to echo warnings on the console.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import parse_qsl, unquote, urlsplit

import orjson
import structlog
from rich.console import Console
from rich.text import Text
from structlog.typing import EventDict, WrappedLogger

from engine.core._dirfiles import open_append_in

__all__ = (
    "HOST_LOG",
    "Redactor",
    "RunEvents",
    "WarningGate",
    "configure_console_logging",
    "redact",
    "redact_url",
    "url_secrets",
)

_REDACTED = "[redacted]"
_BASE64 = (base64.b64encode, base64.urlsafe_b64encode)
_MIN_SECRET = 6
_SECRET_QUERY = re.compile(r"key|token|secret|sig|password|passwd|pwd|auth|credential|session", re.IGNORECASE)


def url_secrets(url: str) -> list[str]:
    """The secret parts of a URL: a userinfo password, and values of query parameters named like a credential."""
    try:
        parts = urlsplit(url)
        found = [parts.password, unquote(parts.password)] if parts.password else []
        found += [value for name, value in parse_qsl(parts.query) if _SECRET_QUERY.search(name)]
    except ValueError:
        return []
    return [value for value in found if len(value) >= 4]


def _basic_credentials(url: str) -> list[str]:
    """`user:password` of a URL's userinfo, as an HTTP client sends it (base64 in `Authorization: Basic`)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    if not parts.password:
        return []
    return [f"{unquote(parts.username or '')}:{unquote(parts.password)}", f"{parts.username or ''}:{parts.password}"]


def _encoded(value: str) -> str:
    """A pattern of `value` in any percent-encoding: each character itself or its UTF-8 bytes as `%hh` in
    either case (a space also as `+`), so `%2f`, `%2F` and a needlessly encoded `%61` all match."""
    parts = []
    for char in value:
        escaped = "".join(f"%{_hex(b >> 4)}{_hex(b & 15)}" for b in char.encode())
        options = [re.escape(char), escaped] + (["\\+"] if char == " " else [])
        parts.append(f"(?:{'|'.join(options)})")
    return "".join(parts)


def _base64_forms(raw: bytes) -> set[str]:
    """The base64 text that encodes `raw` wherever it sits in a longer value (`user:key` in a Basic
    `Authorization` header, whatever the user): for each of the three alignments, the characters that depend
    on `raw` alone."""
    found = set()
    for encode in _BASE64:
        for shift in range(3):
            text = encode(b"\0" * shift + raw).decode()
            middle = text[4 if shift else 0 : (shift + len(raw)) // 3 * 4]
            if len(middle) >= 4:
                found.add(middle)
    return found


def _hex(digit: int) -> str:
    upper = f"{digit:X}"
    return upper if upper.isdigit() else f"[{upper}{upper.lower()}]"


def _forms(value: str) -> list[str]:
    """Regular expressions for `value` as it may be written anywhere: raw, percent-encoded in any case, and
    JSON-escaped (a key with a quote, a backslash, a control or non-ASCII character is stored escaped)."""
    escaped = {orjson.dumps(value).decode()[1:-1], json.dumps(value)[1:-1]} - {value}
    return [_encoded(value), *map(re.escape, escaped)]


def redact_url(url: str) -> str:
    """`url` fit to print or store: a userinfo password and credential-like query values replaced."""
    return Redactor(urls=[url]).text(url)


class Redactor:
    """Replaces secrets (API keys, credentials inside a base URL) in everything a run writes or prints.

    A key may come back in an endpoint's reply, in an error message or inside a URL, and a URL carries it
    percent-encoded (in either case), in JSON escaped, and as HTTP basic credentials in base64, so each secret
    is searched in every one of those forms.
    """

    def __init__(self, secrets: Iterable[str] = (), urls: Iterable[str | None] = ()) -> None:
        values = {secret for secret in secrets if len(secret) >= _MIN_SECRET}
        basics: set[str] = set()
        for url in urls:
            if url:
                values.update(url_secrets(url))
                basics.update(_basic_credentials(url))
        forms = {form for value in values for form in _forms(value)}
        forms.update(re.escape(form) for value in values | basics for form in _base64_forms(value.encode()))
        forms.update(re.escape(encode(basic.encode()).decode()) for basic in basics for encode in _BASE64)
        ordered = sorted(forms, key=len, reverse=True)  # the longest form first: no half-redacted leftovers
        self._pattern = re.compile("|".join(ordered)) if ordered else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, value: str) -> str:
        return self._pattern.sub(_REDACTED, value) if self._pattern is not None else value

    def data(self, value: Any) -> Any:
        """`value` (JSON-like data) with every string redacted."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value


def redact(secrets: Sequence[str] | Redactor) -> structlog.typing.Processor:
    """A processor that replaces any secret value (an API key) wherever it appears in an event."""
    redactor = secrets if isinstance(secrets, Redactor) else Redactor(secrets)

    def processor(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
        return {k: redactor.data(v) for k, v in event.items()} if redactor else event

    return processor


class WarningGate:
    """At most one console warning per key (an error kind on an endpoint) per interval; the rest are counted.

    events.jsonl keeps every line; a person watching the console needs to know that something is failing
    and how often, not thousands of identical lines.
    """

    def __init__(self, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s, self._clock = interval_s, clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def admit(self, key: str) -> int | None:
        """None to stay quiet; else how many warnings of this key were held back since the last one shown."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._held.pop(key, 0)


def _console_echo(console: Console, level: int) -> structlog.typing.Processor:
    def processor(_: WrappedLogger, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        if logging.getLevelNamesMapping().get(method.upper(), 0) >= level:
            details = " ".join(f"{k}={v}" for k, v in event.items() if k not in ("event", "level", "timestamp"))
            style = "red" if method in ("error", "critical") else "yellow"
            # Plain Text: server-supplied strings in `details` are never read as console markup.
            console.print(Text.assemble((str(event.get("event")), style), " ", details), highlight=False)
        return event

    return processor


def _drop(_: WrappedLogger, __: str, ___: EventDict) -> EventDict:
    raise structlog.DropEvent


def configure_console_logging(
    *, console: Console, secrets: Sequence[str] | Redactor = (), console_level: int = logging.WARNING
) -> None:
    """For the command line only: echo warnings and errors on `console` (events.jsonl is the run's own)."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            redact(secrets),
            _console_echo(console, console_level),
            _drop,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        cache_logger_on_first_use=False,
    )


def _ignore(*_: Any, **__: Any) -> None:
    return None


class _HostLog:
    """structlog's "simrun" logger once the host has configured structlog; until then, silence.

    Unconfigured, structlog prints every event to stdout, which would flood the output of a tool that embeds
    simrun without asking for logs. The run's own events.jsonl is written either way.
    """

    def __getattr__(self, method: str) -> Any:
        if not structlog.is_configured():
            return _ignore
        return getattr(structlog.get_logger("simrun"), method)


HOST_LOG = _HostLog()


class RunEvents:
    """A run's event log: JSON lines in its events.jsonl, and the same event to the host's structlog.

    Events are redacted before either sees them. A warning given a `gate` key reaches the host (the console)
    at most once per key and interval (see `WarningGate`); events.jsonl still gets every one.
    """

    def __init__(self, path: Path, *, secrets: Sequence[str] | Redactor = (), gate: WarningGate | None = None) -> None:
        self._redactor = secrets if isinstance(secrets, Redactor) else Redactor(secrets)
        self._gate = gate or WarningGate()
        self._file: BinaryIO = open_append_in(path.parent, path.name)
        self._own = structlog.wrap_logger(
            structlog.BytesLogger(self._file),
            processors=[
                structlog.contextvars.merge_contextvars,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.dict_tracebacks,
                redact(self._redactor),
                structlog.processors.JSONRenderer(serializer=orjson.dumps),
            ],
            wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        )
        self._host = HOST_LOG

    def info(self, event: str, **fields: Any) -> None:
        fields = self._redactor.data(fields)
        self._own.info(event, **fields)
        self._host.info(event, **fields)

    def warning(self, event: str, *, gate: str | None = None, **fields: Any) -> None:
        fields = self._redactor.data(fields)
        self._own.warning(event, **fields)
        held = self._gate.admit(f"{event} {gate}") if gate is not None else 0
        if held is None:
            return
        self._host.warning(event, **fields, **({"similar_warnings_held_back": held} if held else {}))

    def error(self, event: str, **fields: Any) -> None:
        fields = self._redactor.data(fields)
        self._own.error(event, **fields)
        self._host.error(event, **fields)

    def close(self) -> None:
        self._file.close()
