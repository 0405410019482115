"""The one exception tree of simrun; every foreign error is translated at a single boundary.

* SimError
  * ScenarioError          the input is wrong: fix the YAML or the arguments (exit code 2)
    * UnknownPluginError   a provider, agent, judge or item source name that nobody registered
    * MissingCredentials   an API key variable is unset (raised before any call)
  * ProviderError          a model endpoint failed (status, retry_after, kind)
    * ProviderTimeout
    * RateLimited
    * QuotaExhausted       final: no retry can help
  * BadModelOutput         a model answered, but not in the shape the caller needs
  * JudgeError             a judge could not produce a verdict after its retries
    * Unjudged             its output stayed invalid: the reply is recorded unjudged, the dialogue goes on
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = (
    "BadModelOutput",
    "JudgeError",
    "MissingCredentials",
    "ProviderError",
    "ProviderTimeout",
    "QuotaExhausted",
    "RateLimited",
    "ScenarioError",
    "SimError",
    "UnknownPluginError",
    "Unjudged",
)


class SimError(Exception):
    """Root of every error simrun raises on purpose."""


class ScenarioError(SimError):
    """The user's input is invalid; the message is meant to be shown as is."""


class UnknownPluginError(ScenarioError):
    def __init__(self, kind: str, name: str, choices: Iterable[str]) -> None:
        self.kind, self.name, self.choices = kind, name, sorted(choices)
        super().__init__(f"unknown {kind} {name!r}; expected one of: {', '.join(self.choices) or '(none)'}")


class MissingCredentials(ScenarioError):
    def __init__(self, role: str, variable: str) -> None:
        self.role, self.variable = role, variable
        super().__init__(
            f"role {role!r} needs an API key: set the environment variable {variable} "
            f"(or point `api_key_env` at another variable)"
        )


class ProviderError(SimError):
    """A model call failed. `status` is the HTTP status when there was one."""

    def __init__(
        self,
        model: str,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        malformed: bool = False,
        endpoint: str | None = None,
    ) -> None:
        self.model, self.status, self.retry_after, self.malformed = model, status, retry_after, malformed
        self.endpoint, self.detail = endpoint, message
        """The base URL called (secrets already redacted), so a message says where the failure was."""
        super().__init__(f"{model} at {endpoint}: {message}" if endpoint else f"{model}: {message}")

    @property
    def kind(self) -> str:
        """A short stable label for counting errors by type."""
        if self.malformed:
            return "malformed"
        if self.status is not None:
            return f"http_{self.status}"
        return "connection"


class ProviderTimeout(ProviderError):
    @property
    def kind(self) -> str:
        return "timeout"


class RateLimited(ProviderError):
    @property
    def kind(self) -> str:
        return "rate_limited"


class QuotaExhausted(ProviderError):
    @property
    def kind(self) -> str:
        return "quota_exhausted"


class BadModelOutput(SimError):
    """The reply could not be parsed or validated; callers retry, then give up."""


class JudgeError(SimError):
    """A judge gave no usable verdict after its retries."""


class Unjudged(JudgeError):
    """The judge model answered every attempt, but never with a valid verdict. Unlike a failed call, this says
    nothing about the endpoint: the reply is recorded as unjudged (with this reason) and the episode goes on."""
