"""The tutors of a study of several: each its own client on its own endpoint, and each stopped on its own.

Students and judges are shared by every tutor; a tutor's endpoint keeps its own throttle and breaker (see
`engine.models._endpoints`). When the breaker of an endpoint that only tutors use opens while other tutors are
still healthy, only that endpoint's tutors stop: their episodes in flight are cancelled unrecorded (a resume
plays them), their pending episodes are not admitted, and the run ends `interrupted` with the reason naming
them. Any other open breaker stops the whole run, as in a one-tutor run. On Ray a worker halts the tutor on its
own breaker and reports it; the driver decides as here and tells the other workers (`engine.runtime._ray`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import anyio

from engine.models._client import ModelClient
from engine.models._endpoints import Endpoints, endpoint_key
from engine.scenario._plan import Episode
from engine.scenario._spec import ModelsSpec

__all__ = ("TutorSet", "manifest_models")


def manifest_models(models: ModelsSpec, *, custom_tutor: bool) -> dict[str, Any]:
    """The manifest's models by role; several tutors as `label: model` each."""
    labelled = models.labelled_tutors()
    tutor: str | list[str] = (
        labelled[0][1].model if len(labelled) == 1 else [f"{label}: {spec.model}" for label, spec in labelled]
    )
    return {
        "tutor": "custom agent" if custom_tutor else tutor,
        "student": models.student.model if models.student else None,
        "judge": [spec.model for spec in models.judge],
    }


class TutorSet:
    def __init__(self, models: ModelsSpec) -> None:
        self._labelled = [(label, spec) for label, spec in models.labelled_tutors() if label is not None]
        self._others = {endpoint_key(spec) for role, spec in models.by_role() if role != "tutor"}
        self.clients: dict[str, ModelClient] = {}
        self.stopped: dict[str, str] = {}
        """Tutor label → why it stopped (its endpoint's breaker opened)."""
        self._endpoints: Endpoints | None = None
        self._in_flight: dict[str, set[anyio.CancelScope]] = {label: set() for label, _ in self._labelled}

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(label for label, _ in self._labelled)

    def open(self, endpoints: Endpoints) -> None:
        """One client per tutor, each on its own endpoint; its role `tutor LABEL` keeps its spending apart."""
        self._endpoints = endpoints
        self.clients = {label: endpoints.client(f"tutor {label}", spec) for label, spec in self._labelled}

    def clients_for(self, episode: Episode, clients: dict[str, ModelClient]) -> dict[str, ModelClient]:
        if episode.tutor is None or episode.tutor not in self.clients:
            return clients
        return {**clients, "tutor": self.clients[episode.tutor]}

    def admits(self, episode: Episode) -> bool:
        return episode.tutor not in self.stopped

    @contextmanager
    def playing(self, episode: Episode) -> Iterator[None]:
        """A cancel scope per episode of a tutor, so stopping that tutor cancels only its episodes."""
        if episode.tutor is None or episode.tutor not in self._in_flight:
            yield
            return
        with anyio.CancelScope() as scope:
            if episode.tutor in self.stopped:
                scope.cancel()
            self._in_flight[episode.tutor].add(scope)
            try:
                yield
            finally:
                self._in_flight[episode.tutor].discard(scope)

    def dead_for(self, reason: str) -> list[str]:
        """The tutors whose endpoint, one that only tutors use, opened its breaker with `reason`."""
        if self._endpoints is None:
            return []
        return [
            label
            for label, spec in self._labelled
            if endpoint_key(spec) not in self._others and self._endpoints[spec].breaker is not None
            if getattr(self._endpoints[spec].breaker, "reason", None) == reason
        ]

    def halt(self, labels: Sequence[str], reason: str) -> None:
        """Admit no more episodes of `labels` and cancel those in flight here (unrecorded: a resume plays them)."""
        for label in labels:
            self.stopped.setdefault(label, reason)
            for scope in list(self._in_flight.get(label, ())):
                scope.cancel()

    def stop(self, labels: Sequence[str], reason: str, events: Any) -> str | None:
        """Stop `labels` if another tutor is still running; returns why the run ends early (None: the caller stops
        the whole run). A Ray driver calls it with the tutors a worker's breaker stopped."""
        alive = [label for label in self.labels if label not in self.stopped and label not in labels]
        if not labels or not alive:
            return None
        if fresh := [label for label in labels if label not in self.stopped]:
            self.halt(fresh, reason)
            events.warning("tutor.stopped", tutors=fresh, reason=reason)
        names = ", ".join(sorted(self.stopped))
        reasons = "; ".join(sorted(set(self.stopped.values())))
        return (
            f"circuit breaker opened for tutor {names} ({reasons}): its episodes stopped and are left for a "
            "resume; the other tutors played theirs"
        )

    def stop_own(self, reason: str, events: Any) -> str | None:
        """`stop` the tutors whose own endpoint's breaker opened with `reason`."""
        return self.stop(self.dead_for(reason), reason, events)
