"""The handle agents and judges use to call a model: throttling, per-attempt timeouts and the one retry loop.

With a response cache, a call whose key is stored is answered from it before the throttle and the network
(see `engine.models._cache` for what a key is); a reply from the model is stored once it has arrived.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import anyio

from engine.core._errors import ProviderError, ProviderTimeout, QuotaExhausted
from engine.core._events import HOST_LOG, Redactor, RunEvents
from engine.core._records import Usage
from engine.core._text import word_count
from engine.models._breaker import Breaker
from engine.models._cache import ResponseCache, cache_key
from engine.models._provider import ChatModel, ChatReply, ChatRequest, Message, RequestContext
from engine.models._retry import retrying
from engine.models._throttle import Throttle
from engine.scenario._spec import ModelSpec

__all__ = ("CallStats", "ModelClient", "estimate_tokens")

log = HOST_LOG


@dataclass
class CallStats:
    """Counters shared by a run's clients; the progress bar and the manifest read them."""

    requests: int = 0
    """Calls sent to a model (attempts, retries included); cache hits are not requests."""
    cache_hits: int = 0
    """Calls answered from the response cache (no throttle, no network, no tokens counted below)."""
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries_by_kind: dict[str, int] = field(default_factory=dict)
    tokens_by_model: dict[str, list[int]] = field(default_factory=dict)
    """`model -> [prompt, completion]`, what a cost budget is counted against."""
    tokens_by_role: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    """`role -> model -> [prompt, completion]`, what spending is reported by."""
    failures_by_kind: dict[str, int] = field(default_factory=dict)
    """Calls that failed for good (after their retries), by error kind."""

    def add(self, earlier: Mapping[str, Any]) -> None:
        """Fold in the counters a resumed run's manifest kept, so totals cover every session of the run."""
        for name in ("requests", "cache_hits", "retries", "failures", "prompt_tokens", "completion_tokens"):
            setattr(self, name, getattr(self, name) + int(earlier.get(name, 0)))
        for name in ("retries_by_kind", "failures_by_kind"):
            mine_counts: dict[str, int] = getattr(self, name)
            for kind, count in dict(earlier.get(name, {})).items():
                mine_counts[kind] = mine_counts.get(kind, 0) + int(count)
        for model, (prompt, completion) in dict(earlier.get("tokens_by_model", {})).items():
            mine = self.tokens_by_model.setdefault(model, [0, 0])
            mine[0] += int(prompt)
            mine[1] += int(completion)
        for role, models in dict(earlier.get("tokens_by_role", {})).items():
            for model, (prompt, completion) in dict(models).items():
                mine = self.tokens_by_role.setdefault(role, {}).setdefault(model, [0, 0])
                mine[0] += int(prompt)
                mine[1] += int(completion)


def estimate_tokens(messages: Sequence[Message], max_tokens: int = 512) -> int:
    """A cheap upper-ish estimate of a call's tokens, charged to the TPM bucket before the call.

    A dialogue re-sends its history every turn, so each message's count is kept (by its text) rather than
    re-split on every call."""
    prompt = sum(_words(m.get("content", "")) for m in messages) * 4 // 3 + 4 * len(messages)
    return prompt + max_tokens


@lru_cache(maxsize=8192)
def _words(text: str) -> int:
    return word_count(text)


