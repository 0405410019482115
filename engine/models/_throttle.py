"""Per-endpoint admission: max in-flight requests, a request-rate bucket and a token-rate bucket.

Buckets are sized in seconds, not minutes: a leaky bucket holding a whole minute's budget admits it all at
once, and a server enforcing a sliding window answers the burst with 429s (measured: `AsyncLimiter(600, 60)`
drew 429s on 40% of requests against a 600/min server; `AsyncLimiter(10, 1)` on about 1%).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass

import anyio
from aiolimiter import AsyncLimiter

from engine.core._errors import QuotaExhausted
from engine.models._seats import Seats

__all__ = ("Throttle", "bucket_shape")


def bucket_shape(per_minute: float, *, min_capacity: float = 1.0) -> tuple[float, float]:
    """`(capacity, period_s)` for a bucket that drains `per_minute` evenly with the smallest burst possible.

    The period is one second unless the rate is so low that a second's share is below `min_capacity`.
    """
    per_second = per_minute / 60.0
    period = max(1.0, min_capacity / per_second)
    return max(min_capacity, per_second * period), period


@dataclass
class _Bucket:
    limiter: AsyncLimiter
    capacity: float

    async def take(self, amount: float) -> None:
        # aiolimiter refuses a single acquisition above its capacity: a larger amount is taken in full buckets.
        remaining = max(amount, 0.0)
        while remaining > 0:
            chunk = min(remaining, self.capacity)
            await self.limiter.acquire(chunk)
            remaining -= chunk


def _bucket(per_minute: float | None, min_capacity: float = 1.0) -> _Bucket | None:
    if per_minute is None:
        return None
    capacity, period = bucket_shape(per_minute, min_capacity=min_capacity)
    return _Bucket(AsyncLimiter(capacity, period), capacity)


class Throttle:
    """Shared by every conversation that calls one endpoint; create it inside the running event loop."""

    def __init__(
        self,
        *,
        rpm: float | None = None,
        tpm: float | None = None,
        max_in_flight: int | None = None,
    ) -> None:
        self._requests = _bucket(rpm)
        self._tokens = _bucket(tpm, min_capacity=4096.0)
        self._in_flight = Seats(max_in_flight) if max_in_flight else None
        """None when unbounded: a limiter of infinite size still costs two event-loop round trips per call. The
        seats go to the oldest episode waiting, so a saturated endpoint finishes conversations before starting new
        ones (`engine.models._seats`)."""
        self._not_before = 0.0
        self.exhausted: QuotaExhausted | None = None
        """Set once the endpoint reports quota exhaustion: later calls fail at once instead of retrying."""

    @property
    def counts_tokens(self) -> bool:
        """Whether calls are charged against a token bucket (only then is their token estimate needed)."""
        return self._tokens is not None

    def hold(self, seconds: float) -> None:
        """Send nothing to this endpoint for `seconds` (a 429's Retry-After applies to every conversation)."""
        self._not_before = max(self._not_before, anyio.current_time() + seconds)

    @asynccontextmanager
    async def slot(self, estimated_tokens: int) -> AsyncIterator[None]:
        """Wait for room on every limit, then hold one in-flight place for the duration of the block."""
        if self.exhausted is not None:
            raise QuotaExhausted(self.exhausted.model, "quota exhausted earlier in this run; no further calls")
        wait = self._not_before - anyio.current_time()
        if wait > 0:
            await anyio.sleep(wait)
        async with self._in_flight.seat() if self._in_flight is not None else nullcontext():
            if self._requests is not None:
                await self._requests.take(1)
            if self._tokens is not None:
                await self._tokens.take(estimated_tokens)
            yield

    async def reconcile(self, estimated_tokens: int, actual_tokens: int) -> None:
        """Charge the token bucket for what a call really used beyond its estimate."""
        if self._tokens is not None and actual_tokens > estimated_tokens:
            await self._tokens.take(actual_tokens - estimated_tokens)
