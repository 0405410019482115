"""The engine's single retry layer: classify a failure, then back off with full jitter or give up.

`retrying` is the one loop chat calls (`ModelClient`) and embedding batches (`simrun embed`) run through; the load
tester, which records every attempt as its own row, loops itself but decides with `classify` and `retry_delay`.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

import anyio

from engine.core._errors import ProviderError, ProviderTimeout, QuotaExhausted, RateLimited

__all__ = ("RetryDecision", "backoff_delay", "classify", "parse_retry_after", "retry_delay", "retrying")

_RETRYABLE_STATUS = frozenset({408, 409, 429})
MAX_RETRY_AFTER_S = 120.0
_T = TypeVar("_T")


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    after: float | None = None
    """A wait the server asked for (`Retry-After`), used instead of the jittered backoff."""


def classify(exc: ProviderError) -> RetryDecision:
    """Timeouts, dropped connections, 408/409/429 and 5xx are transient; quota exhaustion and other 4xx are final."""
    if isinstance(exc, QuotaExhausted):
        return RetryDecision(False)
    if isinstance(exc, RateLimited | ProviderTimeout):
        return RetryDecision(True, exc.retry_after)
    if exc.status is None or exc.status in _RETRYABLE_STATUS or exc.status >= 500:
        return RetryDecision(True, exc.retry_after)
    return RetryDecision(False)


def backoff_delay(attempt: int, *, base_s: float = 0.5, cap_s: float = 30.0, rng: random.Random | None = None) -> float:
    """Capped exponential backoff with full jitter: uniform over [0, min(cap, base * 2**attempt)]."""
    ceiling = min(cap_s, base_s * (2 ** min(attempt, 30)))
    return (rng or random).uniform(0.0, ceiling)


def retry_delay(decision: RetryDecision, attempt: int) -> float:
    """The server's wait when it named one, else the jittered backoff for this attempt (0-based)."""
    return decision.after if decision.after is not None else backoff_delay(attempt)


async def retrying(
    attempt: Callable[[], Awaitable[_T]],
    *,
    max_retries: int,
    on_retry: Callable[[ProviderError, int, float], None] | None = None,
    on_give_up: Callable[[ProviderError], None] | None = None,
    hold: Callable[[float], None] | None = None,
) -> _T:
    """`attempt()` until it succeeds, a failure is final, or `max_retries` retries are spent.

    `hold` gets a wait the server asked for, so a shared throttle pauses every caller, not only this one;
    `on_retry(error, retry_number, delay_s)` and `on_give_up(error)` are for counters and logs.
    """
    tries = 0
    while True:
        try:
            return await attempt()
        except ProviderError as exc:
            decision = classify(exc)
            if not decision.retry or tries >= max_retries:
                if on_give_up is not None:
                    on_give_up(exc)
                raise
            delay = retry_delay(decision, tries)
            if decision.after is not None and hold is not None:
                hold(decision.after)
            tries += 1
            if on_retry is not None:
                on_retry(exc, tries, delay)
            await anyio.sleep(delay)


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date); None if absent or bad."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        if "retry-after-ms" in lowered:
            try:
                return _bounded(float(lowered["retry-after-ms"]) / 1000)
            except ValueError:
                pass  # a bad millisecond header must not hide a good `retry-after`
        if "retry-after" not in lowered:
            return None
        value = lowered["retry-after"].strip()
        try:
            return _bounded(float(value))
        except ValueError:
            when = parsedate_to_datetime(value)
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            return _bounded((when - (now or datetime.now(UTC))).total_seconds())
    except (ValueError, TypeError, OverflowError):
        return None


def _bounded(seconds: float) -> float | None:
    if seconds != seconds or seconds < 0:  # NaN or in the past
        return 0.0 if seconds < 0 else None
    return min(seconds, MAX_RETRY_AFTER_S)
