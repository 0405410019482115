"""One RPM/TPM budget per endpoint across a Ray cluster: a budget actor leases small slices to the workers.

Each worker's `LeasedThrottle` spends permits it has leased from the endpoint's `EndpointBudget` actor and asks
for more only when they run out, so the actor is off the per-request path. The actor drains its buckets exactly
as a local `Throttle` does (`bucket_shape`: a second's share at most, never a minute's), so N workers together
keep the configured rate. A lease is at least one request (or the tokens a call needs) and about 100 ms of the
rate otherwise: what a worker holds unspent, and may send during a pause it has not heard of yet, is that slice.

A Retry-After seen by any worker pauses the endpoint's budget (no lease is granted before it ends); quota
exhaustion seen by any worker is kept by the actor and fails every worker's next call to that endpoint.
No module here imports Ray: the executor wraps these classes with `ray.remote`.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from .errors import QuotaExhausted
from .throttle import Throttle, _bucket, _Bucket

__all__ = ("SLICE_S", "EndpointBudget", "LeasedThrottle", "endpoint_label")

SLICE_S = 0.1
"""Seconds of an endpoint's rate leased at once."""


def endpoint_label(endpoint: tuple[str, str | None, str | None, str]) -> str:
    """A stable text key for an endpoint (provider, base URL, key variable, model), the same in every process."""
    return "|".join(part or "" for part in endpoint)


class EndpointBudget:
    """A Ray actor (async) holding one endpoint's RPM and TPM buckets for the whole cluster."""

    def __init__(self, *, rpm: float | None, tpm: float | None) -> None:
        self._buckets = {"requests": _bucket(rpm), "tokens": _bucket(tpm, 4096.0)}
        self._slices = {"requests": (rpm or 0) / 60 * SLICE_S, "tokens": (tpm or 0) / 60 * SLICE_S}
        self._not_before = 0.0
        self._exhausted: str | None = None
        self.granted = {"requests": 0.0, "tokens": 0.0}

    async def lease(self, kind: str, needed: float) -> dict[str, Any]:
        """Permits of `kind` (`requests` or `tokens`): at least `needed`, else a slice; waits for the rate."""
        bucket = self._buckets[kind]
        while (wait := self._not_before - time.monotonic()) > 0 and self._exhausted is None:
            await anyio.sleep(wait)
        if self._exhausted is not None:
            return {"granted": 0.0, "exhausted": self._exhausted}
        amount = max(needed, self._slices[kind])
        if bucket is not None:
            await bucket.take(amount)
        self.granted[kind] += amount
        return {"granted": amount, "exhausted": self._exhausted}

    def hold(self, seconds: float) -> None:
        """A worker met Retry-After: no lease for anyone before it has passed."""
        self._not_before = max(self._not_before, time.monotonic() + seconds)

    def exhaust(self, message: str) -> None:
        self._exhausted = self._exhausted or message

    def state(self) -> dict[str, Any]:
        return {"granted": dict(self.granted), "exhausted": self._exhausted}


class _LeasedBucket(_Bucket):
    """The `_Bucket` interface over permits leased from the budget actor; one lease in flight per worker."""

    def __init__(self, throttle: LeasedThrottle, kind: str) -> None:
        self._throttle, self._kind = throttle, kind
        self._balance = 0.0
        self._lock: anyio.Lock | None = None

    async def take(self, amount: float) -> None:
        self._lock = self._lock or anyio.Lock()
        async with self._lock:
            while self._balance < amount:
                lease = await self._throttle.budget.lease.remote(self._kind, amount - self._balance)
                if lease["exhausted"] is not None:
                    self._throttle.quota_exhausted(lease["exhausted"])
                self._balance += lease["granted"]
            self._balance -= amount


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
        self._requests = _LeasedBucket(self, "requests") if rpm is not None else None
        self._tokens = _LeasedBucket(self, "tokens") if tpm is not None else None

    def hold(self, seconds: float) -> None:
        super().hold(seconds)
        self.budget.hold.remote(seconds)

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
