"""The server's admission and fault draws: RPM/TPM sliding windows, a stall, and seeded per-request faults.

The faults of the n-th admitted request depend only on (seed, n), so a sequential test sees the same fault
sequence on every run.
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from dataclasses import dataclass

import anyio

from engine.models._provider import ChatReply
from engine.tools.serve._options import ServeOptions

__all__ = ("ERROR_FAULTS", "Draws", "Limits", "retry_after")

ERROR_FAULTS = ("quota", "429", "500", "503")
"""Faults answered with an error response instead of the reply (drop and malformed spoil the reply itself)."""


@dataclass(frozen=True)
class Draws:
    """One request's seeded draws, always taken in the same order so the sequence is reproducible."""

    fault: str | None
    jitter: float
    drip: bool
    cut: float


class _Window:
    """A sliding-window limiter: the costs admitted during the last `window_s` seconds may not exceed `limit`."""

    def __init__(self, limit: int, window_s: float) -> None:
        self.limit = limit
        self.window_s = window_s
        self._entries: deque[tuple[float, int]] = deque()
        self._used = 0

    def wait(self, now: float, cost: int) -> float | None:
        """Seconds until `cost` fits (None: it fits now; `window_s` when it can never fit)."""
        while self._entries and self._entries[0][0] <= now - self.window_s:
            self._used -= self._entries.popleft()[1]
        if self._used + cost <= self.limit:
            return None
        if cost > self.limit:
            return self.window_s
        excess = self._used + cost - self.limit
        for at, spent in self._entries:
            excess -= spent
            if excess <= 0:
                return max(at + self.window_s - now, 0.001)
        return self.window_s  # unreachable: the entries hold all of `_used`

    def add(self, now: float, cost: int) -> None:
        self._entries.append((now, cost))
        self._used += cost


class Limits:
    """One server's rate windows, stall clock and draw counter (`admitted`: requests that drew their faults)."""

    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        self._rpm = _Window(options.rpm, options.window_s) if options.rpm else None
        self._tpm = _Window(options.tpm, options.window_s) if options.tpm else None
        self.admitted = 0
        self._started = time.monotonic()

    def stall_left(self) -> float:
        """Time until a stall that has begun ends (0 outside the stall): a stuck server, to expose client queueing."""
        if self.options.stall_at_s is None:
            return 0.0
        since = time.monotonic() - self._started - self.options.stall_at_s
        return self.options.stall_s - since if 0 <= since < self.options.stall_s else 0.0

    def admit(self, reply: ChatReply) -> tuple[float, str, str] | None:
        """Applies the RPM and TPM windows; returns (wait, message, type) of the 429 to send, or None."""
        now = anyio.current_time()
        cost = reply.usage.prompt_tokens + reply.usage.completion_tokens
        waits: list[tuple[float, str, str]] = []
        if self._rpm is not None and (wait := self._rpm.wait(now, 1)) is not None:
            message = f"Rate limit reached for requests: limit {self._rpm.limit} per {self.options.window_s:g}s"
            waits.append((wait, message, "requests"))
        if self._tpm is not None and (wait := self._tpm.wait(now, cost)) is not None:
            if cost > self._tpm.limit:
                message = f"Request too large for tokens: limit {self._tpm.limit}, requested {cost}"
            else:
                message = f"Rate limit reached for tokens: limit {self._tpm.limit} per {self.options.window_s:g}s"
            waits.append((wait, message, "tokens"))
        if waits:
            wait, message, kind = max(waits)
            return wait, f"{message} (simrun serve). Please try again in {wait:.3f}s.", kind
        if self._rpm is not None:
            self._rpm.add(now, 1)
        if self._tpm is not None:
            self._tpm.add(now, cost)
        return None

    def draw(self) -> Draws:
        """The n-th admitted request's fault, jitter, drip and cut draws, from (seed, n) alone."""
        rng = random.Random(f"simrun-serve:{self.options.seed}:{self.admitted}")
        self.admitted += 1
        u, jitter, drip, cut = rng.random(), rng.random(), rng.random(), rng.random()
        o = self.options
        fault: str | None = None
        for name, rate in (
            ("quota", o.quota_rate),
            ("429", o.error_429),
            ("500", o.error_500),
            ("503", o.error_503),
            ("drop", o.drop_rate),
            ("malformed", o.malformed_rate),
        ):
            if u < rate:
                fault = name
                break
            u -= rate
        return Draws(fault=fault, jitter=jitter, drip=drip < o.slow_drip_rate, cut=cut)


def retry_after(seconds: float) -> dict[str, str]:
    """`retry-after` in whole seconds (the HTTP form) and `retry-after-ms` (what OpenAI adds, and precise)."""
    return {"retry-after": str(math.ceil(seconds)), "retry-after-ms": str(math.ceil(seconds * 1000))}
