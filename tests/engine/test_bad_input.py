"""Bad input never escapes as a traceback: arbitrary YAML exits 2 with a message; arbitrary bodies are errors."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import ChatRequest, ModelSpec, ProviderError, RequestContext, ScenarioError, build_scenario
from engine.cli import main
from engine.providers.openai import OpenAIChatModel
from tests.helpers import scenario_data, write_bank

_scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False) | st.text(max_size=8)
_documents = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bad-input")
    write_bank(folder / "bank.yaml")
    return folder


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=_documents)
def test_arbitrary_yaml_documents_exit_2(workdir: Path, document: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Any YAML document given as a scenario is refused with exit code 2 and a one-paragraph message."""
    path = workdir / "doc.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err


@st.composite
def _mutations(draw: st.DrawFn) -> tuple[list[str | int], Any]:
    """A path into a valid scenario and a replacement value for it."""
    data: Any = scenario_data()
    path: list[str | int] = []
    while isinstance(data, dict | list) and data and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(data) if isinstance(data, dict) else list(range(len(data)))))
        path.append(key)
        data = data[key]
    return path, draw(_documents)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=_mutations())
def test_mutated_scenarios_fail_only_as_scenario_errors(workdir: Path, mutation: tuple[list[str | int], Any]) -> None:
    """Replacing any part of a valid scenario with arbitrary data is either still valid or a `ScenarioError`."""
    path, value = mutation
    data: Any = scenario_data()
    if not path:
        data = value
    else:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    with contextlib.suppress(ScenarioError):
        build_scenario(data if isinstance(data, dict) else {"name": data}, base_dir=workdir)


_bodies = st.one_of(
    st.binary(max_size=200),
    _documents.map(lambda d: yaml.safe_dump(d).encode()),
    st.dictionaries(st.sampled_from(["id", "choices", "usage", "model", "object"]), _documents, max_size=5).map(
        orjson.dumps
    ),
)


@settings(max_examples=80, deadline=None)
@given(status=st.sampled_from([200, 200, 200, 201, 400, 404, 429, 500, 502]), body=_bodies)
async def test_arbitrary_server_bodies_are_errors_or_replies(status: int, body: bytes) -> None:
    """Whatever an endpoint answers, the provider returns a reply or raises `ProviderError` — nothing else."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, content=body, headers={"content-type": "application/json"})

    spec = ModelSpec(model="openai/x", base_url="http://127.0.0.1:9/v1", api_key_env="UNUSED", timeout_s=5)
    model = OpenAIChatModel(spec, transport=httpx2.MockTransport(answer))
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}], context=RequestContext(role="tutor"))
    try:
        reply = await model.complete(request)
    except ProviderError:
        pass
    else:
        assert isinstance(reply.text, str) and reply.usage.prompt_tokens >= 0
    finally:
        await model.aclose()
