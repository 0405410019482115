"""Probe first: one cheap call per distinct endpoint before the first episode, so a wrong URL, a rejected key
or an unknown model is a message within seconds instead of a run of error records.

The call is `GET /models`; if the endpoint has no model list, or the model is not in it (proxies and local
servers often serve names they do not list), a one-token completion (or a one-text embedding) decides.
Providers without a `list_models` method (the `sim` simulator) are not probed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

import anyio

from engine.core._errors import ProviderError, QuotaExhausted, ScenarioError
from engine.core._events import redact_url
from engine.models._provider import ChatModel, ChatRequest, RequestContext

__all__ = ("PROBE_TIMEOUT_S", "ProbeFailed", "probe_endpoints")

PROBE_TIMEOUT_S = 10.0
_CONTEXT_ROLES: dict[str, Literal["tutor", "student", "judge"]] = {"tutor": "tutor", "student": "student"}


_REFUSALS = frozenset(range(400, 500)) - {408, 409, 429}
"""A product's answer to its own probe request that no retry changes."""


# A proxy (LiteLLM) or a server (vLLM) often answers a wrong model name or a refused key with a 400 (or 422)
# and says so only in its message; these are the shapes they use.
_PROXY_REFUSALS = frozenset({400, 404, 422})
_UNKNOWN_MODEL = re.compile(
    r"invalid model|model[^.]{0,120}?(does not exist|not found|not exist|is not (supported|available|allowed))"
    r"|unknown model|no such model|model_not_found|llm provider not provided|no deployments? (available|found)"
    r"|not a valid model",
    re.IGNORECASE,
)
_BAD_KEY = re.compile(
    r"authentication ?error|invalid (api[ _-]?)?key|incorrect api key|api key not valid|invalid proxy server token"
    r"|invalid_api_key|unauthori[sz]ed|no api key|missing api key",
    re.IGNORECASE,
)


class ProbeFailed(ScenarioError):
    """An endpoint cannot serve the run (exit code 2); the message says which and what to check."""


def _where(role: str, model: ChatModel) -> str:
    url = getattr(model, "base_url", None) or model.spec.base_url
    at = f" at {redact_url(url)}" if url else ""
    return f"{role} model {model.spec.model}{at}"


def _fatal(
    role: str, model: ChatModel, error: ProviderError | TimeoutError, *, listing: bool, timeout_s: float
) -> str | None:
    """What is wrong and what to check, or None when the failure does not condemn the endpoint.

    Of the model list only a dead server condemns it: some proxies refuse `/models` to keys that may chat.
    """
    where = _where(role, model)
    if isinstance(error, TimeoutError):
        return f"{where}: no answer within {timeout_s:g}s; check that the server is up and base_url is right"
    if error.status is None and not error.malformed:
        return f"{where}: cannot connect ({error.detail}); check that the server is running and that base_url is right"
    if listing:
        return None
    key = " or ".join(f"${v}" for v in sorted(type(model).key_variables(model.spec))) or "the key"
    if isinstance(error, QuotaExhausted):
        return f"{where}: the account's quota is spent ({error.detail}); check billing"
    if error.status in (401, 403):
        return f"{where}: the API key was refused (HTTP {error.status}); check {key} and that it may use this model"
    if error.status == 404:
        return f"{where}: the endpoint does not know this model (HTTP 404); check the model name and base_url"
    if error.status in _PROXY_REFUSALS and _UNKNOWN_MODEL.search(error.detail):
        return f"{where}: the endpoint does not know this model ({error.detail}); check the model name"
    if error.status in _PROXY_REFUSALS and _BAD_KEY.search(error.detail):
        return f"{where}: the key was refused ({error.detail}); check {key} and the proxy's own keys"
    return None


async def _probe(role: str, model: ChatModel, timeout_s: float) -> str | None:
    """None if the endpoint looks able to serve; raises `ProbeFailed`; returns a warning for doubtful answers."""
    own: Any = getattr(model, "probe", None)
    if own is not None:  # a target with a probe of its own (an `http` product); it may be declared off
        if getattr(model, "probes", True):
            await _own_probe(role, model, own, timeout_s)
        return None
    lister: Any = getattr(model, "list_models", None)
    if lister is None:
        return None
    try:
        with anyio.fail_after(timeout_s):
            listed: list[str] = await lister()
        if model.spec.name in listed:
            return None
    except (ProviderError, TimeoutError) as error:
        fatal = _fatal(role, model, error, listing=True, timeout_s=timeout_s)
        if fatal is not None:
            raise ProbeFailed(fatal) from None
    try:
        with anyio.fail_after(timeout_s):
            if role == "embed":
                await model.embed(["probe"])
            else:
                params = dict(model.spec.params)
                params["max_completion_tokens" if "max_completion_tokens" in params else "max_tokens"] = 1
                context = RequestContext(role=_CONTEXT_ROLES.get(role, "judge"))
                await model.complete(
                    ChatRequest(messages=[{"role": "user", "content": "Say OK."}], context=context, params=params)
                )
    except (ProviderError, TimeoutError) as error:
        fatal = _fatal(role, model, error, listing=False, timeout_s=timeout_s)
        if fatal is not None:
            raise ProbeFailed(fatal) from None
        detail = error.detail if isinstance(error, ProviderError) else "timed out"
        return f"{_where(role, model)}: the probe call failed ({detail}); the run goes on"
    return None


async def _own_probe(role: str, model: ChatModel, probe: Any, timeout_s: float) -> None:
    """The target's own request; any final failure (not only the ones a chat probe condemns) stops the run."""
    try:
        with anyio.fail_after(timeout_s):
            await probe()
    except (ProviderError, TimeoutError) as error:
        fatal = _fatal(role, model, error, listing=False, timeout_s=timeout_s)
        if fatal is None and isinstance(error, ProviderError) and error.status in _REFUSALS:
            fatal = (
                f"{_where(role, model)}: the probe request was refused ({error.detail}); check the target's settings"
            )
        if fatal is not None:
            raise ProbeFailed(fatal) from None


async def probe_endpoints(
    endpoints: Sequence[tuple[str, ChatModel]], *, timeout_s: float = PROBE_TIMEOUT_S
) -> list[str]:
    """Probe every (role, model) concurrently; raises one `ProbeFailed` naming every endpoint that failed.

    Returns warnings about endpoints that answered the probe oddly but may still serve.
    """
    failures: list[str] = []
    warnings: list[str] = []

    async def one(role: str, model: ChatModel) -> None:
        try:
            warning = await _probe(role, model, min(timeout_s, model.spec.timeout_s))
        except ProbeFailed as exc:
            failures.append(str(exc))
            return
        if warning is not None:
            warnings.append(warning)

    async with anyio.create_task_group() as group:
        for role, model in endpoints:
            group.start_soon(one, role, model)
    if failures:
        raise ProbeFailed(" · ".join(sorted(failures)) + " (or pass --no-probe to skip this check)")
    return warnings
