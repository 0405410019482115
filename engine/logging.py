"""Logging set-up for the command line only: JSON events to the run's events.jsonl, warnings on the console.

Libraries embedding simrun keep their own structlog configuration; nothing here runs on import.
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

__all__ = ("configure_logging", "redact")

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


def configure_logging(
    events: Path, *, console: Console, secrets: Sequence[str] = (), console_level: int = logging.WARNING
) -> BinaryIO:
    """Route structlog events to `events` as JSON lines and echo warnings and errors to `console`.

    Returns the open events file; the caller closes it when the run ends.
    """
    handle = events.open("ab")
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact(secrets),
        _console_echo(console, console_level),
        structlog.processors.dict_tracebacks,
        structlog.processors.JSONRenderer(serializer=orjson.dumps),
    ]
    structlog.configure(
        processors=processors,
        logger_factory=structlog.BytesLoggerFactory(file=handle),
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        cache_logger_on_first_use=False,
    )
    return handle
