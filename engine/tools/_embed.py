"""`simrun embed`: an item source's texts → embedding vectors from a configured provider, written once to a file.

Why a command and not a call inside the loader: item sources load synchronously (the runner plans its episodes
before its event loop starts, and a library user may load items inside a running loop), so a loader cannot await
a provider. The vectors go to a JSON file `{id: [float, ...]}` — the file an item source's
`retrieval: embeddings, vectors: FILE` option reads. Rerun the command when the texts change.

An item source offers texts by implementing `EmbeddableSource` (the `cases` and `tutorcasebench` sources do:
what the tutor sees of each case), so the engine needs no knowledge of cases. Texts go to the provider's
`embed()` in batches, on the endpoint `engine.models._endpoints` opens, under its `Throttle` (the spec's `rpm`,
`tpm`, `max_concurrency`), with the engine's retry policy (`engine.models._retry`: transient failures retried up
to `max_retries` times, a `Retry-After` honoured for every batch) and the per-attempt `timeout_s`, through the
same `retrying` loop `ModelClient` uses; `ModelClient` itself is not used, as its response cache and token
accounting are for chat replies. The command itself is `engine.cli._embed`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio
import orjson
from pydantic import ValidationError

from engine.core._errors import ProviderError, ProviderTimeout, ScenarioError, SimError
from engine.core._text import word_count
from engine.models._endpoints import open_endpoints, shared_throttle
from engine.models._probe import probe_endpoints
from engine.models._provider import PROVIDERS, ChatModel
from engine.models._retry import retrying
from engine.models._throttle import Throttle
from engine.scenario._intake import Intake, intake_of
from engine.scenario._items import ITEM_SOURCES
from engine.scenario._spec import ModelSpec

__all__ = (
    "EmbeddableSource",
    "check_embedding_model",
    "embed_all",
    "embed_with",
    "source_intake",
    "source_texts",
    "write_vectors",
)

EMBED_ROLE = "embed"


@runtime_checkable
class EmbeddableSource(Protocol):
    """An item source that can name, per item id, the text its similarity retrieval compares."""

    def retrieval_texts(self, path: Path, options: Mapping[str, Any], /) -> dict[str, str]: ...


async def _embed_batch(model: ChatModel, throttle: Throttle, texts: Sequence[str]) -> list[list[float]]:
    spec = model.spec
    estimate = sum(word_count(text) for text in texts) * 4 // 3 + len(texts)

    async def attempt() -> list[list[float]]:
        try:
            async with throttle.slot(estimate):
                with anyio.fail_after(spec.timeout_s):
                    vectors = await model.embed(texts)
        except TimeoutError:
            raise ProviderTimeout(spec.model, f"no reply within {spec.timeout_s:g}s") from None
        if len(vectors) != len(texts):
            raise ProviderError(spec.model, f"{len(vectors)} vectors for {len(texts)} texts", malformed=True)
        return vectors

    return await retrying(attempt, max_retries=spec.max_retries, hold=throttle.hold)


async def embed_all(
    model: ChatModel, texts: Sequence[str], *, batch: int = 64, throttle: Throttle | None = None
) -> list[list[float]]:
    """Every text's vector, in order; batches run concurrently up to the spec's `max_concurrency`.

    `throttle` is the endpoint's (from `open_endpoints`); without one, the spec's limits get a throttle of their own.
    """
    spec = model.spec
    throttle = throttle or shared_throttle([spec])
    starts = range(0, len(texts), batch)
    results: list[list[list[float]]] = [[] for _ in starts]

    async def one(slot: int, start: int) -> None:
        results[slot] = await _embed_batch(model, throttle, texts[start : start + batch])

    try:
        async with anyio.create_task_group() as group:
            for slot, start in enumerate(starts):
                group.start_soon(one, slot, start)
    except BaseExceptionGroup as failure:  # one batch failed for good: the others were cancelled
        ours, _ = failure.split(SimError)
        if ours is None:
            raise
        raise _first(ours) from None
    vectors = [vector for part in results for vector in part]
    if len({len(vector) for vector in vectors}) > 1:
        raise ProviderError(spec.model, "vectors of different lengths across batches", malformed=True)
    return vectors


def _first(group: BaseExceptionGroup[SimError]) -> SimError:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first


def write_vectors(path: Path, ids: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
    """`{id: vector}` as JSON, replacing `path` atomically (a crash never leaves half a file behind).

    Raises:
        ScenarioError: If `path` (or its folder) cannot be written: a user's bad --out, not a bug.
    """
    partial = path.with_name(path.name + ".partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(orjson.dumps(dict(zip(ids, (list(v) for v in vectors), strict=True))))
        os.replace(partial, path)
    except OSError as exc:
        raise ScenarioError(f"cannot write {path}: {exc.strerror or exc}") from None


def check_embedding_model(spec: ModelSpec, shown: str) -> None:
    """The provider's own checks (a key, known params) before anything runs; `shown` is how the user wrote it."""
    implementation = PROVIDERS.get(spec.provider)()
    implementation.check(spec, EMBED_ROLE)
    params = implementation.params_model(spec)
    if params is not None:
        try:
            params.model_validate(spec.params)
        except ValidationError as exc:
            raise ScenarioError(f"--model {shown!r}: bad params ({exc})") from None


def source_texts(source: str, path: Path) -> dict[str, str]:
    """The texts item source `source` offers for the items in `path`, by item id."""
    reader = ITEM_SOURCES.get(source)
    if not isinstance(reader, EmbeddableSource):
        raise ScenarioError(f"item source {source!r} offers no texts to embed")
    texts = reader.retrieval_texts(path, {})
    if not texts:
        raise ScenarioError(f"{path}: no texts to embed")
    return texts


def source_intake(source: str, path: Path) -> Intake:
    """What the item source read, kept and skipped in `path`, as a run would print it: the loader is asked for its
    items once more, since `retrieval_texts` returns texts only (a one-off command can afford the second read)."""
    return intake_of(ITEM_SOURCES.get(source)(path, {}), source, str(path))


async def _embed(spec: ModelSpec, texts: Sequence[str], batch: int, probe: bool = True) -> list[list[float]]:
    roles = [(EMBED_ROLE, spec)]
    async with open_endpoints(roles) as endpoints:
        if probe:  # a wrong URL or key is a message in seconds, not a minute of retries
            await probe_endpoints(endpoints.probe_targets(roles))
        endpoint = endpoints[spec]
        return await embed_all(endpoint.model, texts, batch=batch, throttle=endpoint.throttle)


def embed_with(spec: ModelSpec, texts: Sequence[str], *, batch: int = 64, probe: bool = True) -> list[list[float]]:
    """`embed_all` on `spec`'s endpoint from synchronous code; a final provider failure is a user-facing error."""
    try:
        return anyio.run(_embed, spec, list(texts), batch, probe, backend="asyncio")
    except ProviderError as exc:
        raise ScenarioError(f"embedding failed: {exc}") from None
