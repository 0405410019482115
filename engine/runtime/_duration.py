"""How long a planned run should take, from what bounds it: each endpoint's rpm, tpm and max_concurrency, and
the simulator's own latency. A `--dry-run` prints it, so a limit set for a paid API (`rpm=500`) applied to
the free simulator shows as an eight-minute run before anyone waits for it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engine.core._format import format_count, format_setting
from engine.runtime._plugins import CallEstimate
from engine.scenario._spec import ModelSpec, Scenario

__all__ = ("DurationBound", "duration_text", "expected_duration")


@dataclass(frozen=True)
class DurationBound:
    seconds: float
    reason: str


def _format(seconds: float) -> str:
    if seconds < 60:
        return f"{format_count(seconds)} s" if seconds >= 1 else "under 1 s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _role_bounds(role: str, spec: ModelSpec, calls: float, tokens: float, episodes_at_once: int) -> list[DurationBound]:
    bounds = []
    if spec.rpm:
        bounds.append(
            DurationBound(calls / spec.rpm * 60, f"{role} rpm {format_setting(spec.rpm)}: {format_count(calls)} calls")
        )
    if spec.tpm:
        bounds.append(
            DurationBound(
                tokens / spec.tpm * 60, f"{role} tpm {format_setting(spec.tpm)}: {format_count(tokens)} tokens"
            )
        )
    latency = spec.params.get("latency_s") if spec.provider == "sim" else None
    if isinstance(latency, int | float) and latency > 0:
        at_once = min(spec.max_concurrency or episodes_at_once, episodes_at_once)
        reason = f"{role} sim latency {format_setting(latency)} s × {format_count(calls)} calls, {at_once} at once"
        bounds.append(DurationBound(calls * latency / at_once, reason))
    return bounds


def expected_duration(scenario: Scenario, totals: Mapping[str, CallEstimate]) -> DurationBound | None:
    """The longest of the bounds (a lower bound on the wall time); None when nothing but speed limits it.

    A role's calls are shared evenly among its models (several judges vote in turn). The sim's latency bounds
    a role at its max_concurrency or the scenario's concurrency (an episode makes one call at a time).
    """
    models: dict[str, list[ModelSpec]] = {}
    for role, spec in scenario.models.by_named_role():
        models.setdefault(role, []).append(spec)
    bounds: list[DurationBound] = []
    for role, guess in totals.items():
        specs = models.get(role, [])
        for spec in specs:
            share_calls, share_tokens = guess.calls / len(specs), guess.tokens / len(specs)
            bounds += _role_bounds(role, spec, share_calls, share_tokens, scenario.concurrency)
    return max(bounds, key=lambda bound: bound.seconds, default=None)


def duration_text(scenario: Scenario, totals: Mapping[str, CallEstimate]) -> str:
    bound = expected_duration(scenario, totals)
    if bound is None:
        return (
            "expected duration: no rate limit or latency bounds it; the endpoints' speed sets it "
            f"({scenario.concurrency} episodes at once)"
        )
    return f"expected duration: at least {_format(bound.seconds)} ({bound.reason})"
