"""Events: every run writes its own events.jsonl; the host's structlog configuration sees the same events.

A run directory must be complete whoever starts the run, so the runner owns a private JSON-lines logger for
its events.jsonl and configures nothing global. Each event is also sent to structlog's global logger, which
an embedding tool configures as it likes; the command line configures it to echo warnings on the console.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import structlog
from rich.console import Console
from rich.text import Text
from structlog.typing import EventDict, WrappedLogger

__all__ = ("HOST_LOG", "RunEvents", "configure_console_logging", "redact")

_REDACTED = "[redacted]"


def redact(secrets: Sequence[str]) -> structlog.typing.Processor:
    """A processor that replaces any secret value (an API key) wherever it appears in an event."""
    values = [secret for secret in secrets if len(secret) >= 6]

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            for secret in values:
                value = value.replace(secret, _REDACTED)
            return value
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [scrub(v) for v in value]
        return value

    def processor(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
        return {k: scrub(v) for k, v in event.items()} if values else event

    return processor


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
    *, console: Console, secrets: Sequence[str] = (), console_level: int = logging.WARNING
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
    """A run's event log: JSON lines in its events.jsonl, and the same event to the host's structlog."""

    def __init__(self, path: Path, *, secrets: Sequence[str] = ()) -> None:
        self._file: BinaryIO = path.open("ab")
        self._own = structlog.wrap_logger(
            structlog.BytesLogger(self._file),
            processors=[
                structlog.contextvars.merge_contextvars,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                redact(secrets),
                structlog.processors.dict_tracebacks,
                structlog.processors.JSONRenderer(serializer=orjson.dumps),
            ],
            wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        )
        self._host = HOST_LOG

    def info(self, event: str, **fields: Any) -> None:
        self._own.info(event, **fields)
        self._host.info(event, **fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._own.warning(event, **fields)
        self._host.warning(event, **fields)

    def error(self, event: str, **fields: Any) -> None:
        self._own.error(event, **fields)
        self._host.error(event, **fields)

    def close(self) -> None:
        self._file.close()
