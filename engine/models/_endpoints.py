"""One place wires model endpoints: spec → provider, throttle, circuit breaker, response cache and call counters.

Runs, `simrun calibrate`, `simrun embed` and the load tester open their endpoints here, so they all share alike:
roles (or judge models) on one endpoint — same provider, base URL, key variable and model name — share one
provider instance (one connection pool), one throttle under the strictest of their limits and one breaker; every
client a command opens counts into one `CallStats` and reads one response cache. The HTTP clients themselves are
built by their transports (`LeanSession` in `_lean`, `SdkSession` in `_openai`); `open_http` is the way to them
for callers that speak the wire format themselves (the load tester).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from engine.core._events import Redactor
from engine.models._breaker import Breaker, BreakerPolicy
from engine.models._cache import ResponseCache
from engine.models._client import CallStats, ModelClient
from engine.models._provider import PROVIDERS, ChatModel
from engine.models._throttle import Throttle
from engine.models._wire import OPENAI_KEY_ENV
from engine.scenario._spec import ModelSpec

if TYPE_CHECKING:
    from engine.models._lean import LeanSession
    from engine.models._openai import SdkSession

__all__ = (
    "BreakerSetup",
    "Endpoint",
    "EndpointKey",
    "Endpoints",
    "endpoint_key",
    "endpoint_limits",
    "open_endpoints",
    "open_http",
    "open_model",
    "shared_throttle",
)

EndpointKey = tuple[str, str | None, str | None, str]
_T = TypeVar("_T", int, float)


def endpoint_key(spec: ModelSpec) -> EndpointKey:
    """What makes two specs one endpoint: provider, base URL, key variable and model name (params may differ)."""
    return (spec.provider, spec.base_url, spec.api_key_env, spec.name)


def open_model(spec: ModelSpec) -> ChatModel:
    """The provider instance for `spec`; it owns its HTTP client, if any (close it with `aclose`)."""
    return PROVIDERS.get(spec.provider)()(spec)


def _strictest(limits: Iterable[_T | None]) -> _T | None:
    present = [limit for limit in limits if limit is not None]
    return min(present) if present else None


def endpoint_limits(specs: Sequence[ModelSpec], *, share: int = 1) -> dict[str, Any]:
    """The `Throttle` limits of an endpoint: the strictest of its specs' limits holds for all of them.

    With `share` > 1 the endpoint is called from that many processes (Ray workers): each gets its part of the
    in-flight bound (the rates are one budget of the whole cluster, see `engine.models._ray_budget`).
    """
    in_flight = _strictest(s.max_concurrency for s in specs)
    return {
        "rpm": _strictest(s.rpm for s in specs),
        "tpm": _strictest(s.tpm for s in specs),
        "max_in_flight": None if in_flight is None else -(-in_flight // share),
    }


def shared_throttle(specs: Sequence[ModelSpec], *, share: int = 1) -> Throttle:
    """One throttle for every spec on an endpoint: the strictest of their limits holds for all of them."""
    return Throttle(**endpoint_limits(specs, share=share))


@dataclass(frozen=True)
class BreakerSetup:
    """A circuit breaker per endpoint under `policy`; `on_open(reason)` is called when one opens."""

    policy: BreakerPolicy
    on_open: Callable[[str], None]


@dataclass(frozen=True)
class Endpoint:
    role: str
    """The first role that uses the endpoint (it names the breaker)."""
    spec: ModelSpec
    model: ChatModel
    throttle: Throttle
    breaker: Breaker | None = None


class Endpoints:
    """The endpoints of one command, opened by `open_endpoints`; `client` gives a role its handle on one."""

    def __init__(
        self,
        endpoints: dict[EndpointKey, Endpoint],
        *,
        stats: CallStats,
        cache: ResponseCache | None,
        events: Any,
        redactor: Redactor | None,
    ) -> None:
        self._endpoints, self.stats, self.cache = endpoints, stats, cache
        self._events, self._redactor = events, redactor

    def __getitem__(self, spec: ModelSpec) -> Endpoint:
        return self._endpoints[endpoint_key(spec)]

    def client(self, role: str, spec: ModelSpec) -> ModelClient:
        endpoint = self[spec]
        return ModelClient(
            role,
            spec,
            endpoint.model,
            endpoint.throttle,
            self.stats,
            cache=self.cache,
            events=self._events,
            breaker=endpoint.breaker,
            redactor=self._redactor,
        )

    def probe_targets(self, roles: Sequence[tuple[str, ModelSpec]]) -> list[tuple[str, ChatModel]]:
        """Each endpoint of `roles` once, with the first role that uses it: what a probe calls."""
        return list({endpoint_key(spec): (role, self[spec].model) for role, spec in reversed(roles)}.values())


@asynccontextmanager
async def open_endpoints(
    roles: Sequence[tuple[str, ModelSpec]],
    *,
    stats: CallStats | None = None,
    cache_path: Path | None = None,
    events: Any = None,
    redactor: Redactor | None = None,
    breaker: BreakerSetup | None = None,
    throttle: Callable[[EndpointKey, Sequence[ModelSpec]], Throttle] | None = None,
) -> AsyncIterator[Endpoints]:
    """Open every distinct endpoint of `roles` (and the response cache at `cache_path`); close them on exit.

    Opens inside the running event loop, as throttles must be created there. `throttle(key, specs)` makes an
    endpoint's throttle instead of `shared_throttle` (a Ray worker spends the cluster's budget through it).
    """
    async with AsyncExitStack() as stack:
        cache = await ResponseCache.open(cache_path) if cache_path is not None else None
        if cache is not None:
            stack.push_async_callback(cache.aclose)
        sharing: dict[EndpointKey, list[tuple[str, ModelSpec]]] = {}
        for role, spec in roles:
            sharing.setdefault(endpoint_key(spec), []).append((role, spec))
        endpoints: dict[EndpointKey, Endpoint] = {}
        for key, users in sharing.items():
            role, spec = users[0]
            model = open_model(spec)
            stack.push_async_callback(model.aclose)
            watch = None if breaker is None else Breaker(f"{role} {spec.model}", breaker.on_open, breaker.policy)
            specs = [s for _, s in users]
            limiter = throttle(key, specs) if throttle is not None else shared_throttle(specs)
            endpoints[key] = Endpoint(role, spec, model, limiter, watch)
        yield Endpoints(endpoints, stats=stats or CallStats(), cache=cache, events=events, redactor=redactor)


def open_http(
    transport: Literal["lean", "sdk"],
    base_url: str,
    *,
    api_key_env: str | None,
    timeout_s: float,
    max_connections: int,
    keepalive: int = 100,
) -> LeanSession | SdkSession:
    """The HTTP client of an OpenAI-compatible endpoint, by transport; a `lean` one never builds the SDK client.

    The key is read from `api_key_env` (default `OPENAI_API_KEY`) here and goes no further than the headers.
    """
    key = os.environ.get(api_key_env or OPENAI_KEY_ENV)
    if transport == "lean":
        from engine.models._lean import LeanSession

        return LeanSession(base_url, api_key=key, timeout_s=timeout_s, max_connections=max_connections)
    from engine.models._openai import SdkSession

    return SdkSession(base_url, api_key=key, timeout_s=timeout_s, max_connections=max_connections, keepalive=keepalive)
