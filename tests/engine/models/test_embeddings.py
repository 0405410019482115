"""Embeddings through the provider layer: `openai` over real HTTP on both transports, `sim/embed`, `simrun embed`.

The HTTP tests talk to `simrun serve`'s loopback server, whose `/v1/embeddings` answers with the sim embedding,
so a vector fetched over HTTP must equal the one `sim/embed` computes in process.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import given
from hypothesis import strategies as st

import engine.models._retry
import engine.tools._embed
from engine.cli._main import main
from engine.core._errors import ProviderError, QuotaExhausted, RateLimited, ScenarioError
from engine.core._records import Usage
from engine.models._openai import OpenAIChatModel
from engine.models._provider import ChatModel, ChatReply, ChatRequest
from engine.models._wire import read_embeddings
from engine.models.sim._embed import embed_texts
from engine.models.sim._provider import SimChatModel
from engine.scenario._spec import ModelSpec
from engine.tools._embed import embed_all
from engine.tools.serve._server import LoopbackServer, ServeOptions
from tests.helpers import record_retry_waits

KEY_ENV = "SIMRUN_TEST_KEY"
TEXTS = ["I won't do the fractions worksheet.", "Reading aloud makes me panic.", "", "fraction worksheets again"]
CASES = Path(__file__).resolve().parents[3] / "personas" / "cases.yaml"
TRANSPORTS = pytest.mark.parametrize("transport", ["sdk", "lean"])


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-simrun-embed-test")


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.models._retry, "backoff_delay", lambda attempt, **_: 0.0)


@asynccontextmanager
async def _openai(server: LoopbackServer, transport: str, **fields: Any) -> AsyncIterator[OpenAIChatModel]:
    spec = ModelSpec(
        model="openai/sim-embed", base_url=server.base_url, api_key_env=KEY_ENV, transport=transport, **fields
    )
    model = OpenAIChatModel(spec)
    try:
        yield model
    finally:
        await model.aclose()


# -- openai over HTTP -----------------------------------------------------------------------------------------------


@TRANSPORTS
async def test_openai_embeddings_over_http_are_the_sim_vectors(transport: str) -> None:
    """Order, values and length survive the JSON round trip exactly, on both transports."""
    async with LoopbackServer() as server, _openai(server, transport) as model:
        vectors = await model.embed(TEXTS)
    assert vectors == embed_texts(TEXTS, 512)
    assert server.stats.http_requests == 1 and server.errors == []


async def test_sdk_default_base64_encoding_is_served() -> None:
    """The SDK asks for base64 unless told otherwise; the server packs little-endian float32 as the real API."""
    async with LoopbackServer() as server:
        client = openai.AsyncOpenAI(api_key="k", base_url=server.base_url, max_retries=0)
        try:
            response = await client.embeddings.create(model="any", input=TEXTS[:2], dimensions=64)
        finally:
            await client.close()
    for row, expected in zip(response.data, embed_texts(TEXTS[:2], 64), strict=True):
        assert row.embedding == pytest.approx(expected, abs=1e-6)


@TRANSPORTS
@pytest.mark.parametrize(
    ("options", "error", "status"),
    [
        (ServeOptions(error_429=1.0, retry_after_s=2.0), RateLimited, 429),
        (ServeOptions(quota_rate=1.0), QuotaExhausted, 429),
        (ServeOptions(error_500=1.0), ProviderError, 500),
    ],
)
async def test_embedding_errors_are_translated(
    transport: str, options: ServeOptions, error: type[ProviderError], status: int
) -> None:
    async with LoopbackServer(options) as server, _openai(server, transport) as model:
        with pytest.raises(error) as caught:
            await model.embed(["hello"])
    assert type(caught.value) is error and caught.value.status == status
    if error is RateLimited:
        assert caught.value.retry_after == pytest.approx(2.0)


@TRANSPORTS
async def test_bad_request_is_a_final_4xx(transport: str) -> None:
    """An empty input list is refused by the server (400), which the retry policy does not retry."""
    async with LoopbackServer() as server, _openai(server, transport) as model:
        with pytest.raises(ProviderError) as caught:
            await model.embed([])
    assert caught.value.status == 400 and "input" in str(caught.value)


@TRANSPORTS
async def test_retries_through_injected_503s(transport: str, no_backoff: None) -> None:
    """Three concurrent batches under a server failing half its requests still return every vector, in order."""
    texts = [f"text number {i} about fractions" for i in range(6)]
    options = ServeOptions(error_503=0.5, retry_after_s=0.0, seed=3)
    async with LoopbackServer(options) as server, _openai(server, transport, max_retries=10) as model:
        vectors = await embed_all(model, texts, batch=2)
    assert vectors == embed_texts(texts, 512)
    stats = server.stats
    assert stats.server_errors > 0 and stats.http_requests == 3 + stats.server_errors  # 3 batches answered


@TRANSPORTS
async def test_final_failure_is_the_provider_error_itself(transport: str) -> None:
    """Not an exception group: callers catch `ProviderError` as for chat."""
    async with LoopbackServer(ServeOptions(quota_rate=1.0)) as server, _openai(server, transport) as model:
        with pytest.raises(QuotaExhausted):
            await embed_all(model, TEXTS, batch=1)


# -- the parser -----------------------------------------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["index", "embedding", "x"]), inner),
    max_leaves=12,
)


@given(data=_JSON, count=st.integers(0, 3))
def test_read_embeddings_accepts_only_well_formed_bodies(data: Any, count: int) -> None:
    """Any body either yields `count` equal-length finite vectors or is a malformed-response error."""
    try:
        vectors = read_embeddings("openai/x", data, count)
    except ProviderError as exc:
        assert exc.malformed
        return
    assert len(vectors) == count
    assert len({len(v) for v in vectors}) <= 1 and all(math.isfinite(x) for v in vectors for x in v)


@pytest.mark.parametrize(
    "data",
    [
        [{"index": 1, "embedding": [1.0]}, {"index": 0, "embedding": [2.0, 3.0]}],
        [{"index": 0, "embedding": [1.0]}],
        [{"index": 0, "embedding": "AAAAAA=="}, {"index": 1, "embedding": [1.0]}],
        [{"index": 0, "embedding": [float("nan")]}, {"index": 1, "embedding": [1.0]}],
        [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}],
    ],
    ids=["ragged", "too-few", "base64", "nan", "repeated-index"],
)
def test_read_embeddings_rejects(data: Any) -> None:
    with pytest.raises(ProviderError, match="malformed"):
        read_embeddings("openai/x", data, 2)


def test_read_embeddings_orders_by_index() -> None:
    data = [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0]}]
    assert read_embeddings("openai/x", data, 2) == [[1.0, 0.0], [0.0, 1.0]]


# -- providers without embeddings, and sim/embed ----------------------------------------------------------------------


class _ChatOnly(ChatModel):
    async def complete(self, request: ChatRequest, /) -> ChatReply:
        return ChatReply(text="", usage=Usage(prompt_tokens=0, completion_tokens=0), model=self.spec.model)


async def test_chat_only_provider_has_no_embeddings() -> None:
    with pytest.raises(ScenarioError, match="has no embeddings"):
        await _ChatOnly(ModelSpec(model="other/chat")).embed(["x"])


async def test_sim_embed_and_its_knobs() -> None:
    model = SimChatModel(ModelSpec(model="sim/embed", params={"dimensions": 16}))
    assert await model.embed(TEXTS) == embed_texts(TEXTS, 16)
    with pytest.raises(ScenarioError, match="sim/embed"):
        await SimChatModel(ModelSpec(model="sim/tutor")).embed(["x"])


def test_sim_embed_plays_no_chat_role_and_chat_models_do_not_embed() -> None:
    with pytest.raises(ScenarioError, match="only embeds"):
        SimChatModel.check(ModelSpec(model="sim/embed"), "tutor")
    with pytest.raises(ScenarioError, match="only embeds"):
        SimChatModel.check(ModelSpec(model="sim/judge"), "embed")


# -- simrun embed -----------------------------------------------------------------------------------------------------


def _vectors(path: Path) -> dict[str, list[float]]:
    data: dict[str, list[float]] = orjson.loads(path.read_bytes())
    return data


def test_command_writes_one_unit_vector_per_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "v.json"
    assert main(["embed", str(CASES), "--model", "{model: sim/embed, params: {dimensions: 64}}", "-o", str(out)]) == 0
    vectors = _vectors(out)
    assert len(vectors) == 15 and {len(v) for v in vectors.values()} == {64}
    assert all(math.isclose(math.fsum(x * x for x in v), 1.0) for v in vectors.values())
    assert "wrote 15 vectors of 64 dimensions from sim/embed" in capsys.readouterr().out
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize("transport", ["sdk", "lean"])
def test_command_over_http_writes_the_same_vectors(tmp_path: Path, transport: str) -> None:
    """`openai/...` through a real endpoint, several batches: the same file as sim/embed in process."""
    local, remote = tmp_path / "local.json", tmp_path / "remote.json"
    assert main(["embed", str(CASES), "--model", "sim/embed", "-o", str(local)]) == 0
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(LoopbackServer()) as server:
        spec = f"{{model: openai/emb, base_url: '{server.base_url}', api_key_env: {KEY_ENV}, transport: {transport}}}"
        assert main(["embed", str(CASES), "--model", spec, "--batch", "4", "-o", str(remote)]) == 0
        # counted before answering (by_status after: racy here); 2 are the probe: the model list, one text
        assert server.stats.http_requests == 4 + 2
    assert _vectors(remote) == _vectors(local)


def test_command_failure_is_a_clean_user_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(LoopbackServer()) as server:
        spec = f"{{model: openai/emb, base_url: '{server.base_url}/nowhere', api_key_env: {KEY_ENV}}}"
        assert main(["embed", str(CASES), "--model", spec, "-o", str(tmp_path / "v.json")]) == 2
        url = server.base_url
    err = " ".join(capsys.readouterr().err.split())
    assert f"embed model openai/emb at {url}/nowhere" in err and "does not know this model" in err
    assert not (tmp_path / "v.json").exists()


def test_command_names_an_unreachable_endpoint_within_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    waits = record_retry_waits(monkeypatch)
    spec = "{model: openai/emb, base_url: 'http://127.0.0.1:9/v1', api_key_env: " + KEY_ENV + "}"
    assert main(["embed", str(CASES), "--model", spec, "-o", str(tmp_path / "v.json")]) == 2
    assert waits == []  # no retry and no backoff: the probe's one failure is the answer
    err = " ".join(capsys.readouterr().err.split())
    assert "embed model openai/emb at http://127.0.0.1:9/v1" in err and "cannot connect" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "sim/tutor"], "only embeds"),
        (["--model", "openai/text-embedding-3-small"], "needs an API key"),
        (["--model", "{model: sim/embed, params: {dims: 3}}"], "bad params"),
        (["--model", "sim/embed", "--source", "bank"], "offers no texts to embed"),
        (["--model", "sim/embed", "--source", "nope"], "unknown item source"),
    ],
)
def test_command_rejects_bad_input(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: Sequence[str],
    message: str,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["embed", str(CASES), *args, "-o", str(tmp_path / "v.json")]) == 2
    assert message in capsys.readouterr().err


def test_command_reports_an_unwritable_out_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A vectors file under a regular file cannot be written: exit 2 with the path, no traceback."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["embed", str(CASES), "--model", "sim/embed", "-o", str(blocker / "sub" / "v.json")]) == 2
    err = capsys.readouterr().err
    assert f"cannot write {blocker / 'sub' / 'v.json'}" in err and "Traceback" not in err
