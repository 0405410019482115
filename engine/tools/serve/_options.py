"""What `simrun serve` can be told to do (`ServeOptions`) and what it counts (`ServerStats`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.models.sim._provider import SimChatModel
from engine.scenario._spec import ModelSpec

__all__ = ("MODEL_NAMES", "ROLES", "Role", "ServeOptions", "ServerStats")

Role = Literal["tutor", "student", "judge"]
ROLES: Final[tuple[Role, ...]] = ("tutor", "student", "judge")
MODEL_NAMES: Final[dict[Role, str]] = {"tutor": "sim-tutor", "student": "sim-student", "judge": "sim-judge"}

Probability = Annotated[float, Field(ge=0, le=1)]


class ServeOptions(BaseModel):
    """The server's behaviour. Validated strictly so a typo in a test or on the command line fails loudly."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    latency_s: float = Field(default=0.0, ge=0)
    """Fixed delay before every admitted chat-completion answer (before a stream's headers)."""
    jitter_s: float = Field(default=0.0, ge=0)
    """Extra delay per request, drawn uniformly from [0, jitter_s] (seeded)."""
    ttft_s: float = Field(default=0.0, ge=0)
    """Streaming: time from the response headers to the first chunk (the role and first words)."""
    tokens_per_s: float | None = Field(default=None, gt=0)
    """Streaming: each further chunk of w words (w·4/3 tokens, the sim's estimate) waits tokens / tokens_per_s."""
    chunk_words: int = Field(default=3, ge=1)
    """Streaming: words per content chunk."""
    rpm: int | None = Field(default=None, ge=1)
    """Chat requests admitted per sliding window; the rest get 429 `rate_limit_exceeded` with `Retry-After`."""
    tpm: int | None = Field(default=None, ge=1)
    """Tokens (prompt + completion) admitted per sliding window; same 429 when exceeded."""
    window_s: float = Field(default=60.0, gt=0)
    """Length of the sliding rate-limit window (a minute, shortened in tests)."""
    error_429: Probability = 0.0
    """Chance of an injected 429 `rate_limit_exceeded` with `Retry-After: retry_after_s`."""
    error_500: Probability = 0.0
    """Chance of a 500 `server_error`."""
    error_503: Probability = 0.0
    """Chance of a 503 (overloaded)."""
    quota_rate: Probability = 0.0
    """Chance of a 429 with code `insufficient_quota` (final for clients: retrying cannot help)."""
    drop_rate: Probability = 0.0
    """Chance of closing the connection mid-response: after part of the headers (or nothing) for a plain
    answer, after some chunks (never `[DONE]`) for a stream."""
    malformed_rate: Probability = 0.0
    """Chance of a 200 whose JSON is cut in half (a plain body, or one chunk of a stream)."""
    slow_drip_rate: Probability = 0.0
    """Chance that a response drips: `slow_drip_s` before every chunk after the first of a stream, or between
    the eight pieces of a plain body after its headers (to trip client read timeouts)."""
    slow_drip_s: float = Field(default=1.0, ge=0)
    """The gap of a slow-drip response."""
    stall_at_s: float | None = Field(default=None, ge=0)
    """Seconds after the server was created when it stalls: chat requests arriving during the stall are held."""
    stall_s: float = Field(default=0.0, ge=0)
    """Length of the stall; held requests are answered (after their usual latency) once it ends."""
    retry_after_s: float = Field(default=1.0, ge=0)
    """`Retry-After` of injected 429s and 503s (the limiter's 429s say when a slot really frees)."""
    seed: int = 0
    """Seeds the fault, jitter and drip draws: the n-th admitted request's draws depend only on (seed, n)."""
    sim: dict[Role, dict[str, Any]] = Field(default_factory=dict)
    """Knobs of the sim roles, e.g. `{"judge": {"invalid_rate": 0.2}}` (see engine/models/sim/_provider.py); a sim
    `latency_s` is spent before the rate limiter sees the request, so prefer the server's own `latency_s`."""

    @model_validator(mode="after")
    def _check(self) -> ServeOptions:
        exclusive = (
            self.quota_rate + self.error_429 + self.error_500 + self.error_503 + self.drop_rate + self.malformed_rate
        )
        if exclusive > 1 + 1e-9:
            raise ValueError(
                "quota_rate + error_429 + error_500 + error_503 + drop_rate + malformed_rate must be at most 1 "
                f"(each request gets at most one of these faults), got {exclusive:g}"
            )
        for role, params in self.sim.items():
            try:
                SimChatModel(ModelSpec(model=f"sim/{role}", params=params))
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                raise ValueError(f"sim knobs of {role}: {problems}") from None
        return self


@dataclass
class ServerStats:
    """Counters since the server started; `LoopbackServer.stats` hands out copies, `GET /stats` the JSON.

    `by_status` counts responses whose status line and headers were sent in full (a stream dropped after some
    chunks counts as a 200; a plain answer dropped inside its headers does not count). Tokens are those of
    completions delivered intact (not dropped, not malformed).
    """

    connections: int = 0
    """TCP connections accepted (fewer than requests when clients keep connections alive)."""
    http_requests: int = 0
    """Requests read on any path, except `GET /stats`."""
    requests: int = 0
    """Well-formed chat-completion requests, including rate-limited ones."""
    by_status: dict[int, int] = field(default_factory=dict)
    rate_limited: int = 0
    """429s from the RPM/TPM limiter."""
    injected_429: int = 0
    quota_exhausted: int = 0
    server_errors: int = 0
    """Injected 500s and 503s."""
    dropped: int = 0
    malformed: int = 0
    slow_drips: int = 0
    streamed: int = 0
    """Streams whose headers were sent."""
    client_disconnects: int = 0
    """Chat responses the client stopped reading before the end."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens: int = 0
    in_flight: int = 0
    max_in_flight: int = 0

    @property
    def too_many_requests(self) -> int:
        """Every 429 sent: limiter, injected and quota."""
        return self.by_status.get(429, 0)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["by_status"] = {str(status): count for status, count in sorted(self.by_status.items())}
        return data
