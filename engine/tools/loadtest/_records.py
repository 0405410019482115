"""One row per request attempt: raw monotonic stamps taken in the request coroutine, derived figures on demand.

Stamps are seconds since the run's shared start (`perf_counter`), so worker processes' rows merge directly.
Latencies are reported from the actual send *and* from the scheduled one; their gap is the dispatch delay,
which is where client-side queueing shows up instead of vanishing (coordinated omission).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ("CSV_COLUMNS", "RequestRecord")


@dataclass(slots=True)
class RequestRecord:
    conversation: int
    turn: int
    worker: int = 0
    step: int = 0
    """Index of the sweep step (0 outside sweeps)."""
    attempt: int = 0
    """0 for the first try; retries (only when `retries` > 0) are further rows."""
    messages: int = 0
    """Messages sent, system prompt included: the history grows with the turn."""
    warmup: bool = False
    scheduled: float | None = None
    """When the request should have been sent (None in closed loop, where the client decides)."""
    dispatched: float = 0.0
    headers: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    end: float | None = None
    ok: bool = False
    error: str | None = None
    """http_429, http_4xx, http_5xx, timeout, connection, malformed, stream_truncated or cancelled."""
    status: int | None = None
    retry_after: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    chunks: int = 0
    """Content chunks received (chunks are not tokens: servers pack several tokens into one)."""

    @property
    def dispatch_delay(self) -> float | None:
        return None if self.scheduled is None else self.dispatched - self.scheduled

    @property
    def e2e(self) -> float | None:
        return None if self.end is None else self.end - self.dispatched

    @property
    def e2e_from_schedule(self) -> float | None:
        return None if self.end is None or self.scheduled is None else self.end - self.scheduled

    @property
    def ttft(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.dispatched

    @property
    def ttft_from_schedule(self) -> float | None:
        return None if self.first_token is None or self.scheduled is None else self.first_token - self.scheduled

    @property
    def itl(self) -> float | None:
        """Mean time per token after the first chunk: the chunk gaps spread over the tokens they carried.

        With k content chunks carrying n tokens (from the server's usage) the first chunk holds n/k tokens on
        average, so the n − n/k later tokens arrived over `last_token − first_token`.
        """
        if self.first_token is None or self.last_token is None or self.chunks < 2 or self.completion_tokens < 2:
            return None
        later = self.completion_tokens * (self.chunks - 1) / self.chunks
        return (self.last_token - self.first_token) / later

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first, vLLM's definition: (e2e − ttft) / (n − 1)."""
        if self.first_token is None or self.end is None or self.completion_tokens < 2:
            return None
        return (self.end - self.first_token) / (self.completion_tokens - 1)


DERIVED = ("dispatch_delay", "ttft", "ttft_from_schedule", "itl", "tpot", "e2e", "e2e_from_schedule")
CSV_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RequestRecord)) + DERIVED
