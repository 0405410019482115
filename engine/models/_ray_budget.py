"""One RPM/TPM budget per endpoint across a Ray cluster: a budget actor leases paced slices to the workers.

Each worker's `LeasedThrottle` spends permits it has leased from the endpoint's `EndpointBudget` actor and asks
for more only when they run out, so the actor is off the per-request path when the rate is high. A lease is what
the worker's waiting calls need, at most about 100 ms of the rate (or the one call that needs more), and it comes
with the spacing its permits must keep: the cluster sends at an even pace, never a slice at once.

Why pace rather than share a token bucket: a server that admits N requests per W seconds (a sliding window, as
`simrun serve --rpm` and many APIs do) answers any burst above the rate with 429s, and a bucket's burst is its
capacity. Paced at `1 - HEADROOM` of the configured rate with no burst, any window of W seconds holds fewer than
the limit as long as sends are late by less than `W * HEADROOM` (0.6 s for a minute's window, 90 ms for 6 s).

A Retry-After seen by any worker pauses the endpoint's budget (no lease is granted before it ends, and leases
already scheduled are scheduled again after it); quota exhaustion seen by any worker is kept by the actor and
fails every worker's next call to that endpoint. No module here imports Ray: the executor wraps these classes
with `ray.remote`.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from engine.core._errors import QuotaExhausted
from engine.models._throttle import Throttle, _Bucket

__all__ = ("HEADROOM", "LEASES_IN_FLIGHT", "SLICE_S", "EndpointBudget", "LeasedThrottle", "Pace", "endpoint_label")

SLICE_S = 0.1
"""Seconds of an endpoint's rate leased at once."""
HEADROOM = 0.015
"""Share of the configured rate the cluster leaves unused, so send jitter cannot push a window over its limit."""
LEASES_IN_FLIGHT = 1
"""Leases one worker waits for at once, per endpoint and kind: a worker asks for the next as soon as its waiting
calls have reserved the last permit, so one in flight keeps the schedule full."""


def endpoint_label(endpoint: tuple[str, str | None, str | None, str]) -> str:
    """A stable text key for an endpoint (provider, base URL, key variable, model), the same in every process."""
    return "|".join(part or "" for part in endpoint)


class Pace:
    """Virtual scheduling with no burst: each grant starts where the previous one ends, at `per_minute`.

    aiolimiter's bucket can only hand over permits that are free now, so a slice would leave together; this
    reserves the slice's time instead, and the permits carry their spacing to the worker.
    """

    def __init__(self, spacing: float) -> None:
        self.spacing = spacing
        """Seconds per permit (per request, or per token)."""
        self.next_at = 0.0
        """When the next permit not yet reserved may start."""

    @classmethod
    def at(cls, per_minute: float) -> Pace:
        """The cluster's pace for a configured rate: that rate less its headroom."""
        return cls(60.0 / (per_minute * (1.0 - HEADROOM)))

    def reserve(self, amount: float, now: float) -> float:
        """When `amount` permits asked for at `now` may start; their time is reserved at once."""
        start = max(now, self.next_at)
        self.next_at = start + amount * self.spacing
        return start

    def resume_at(self, at: float) -> None:
        """Nothing before `at` (a Retry-After), and no burst after it."""
        self.next_at = at