class ModelClient:
    """One role's view of one endpoint. Several clients may share the endpoint's model and throttle."""

    def __init__(
        self,
        role: str,
        spec: ModelSpec,
        model: ChatModel,
        throttle: Throttle,
        stats: CallStats,
        cache: ResponseCache | None = None,
        events: RunEvents | None = None,
        breaker: Breaker | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.role, self.spec, self._model, self._throttle, self._stats = role, spec, model, throttle, stats
        self._cache = cache
        self._events: RunEvents | Any = events or log
        self._breaker = breaker
        self._redactor = redactor or Redactor()

    @property
    def model_id(self) -> str:
        return self.spec.model

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        context: RequestContext,
        seed: int,
        json_output: bool = False,
        params: Mapping[str, Any] | None = None,
        response_schema: Mapping[str, Any] | None = None,
    ) -> tuple[ChatReply, float]:
        """Call the model, retrying transient failures; returns the reply and its latency in seconds.

        A cache hit returns the stored reply with latency 0.0. Only successful replies are stored.
        """
        request = ChatRequest(
            messages=messages,
            context=context,
            seed=seed,
            params={**self.spec.params, **(params or {})},
            json_output=json_output or response_schema is not None,
            response_schema=response_schema,
        )
        key = self._cache_key(request)
        if key is not None and self._cache is not None:
            cached = await self._cache.get(key)
            if cached is not None:
                self._stats.cache_hits += 1
                return self._redacted(cached), 0.0
        # Only a token bucket reads the estimate: without one, the history is not walked at all.
        estimate = (
            estimate_tokens(messages, int(request.params.get("max_tokens", 512))) if self._throttle.counts_tokens else 0
        )

        async def attempt() -> tuple[ChatReply, float]:
            async with self._throttle.slot(estimate):
                self._stats.requests += 1
                started = time.perf_counter()
                answer = await self._attempt(request)
                return answer, time.perf_counter() - started

        reply, latency = await retrying(
            attempt,
            max_retries=self.spec.max_retries,
            on_retry=self._on_retry,
            on_give_up=self._on_give_up,
            hold=self._throttle.hold,  # the server's wait applies to every conversation
        )
        if self._breaker is not None:
            self._breaker.success()
        reply = self._redacted(reply)
        self._count(reply.usage)
        await self._throttle.reconcile(estimate, reply.usage.total)
        if key is not None and self._cache is not None:
            await self._cache.put(key, reply)
        return reply, latency

    def _count(self, usage: Usage) -> None:
        self._stats.prompt_tokens += usage.prompt_tokens
        self._stats.completion_tokens += usage.completion_tokens
        by_role = self._stats.tokens_by_role.setdefault(self.role, {})
        for spent in (
            self._stats.tokens_by_model.setdefault(self.model_id, [0, 0]),
            by_role.setdefault(self.model_id, [0, 0]),
        ):
            spent[0] += usage.prompt_tokens
            spent[1] += usage.completion_tokens

    def _on_give_up(self, exc: ProviderError) -> None:
        if isinstance(exc, QuotaExhausted) and self._throttle.exhausted is None:
            self._throttle.exhausted = exc
            self._events.error("provider.quota_exhausted", model=self.model_id, error=str(exc))
        self._stats.failures += 1
        self._stats.failures_by_kind[exc.kind] = self._stats.failures_by_kind.get(exc.kind, 0) + 1
        if self._breaker is not None:
            self._breaker.failure(exc)

    def _on_retry(self, exc: ProviderError, attempt: int, delay: float) -> None:
        if self._breaker is not None:
            self._breaker.attempt_failed(exc)
        self._stats.retries += 1
        self._stats.retries_by_kind[exc.kind] = self._stats.retries_by_kind.get(exc.kind, 0) + 1
        self._events.warning(
            "provider.retry",
            gate=f"{exc.kind} {self.model_id} {self.spec.base_url}",
            model=self.model_id,
            role=self.role,
            attempt=attempt,
            kind=exc.kind,
            sleep_s=round(delay, 3),
            error=str(exc),
        )

    def _redacted(self, reply: ChatReply) -> ChatReply:
        """A reply that echoes a key must not carry it into records, reports or the cache."""
        if not self._redactor:
            return reply
        text = self._redactor.text(reply.text)
        return reply if text == reply.text else replace(reply, text=text)

    def _cache_key(self, request: ChatRequest) -> str | None:
        if self._cache is None or not self._model.cacheable:
            return None
        try:
            return cache_key(self.spec, request)
        except TypeError as exc:  # a context value with no canonical form: call the model, store nothing
            log.debug("cache.uncacheable", model=self.model_id, role=self.role, error=str(exc))
            return None

    async def _attempt(self, request: ChatRequest) -> ChatReply:
        try:
            with anyio.fail_after(self.spec.timeout_s):
                return await self._model.complete(request)
        except TimeoutError:
            raise ProviderTimeout(self.model_id, f"no reply within {self.spec.timeout_s:g}s") from None
