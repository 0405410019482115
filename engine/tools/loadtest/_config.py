"""What a load test does, validated strictly: from `scenarios/loadtest.yaml` or from `simrun loadtest` flags."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ("DEFAULT_SYSTEM_PROMPT", "Gates", "LoadConfig", "Slo", "Sweep")

DEFAULT_SYSTEM_PROMPT = (
    "You are a patient tutor. Help the student reason through the problem one step at a time; ask a guiding "
    "question rather than giving the final answer, and keep each reply short."
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Slo(_Model):
    """Per-request latency objectives; a request meets the SLO when it succeeded and meets every one given."""

    ttft_ms: float | None = Field(default=None, gt=0)
    itl_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)
    from_schedule: bool = True
    """Judge TTFT and end-to-end latency from the scheduled send time, so client-side queueing counts against
    the SLO instead of hiding (coordinated omission)."""


class Gates(_Model):
    """Thresholds of the validity gates: past them the client, not the server, may have set the numbers."""

    min_rate_ratio: float = Field(default=0.95, gt=0, le=1)
    """Achieved conversation starts / scheduled starts (open loop)."""
    dispatch_p99_ms: float = Field(default=10.0, gt=0)
    """99th percentile of the dispatch delay (actual send − scheduled send)."""
    loop_lag_p99_ms: float = Field(default=10.0, gt=0)
    """99th percentile of event-loop lag (how late a 10 ms timer fires)."""
    max_cpu: float = Field(default=0.85, gt=0, le=1)
    """Client CPU as a share of one core, per process."""


class Sweep(_Model):
    """Step the arrival rate up until the SLOs break; the knee is the highest rate that still met them."""

    rates: list[float] = Field(min_length=2)
    """Conversation arrival rates to try, in order (conversations per second)."""
    goodput_target: float = Field(default=0.9, gt=0, le=1)
    """A step passes when at least this share of its measured requests meets the SLO and its gates hold."""

    @model_validator(mode="after")
    def _increasing(self) -> Sweep:
        if any(b <= a for a, b in zip(self.rates, self.rates[1:], strict=False)) or self.rates[0] <= 0:
            raise ValueError("sweep rates must be positive and increasing")
        return self


class LoadConfig(_Model):
    """One load test. Rates count conversations; each conversation sends `turns` requests."""

    name: str = "loadtest"
    target: str
    """Base URL of the OpenAI-compatible API, e.g. `http://127.0.0.1:8000/v1`."""
    model: str
    """Model name as the server knows it (no provider prefix)."""
    api_key_env: str | None = None
    """Environment variable holding the key; the key itself never appears in a file or log."""
    transport: Literal["lean", "sdk"] = "lean"
    """`lean` (aiohttp + orjson, the load generator's default) or the openai `sdk` (for comparison)."""
    stream: bool = True
    """Stream responses (TTFT, ITL, TPOT are measured only when streaming)."""
    max_tokens: int | None = Field(default=None, ge=1)
    arrival: Literal["constant", "poisson", "concurrency"] = "poisson"
    """Open loop (`constant`, `poisson`: conversations arrive at `rate`) or closed loop (`concurrency`)."""
    rate: float | None = Field(default=None, gt=0)
    """Conversations started per second (open loop)."""
    concurrency: int | None = Field(default=None, ge=1)
    """Conversations running at once (closed loop)."""
    max_in_flight: int | None = Field(default=None, ge=1)
    """Client-side cap on requests in flight; sends it delays show up as dispatch delay."""
    turns: int = Field(default=4, ge=1)
    """Tutor requests per conversation; a simulated student writes the turn between them."""
    think_time_s: float = Field(default=1.0, ge=0)
    """Mean pause between a reply and the student's next message."""
    think: Literal["constant", "exponential"] = "exponential"
    duration_s: float | None = Field(default=60.0, gt=0)
    """No request is scheduled after this (measured from the start, warm-up included)."""
    max_requests: int | None = Field(default=None, ge=1)
    """Stop scheduling after this many requests."""
    warmup_s: float = Field(default=0.0, ge=0)
    """Requests scheduled before this are sent but left out of the statistics."""
    grace_s: float = Field(default=10.0, ge=0)
    """After the last scheduled request, requests in flight get this long; then the run stops hard."""
    timeout_s: float = Field(default=60.0, gt=0)
    retries: int = Field(default=0, ge=0)
    """Retries of 429/5xx/timeouts/connection errors; off by default (a 429 is an outcome), counted when on."""
    slo: Slo = Field(default_factory=Slo)
    gates: Gates = Field(default_factory=Gates)
    sweep: Sweep | None = None
    workers: int = Field(default=1, ge=1, le=64)
    """Client processes; each owns the conversations whose index ≡ its number (mod workers)."""
    executor: Literal["local", "ray"] = "local"
    """Where the workers run: processes on this machine, or Ray actors on a cluster's nodes (`simrun[ray]`)."""
    ray_address: str | None = None
    """Ray cluster to join with `executor: ray` (`auto`, `ray://HEAD:10001`); none starts a local one."""
    seed: int = 0
    items: Path | None = None
    """Item bank the simulated students ask about (simrun's YAML format); default: the STEM bank the package ships
    (`package:personas/stem.yaml`, which a clone also has as scenarios/items/stem.yaml)."""
    system_prompt: str = DEFAULT_SYSTEM_PROMPT

    @model_validator(mode="after")
    def _consistent(self) -> LoadConfig:
        if self.arrival == "concurrency":
            if self.concurrency is None:
                raise ValueError("arrival 'concurrency' needs `concurrency` (conversations at once)")
            if self.sweep is not None:
                raise ValueError("a sweep steps an open-loop rate: use arrival 'constant' or 'poisson'")
        elif self.rate is None and self.sweep is None:
            raise ValueError(f"arrival {self.arrival!r} needs `rate` (conversations per second) or a `sweep`")
        if self.duration_s is None and self.max_requests is None:
            raise ValueError("set `duration_s` or `max_requests`, or both, so the run ends")
        if self.duration_s is not None and self.warmup_s >= self.duration_s:
            raise ValueError("warmup_s must be shorter than duration_s")
        if self.workers > 1 and self.max_in_flight is not None and self.max_in_flight < self.workers:
            raise ValueError("max_in_flight is split across workers: give each at least one")
        return self

    @property
    def open_loop(self) -> bool:
        return self.arrival != "concurrency"
