"""OPENAI_BASE_URL and OPENAI_API_KEY reach the endpoint the same way on both transports, over real HTTP."""

from __future__ import annotations

import pytest

from engine.models._openai import OpenAIChatModel
from engine.models._provider import ChatRequest, RequestContext
from engine.scenario._spec import ModelSpec
from tests.fakes.openai_server import FakeOpenAI, Reply


@pytest.mark.parametrize("transport", ["sdk", "lean"])
async def test_environment_endpoint_and_key_on_both_transports(transport: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec without `base_url` goes to OPENAI_BASE_URL with the key from OPENAI_API_KEY, whichever transport."""
    async with FakeOpenAI([Reply(content="fifty four")]) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
        spec = ModelSpec.model_validate({"model": "openai/fake-model", "transport": transport})
        assert spec.base_url == fake.base_url
        OpenAIChatModel.check(spec, "tutor")
        model = OpenAIChatModel(spec)
        try:
            request = ChatRequest(messages=[{"role": "user", "content": "hi"}], context=RequestContext(role="tutor"))
            reply = await model.complete(request)
        finally:
            await model.aclose()
    assert reply.text == "fifty four"
    (seen,) = fake.seen
    assert seen.path.endswith("/chat/completions") and seen.body["model"] == "fake-model"
    assert seen.headers["authorization"] == "Bearer sk-from-the-environment"
