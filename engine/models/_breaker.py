"""Fail fast: a circuit breaker per endpoint, and the `--max-errors` bound on error records.

A dead endpoint used to cost a run minutes of retries and hundreds of error records that all say the same
thing. A breaker watches the calls of one endpoint *after* their retries: it opens after `consecutive` failed
calls in a row, or when `share` of the last `window` calls failed, and at once on a final refusal (the key
rejected, the quota spent). It also watches every attempt, retries included: when `same_attempts` attempts in
a row fail the same way (a dead backend behind a proxy answers each one with the same 502), waiting for each
call to spend its retries would take minutes and hundreds of retries, so it opens then. The runner then stops
admitting episodes, cancels those in flight (their calls would fail too) and ends the run `interrupted`, to be
resumed once the endpoint is back.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from engine.core._errors import ProviderError, ProviderTimeout, QuotaExhausted, RateLimited, ScenarioError

__all__ = ("Breaker", "BreakerPolicy", "ErrorLimit", "parse_max_errors")

_FINAL_STATUS = frozenset({401, 403})
_DIGITS = re.compile(r"\d+")  # "retry in 3.2s" and "retry in 1.9s" are the same failure


@dataclass(frozen=True)
class BreakerPolicy:
    consecutive: int = 5
    """Failed calls in a row (each after its retries) that open the breaker."""
    window: int = 20
    """Calls the failure share is taken over."""
    share: float = 0.5
    """Failure share over a full window that opens the breaker."""
    same_attempts: int = 40
    """Attempts in a row (retries included, across every call of the endpoint) failing the same way that open it.
    Rate limits and timeouts do not count: a busy endpoint answers them and then serves."""


class Breaker:
    """One endpoint's recent call outcomes; `on_open` is called once, with the reason, when it opens."""

    def __init__(self, name: str, on_open: Callable[[str], None], policy: BreakerPolicy | None = None) -> None:
        self.name, self._on_open, self.policy = name, on_open, policy or BreakerPolicy()
        self._recent: deque[bool] = deque(maxlen=self.policy.window)
        self._in_a_row = 0
        self._same: tuple[str, int | None, str] | None = None
        self._same_count = 0
        self.reason: str | None = None

    def success(self) -> None:
        self._in_a_row = 0
        self._same, self._same_count = None, 0
        self._recent.append(True)

    def attempt_failed(self, error: ProviderError) -> None:
        """One attempt failed (it may be retried): a long run of identical failures opens the breaker."""
        if isinstance(error, RateLimited | ProviderTimeout):
            return
        signature = (error.kind, error.status, _DIGITS.sub("#", error.detail))
        if signature == self._same:
            self._same_count += 1
        else:
            self._same, self._same_count = signature, 1
        if self.reason is None and self._same_count >= self.policy.same_attempts:
            self._open(f"{self._same_count} attempts in a row failed the same way", error)

    def failure(self, error: ProviderError) -> None:
        self.attempt_failed(error)
        self._in_a_row += 1
        self._recent.append(False)
        if self.reason is not None:
            return
        policy = self.policy
        failed = self._recent.count(False)
        if isinstance(error, QuotaExhausted) or error.status in _FINAL_STATUS:
            why = "the endpoint refused for good"
        elif self._in_a_row >= policy.consecutive:
            why = f"{self._in_a_row} calls in a row failed after their retries"
        elif len(self._recent) == policy.window and failed >= policy.share * policy.window:
            why = f"{failed} of the last {policy.window} calls failed after their retries"
        else:
            return
        self._open(why, error)

    def _open(self, why: str, error: ProviderError) -> None:
        self.reason = f"{self.name}: {why} (last: {error})"
        self._on_open(self.reason)


@dataclass(frozen=True)
class ErrorLimit:
    """`--max-errors`: a count, or a share of the planned episodes."""

    count: int | None = None
    percent: float | None = None

    def bound(self, planned: int) -> int:
        if self.count is not None:
            return self.count
        assert self.percent is not None
        return max(1, math.ceil(self.percent / 100 * planned))

    def __str__(self) -> str:
        return str(self.count) if self.count is not None else f"{self.percent:g}%"


_LIMIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%?)\s*$")


def parse_max_errors(text: str) -> ErrorLimit:
    """`N` error records, or `P%` of the planned episodes."""
    match = _LIMIT.match(text)
    if match is None:
        raise ScenarioError(f"--max-errors {text!r}: expected a count (e.g. 20) or a share of the plan (e.g. 5%)")
    number, percent = match.groups()
    if percent:
        value = float(number)
        if not 0 < value <= 100:
            raise ScenarioError(f"--max-errors {text!r}: a share must be in (0, 100]%")
        return ErrorLimit(percent=value)
    if "." in number:
        raise ScenarioError(f"--max-errors {text!r}: a count must be a whole number")
    return ErrorLimit(count=int(number))
