"""One RPM/TPM budget per endpoint across a Ray cluster: a budget actor leases small slices to the workers.

Each worker's `LeasedThrottle` spends permits it has leased from the endpoint's `EndpointBudget` actor and asks
for more only when they run out, so the actor is off the per-request path when the rate is high. The actor
drains buckets made by the local `Throttle`'s `bucket_shape`, so N workers together keep the configured rate.
A lease is what the worker's waiting calls need, at most about 100 ms of the rate (or the one call that needs
more): what a worker may send during a pause it has not heard of yet is that slice.

A Retry-After seen by any worker pauses the endpoint's budget (no lease is granted before it ends); quota
exhaustion seen by any worker is kept by the actor and fails every worker's next call to that endpoint.
No module here imports Ray: the executor wraps these classes with `ray.remote`.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from engine.core._errors import QuotaExhausted
from engine.models._throttle import Throttle, _Bucket, _bucket

__all__ = ("LEASES_IN_FLIGHT", "SLICE_S", "EndpointBudget", "LeasedThrottle", "endpoint_label")

SLICE_S = 0.1
"""Seconds of an endpoint's rate leased at once."""
LEASES_IN_FLIGHT = 1
"""Leases one worker waits for at once, per endpoint and kind. More let a lease round trip bound the rate less,
but permits then come back in clumps: at 20 requests/s against a 3-s window, 4 drew 2-5 429s past the first
window where 1 drew none."""


def endpoint_label(endpoint: tuple[str, str | None, str | None, str]) -> str:
    """A stable text key for an endpoint (provider, base URL, key variable, model), the same in every process."""
    return "|".join(part or "" for part in endpoint)


class EndpointBudget:
    """A Ray actor (async) holding one endpoint's RPM and TPM buckets for the whole cluster.

    Its buckets hold one slice, not a second's share, and start full: a window after an idle spell then carries
    at most a slice more than the rate, where a local throttle allows a second's more, and the first window none.
    A lease returns as soon as its first permit is there, with what else is free at that instant, so permits are
    sent when they are granted rather than saved up over a slice and sent together.
    """

    def __init__(self, *, rpm: float | None, tpm: float | None) -> None:
        self._buckets = {"requests": _bucket(rpm, period_s=SLICE_S), "tokens": _bucket(tpm, 4096.0, SLICE_S)}
        self._filled: set[str] = set()
        self._not_before = 0.0
        self._exhausted: str | None = None
        self.granted = {"requests": 0.0, "tokens": 0.0}

    async def lease(self, kind: str, need: float, want: float) -> dict[str, Any]:
        """`need` permits of `kind` (`requests` or `tokens`) once the rate allows, and up to `want` if free now."""
        bucket = self._buckets[kind]
        await self._paused()
        granted = max(need, want)
        if bucket is not None and self._exhausted is None:
            if kind not in self._filled:  # no opening burst: the first permits come at the rate
                self._filled.add(kind)
                await bucket.take(bucket.capacity)
            await bucket.take(need)
            granted, step = need, max(1.0, bucket.capacity / 8)
            while granted + step <= want and bucket.limiter.has_capacity(step):
                await bucket.limiter.acquire(step)
                granted += step
            await self._paused()  # a Retry-After that came while this lease waited for the rate
        if self._exhausted is not None:
            return {"granted": 0.0, "exhausted": self._exhausted}
        self.granted[kind] += granted
        return {"granted": granted, "exhausted": self._exhausted}

    async def _paused(self) -> None:
        while True:  # a hold may be extended while it is waited out
            wait = self._not_before - time.monotonic()
            if wait <= 0 or self._exhausted is not None:
                return
            await anyio.sleep(wait)

    def hold(self, seconds: float) -> None:
        """A worker met Retry-After: no lease for anyone before it has passed, and no burst once it has."""
        self._not_before = max(self._not_before, time.monotonic() + seconds)
        self._filled.clear()

    def exhaust(self, message: str) -> None:
        self._exhausted = self._exhausted or message

    def state(self) -> dict[str, Any]:
        return {"granted": dict(self.granted), "exhausted": self._exhausted}


class _LeasedBucket(_Bucket):
    """The `_Bucket` interface over permits leased from the budget actor.

    A lease asks for what the callers waiting here need, up to a slice, so permits are spent as they arrive;
    one not spent within a slice's time lapses, so no worker can save permits up and spend them in a burst.
    A few leases may be in flight at once, so a lease's round trip does not bound a worker's rate.
    """

    def __init__(self, throttle: LeasedThrottle, kind: str, per_minute: float) -> None:
        self._throttle, self._kind = throttle, kind
        self._slice = per_minute / 60 * SLICE_S
        self._balance, self._leased_at, self._waiting = 0.0, 0.0, 0.0
        self._leasing: anyio.CapacityLimiter | None = None

    def _spend(self, amount: float) -> bool:
        if time.monotonic() - self._leased_at > SLICE_S:
            self._balance = 0.0
        if self._balance < amount:
            return False
        self._balance -= amount
        return True

    async def take(self, amount: float) -> None:
        self._leasing = self._leasing or anyio.CapacityLimiter(LEASES_IN_FLIGHT)
        self._waiting += amount
        try:
            while not self._spend(amount):
                async with self._leasing:
                    if self._spend(amount):  # a lease that came back meanwhile covered this call
                        return
                    want = max(amount, min(self._waiting, self._slice))
                    lease = await self._throttle.budget.lease.remote(self._kind, amount, want)
                    if lease["exhausted"] is not None:
                        self._throttle.quota_exhausted(lease["exhausted"])
                    self._balance, self._leased_at = self._balance + lease["granted"], time.monotonic()
        finally:
            self._waiting -= amount
        await self._throttle.paused()  # a Retry-After this worker met while the lease was on its way


class LeasedThrottle(Throttle):
    """A worker's throttle for one endpoint: its own in-flight bound, the cluster's rate budget."""

    def __init__(
        self,
        budget: Any,
        model: str,
        *,
        rpm: float | None = None,
        tpm: float | None = None,
        max_in_flight: int | None = None,
    ) -> None:
        super().__init__(max_in_flight=max_in_flight)
        self.budget, self._model = budget, model
        self._requests = _LeasedBucket(self, "requests", rpm) if rpm is not None else None
        self._tokens = _LeasedBucket(self, "tokens", tpm) if tpm is not None else None

    def hold(self, seconds: float) -> None:
        super().hold(seconds)
        self.budget.hold.remote(seconds)

    async def paused(self) -> None:
        wait = self._not_before - anyio.current_time()
        if wait > 0:
            await anyio.sleep(wait)

    def quota_exhausted(self, message: str) -> None:
        """Another worker met quota exhaustion: fail this call and every later one at once."""
        self.exhausted = QuotaExhausted(self._model, message)
        raise self.exhausted

    @property
    def exhausted(self) -> QuotaExhausted | None:
        return self._exhausted

    @exhausted.setter
    def exhausted(self, error: QuotaExhausted | None) -> None:
        self._exhausted = error
        if error is not None and hasattr(self, "budget"):
            self.budget.exhaust.remote(str(error))