class EndpointBudget:
    """A Ray actor (async) holding one endpoint's RPM and TPM pace for the whole cluster."""

    def __init__(self, *, rpm: float | None, tpm: float | None) -> None:
        self._paces = {"requests": _pace(rpm), "tokens": _pace(tpm)}
        self._slices = {"requests": (rpm or 0) / 60 * SLICE_S, "tokens": (tpm or 0) / 60 * SLICE_S}
        self._not_before = 0.0
        self._holds = 0
        self._exhausted: str | None = None
        self.granted = {"requests": 0.0, "tokens": 0.0}

    async def lease(self, kind: str, need: float, want: float) -> dict[str, Any]:
        """`need` permits of `kind` (`requests` or `tokens`), and up to `want` (at most a slice), paced.

        Returns when the first permit is due, with `spacing`, the seconds each permit is worth after it.
        """
        pace = self._paces[kind]
        granted = max(need, min(want, self._slices[kind]))
        while self._exhausted is None:
            await self._paused()
            if pace is None:
                break
            holds = self._holds
            now = time.monotonic()
            await anyio.sleep(pace.reserve(granted, now) - now)
            if holds == self._holds:  # no Retry-After came while this lease waited for its time
                break
        if self._exhausted is not None:
            return {"granted": 0.0, "spacing": 0.0, "exhausted": self._exhausted}
        self.granted[kind] += granted
        return {"granted": granted, "spacing": pace.spacing if pace else 0.0, "exhausted": None}

    async def _paused(self) -> None:
        while True:  # a hold may be extended while it is waited out
            wait = self._not_before - time.monotonic()
            if wait <= 0 or self._exhausted is not None:
                return
            await anyio.sleep(wait)

    def hold(self, seconds: float) -> None:
        """A worker met Retry-After: no lease for anyone before it has passed, then the pace resumes from there."""
        self._not_before = max(self._not_before, time.monotonic() + seconds)
        self._holds += 1
        for pace in self._paces.values():
            if pace is not None:
                pace.resume_at(self._not_before)

    def exhaust(self, message: str) -> None:
        self._exhausted = self._exhausted or message

    def state(self) -> dict[str, Any]:
        return {"granted": dict(self.granted), "exhausted": self._exhausted}


def _pace(per_minute: float | None) -> Pace | None:
    return None if per_minute is None else Pace.at(per_minute)


class _LeasedBucket(_Bucket):
    """The `_Bucket` interface over paced permits leased from the budget actor.

    A lease asks for what the callers waiting here need, up to a slice. Each caller reserves the next permit's
    time at once and sleeps until it, so permits leave at the lease's spacing; what a lease left unspent lapses a
    slice after its last permit was due, so no worker can save permits up and spend them in a burst.
    """

    def __init__(self, throttle: LeasedThrottle, kind: str, per_minute: float) -> None:
        self._throttle, self._kind = throttle, kind
        self._slice = per_minute / 60 * SLICE_S
        self._pace = Pace(0.0)  # the leases' spacing, on this worker's clock
        self._balance, self._expires, self._waiting = 0.0, 0.0, 0.0
        self._leasing: anyio.CapacityLimiter | None = None

    def _reserve(self, amount: float) -> float | None:
        """Seconds until `amount` leased permits may be spent, reserving them; None when the lease falls short."""
        now = time.monotonic()
        if now > self._expires:
            self._balance = 0.0
        if self._balance < amount:
            return None
        self._balance -= amount
        return self._pace.reserve(amount, now) - now

    async def take(self, amount: float) -> None:
        self._leasing = self._leasing or anyio.CapacityLimiter(LEASES_IN_FLIGHT)
        self._waiting += amount
        try:
            while (wait := self._reserve(amount)) is None:
                async with self._leasing:
                    if (wait := self._reserve(amount)) is not None:  # a lease that came back meanwhile covers it
                        break
                    want = max(amount, min(self._waiting, self._slice))
                    lease = await self._throttle.budget.lease.remote(self._kind, amount, want)
                    if lease["exhausted"] is not None:
                        self._throttle.quota_exhausted(lease["exhausted"])
                    self._receive(lease["granted"], lease["spacing"])
        finally:
            self._waiting -= amount
        await anyio.sleep(wait)
        await self._throttle.paused()  # a Retry-After this worker met while the lease was on its way

    def _receive(self, granted: float, spacing: float) -> None:
        """A lease's permits, the first due now: a lease comes back when its first permit is due."""
        now = time.monotonic()
        if now > self._expires:
            self._balance = 0.0
        self._balance += granted
        self._pace.spacing = spacing
        self._expires = max(now, self._pace.next_at) + self._balance * spacing + SLICE_S


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
