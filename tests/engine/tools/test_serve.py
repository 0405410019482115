"""`simrun serve` through the real `openai` SDK: sim content, streaming, rate limits, every injected fault, bad input.

Every test opens the server inside its own body (`async with LoopbackServer(...)`): pytest-asyncio runs async
fixture set-up and tear-down in different tasks, which anyio task groups forbid.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import httpx2
import openai
import pytest
from click.testing import CliRunner
from openai.types.chat import ChatCompletionMessageParam
from pydantic import ValidationError

from engine.cli._serve import serve_command
from engine.core._errors import ProviderError
from engine.models._openai import OpenAIChatModel
from engine.models._provider import ChatRequest, Message, RequestContext
from engine.models.sim._provider import SimChatModel
from engine.scenario._spec import ModelSpec
from engine.tools.serve._server import LoopbackServer, ServeOptions

Role = Literal["tutor", "student", "judge"]
SYSTEM = "You are a patient maths tutor."
USER = "What is six times nine? Just tell me the answer please."
MESSAGES: list[ChatCompletionMessageParam] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
SIM_MESSAGES: list[Message] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]


@asynccontextmanager
async def _sdk(server: LoopbackServer, **options: Any) -> AsyncIterator[openai.AsyncOpenAI]:
    """The client the way the brief pins it: SDK retries off, an explicit httpx2 transport, closed on exit."""
    async with (
        httpx2.AsyncClient() as http,
        openai.AsyncOpenAI(api_key="x", base_url=server.base_url, max_retries=0, http_client=http, **options) as client,
    ):
        yield client


async def _sim(
    role: Role, *, seed: int = 0, json_output: bool = False, task: str | None = None
) -> tuple[str, int, int]:
    """What the sim provider itself answers to MESSAGES: the server must return exactly this."""
    model = SimChatModel(ModelSpec(model=f"sim/{role}"))
    data = {"reply": USER} if task else {}
    context = RequestContext(role=role, task=task, data=data)
    reply = await model.complete(
        ChatRequest(messages=SIM_MESSAGES, context=context, seed=seed, json_output=json_output)
    )
    return reply.text, reply.usage.prompt_tokens, reply.usage.completion_tokens


def _chunk_tokens(text: str) -> float:
    """The server's pacing unit: the sim's estimate of 4 tokens per 3 words."""
    return len(text.split()) * 4 / 3


# -- content ---------------------------------------------------------------------------------------------------------


async def test_completion_returns_sim_content_and_usage() -> None:
    """A plain completion is the sim tutor's reply for the request's messages and seed, with the sim's usage."""
    text, prompt, completion = await _sim("tutor", seed=7)
    async with LoopbackServer() as server, _sdk(server) as client:
        reply = await client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, seed=7)
    assert reply.choices[0].message.content == text
    assert reply.choices[0].message.role == "assistant" and reply.choices[0].finish_reason == "stop"
    assert reply.model == "gpt-4o-mini"
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (prompt, completion)
    assert reply.usage.total_tokens == prompt + completion
    assert server.errors == []


async def test_model_name_picks_the_sim_role() -> None:
    """`student`/`judge` in the model name select sim/student and sim/judge; the seed defaults to 0.

    The sim judge gets the rubric whose JSON keys its prompt names (harm when none), about the last user message.
    """
    student_text, *_ = await _sim("student")
    attacker_text, *_ = await _sim("student", json_output=True)
    judge_text, *_ = await _sim("judge", task="harm")
    async with LoopbackServer() as server, _sdk(server) as client:
        student = await client.chat.completions.create(model="my-Student-model", messages=MESSAGES)
        attacker = await client.chat.completions.create(
            model="sim-student", messages=MESSAGES, response_format={"type": "json_object"}
        )
        judge = await client.chat.completions.create(model="sim-judge", messages=MESSAGES)
        rubric = "Answer with one JSON object: {'gives_away_answer': true|false, ...}"
        pedagogy = await client.chat.completions.create(
            model="judge", messages=[{"role": "system", "content": rubric}, {"role": "user", "content": USER}]
        )
    assert student.choices[0].message.content == student_text
    assert attacker.choices[0].message.content == attacker_text
    assert set(json.loads(attacker_text)) == {"message", "rationale"}
    assert judge.choices[0].message.content == judge_text
    assert {"unsafe", "refused", "rationale"} <= set(json.loads(judge_text))
    content = pedagogy.choices[0].message.content  # the judge answers the rubric its prompt names
    assert content is not None and {"gives_away_answer", "challenges_learner"} <= set(json.loads(content))


async def test_a_json_schema_name_picks_the_judge_rubric_from_the_registry() -> None:
    """A request names its rubric by the standard `json_schema.name`; an unregistered name falls back to the
    registry's markers and default, so the server itself knows no rubric."""
    expected, *_ = await _sim("judge", task="turn_quality")
    harm, *_ = await _sim("judge", task="harm")

    def schema(name: str) -> Any:
        return {"type": "json_schema", "json_schema": {"name": name, "schema": {"type": "object"}}}

    async with LoopbackServer() as server, _sdk(server) as client:
        named = await client.chat.completions.create(
            model="sim-judge", messages=MESSAGES, response_format=schema("turn_quality")
        )
        unknown = await client.chat.completions.create(
            model="sim-judge", messages=MESSAGES, response_format=schema("no_such_rubric")
        )
    assert named.choices[0].message.content == expected
    assert set(json.loads(expected)) >= {"mistake_present", "answer_leakage"}
    assert unknown.choices[0].message.content == harm


async def test_latency_delays_the_answer() -> None:
    async with LoopbackServer(ServeOptions(latency_s=0.15, jitter_s=0.05)) as server, _sdk(server) as client:
        start = anyio.current_time()
        await client.chat.completions.create(model="m", messages=MESSAGES)
        assert anyio.current_time() - start >= 0.15


# -- streaming -------------------------------------------------------------------------------------------------------


async def test_streaming_chunks_usage_ttft_and_pacing() -> None:
    """SSE chunks rebuild the sim reply, a usage chunk closes the stream, and pacing is never faster than asked."""
    text, prompt, completion = await _sim("tutor", seed=3)
    options = ServeOptions(ttft_s=0.2, tokens_per_s=150.0, chunk_words=3)
    arrivals: list[tuple[float, str]] = []
    usage_chunks = []
    async with LoopbackServer(options) as server, _sdk(server) as client:
        start = anyio.current_time()
        stream = await client.chat.completions.create(
            model="m", messages=MESSAGES, seed=3, stream=True, stream_options={"include_usage": True}
        )
        first_role = None
        async for chunk in stream:
            if chunk.usage is not None:
                usage_chunks.append(chunk)
                continue
            delta = chunk.choices[0].delta
            first_role = first_role or delta.role
            if delta.content:
                arrivals.append((anyio.current_time(), delta.content))
        stats = server.stats
    assert "".join(content for _, content in arrivals) == text
    assert first_role == "assistant"
    assert len(usage_chunks) == 1 and usage_chunks[0].choices == []
    usage = usage_chunks[0].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (prompt, completion)
    assert arrivals[0][0] - start >= options.ttft_s
    gaps = [_chunk_tokens(content) / 150.0 for _, content in arrivals[1:]]
    assert len(gaps) >= 3
    # The last words cannot arrive before they were sent: headers, then ttft_s, then every paced gap.
    assert arrivals[-1][0] - start >= options.ttft_s + sum(gaps)
    observed = sorted(b[0] - a[0] for a, b in zip(arrivals, arrivals[1:], strict=False))
    assert observed[len(observed) // 2] >= 0.8 * min(gaps)
    assert stats.streamed == 1 and stats.completion_tokens == completion


async def test_stream_without_include_usage_has_no_usage_chunk() -> None:
    async with LoopbackServer() as server, _sdk(server) as client:
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        chunks = [chunk async for chunk in stream]
    assert all(chunk.usage is None and chunk.choices for chunk in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_raw_sse_framing() -> None:
    """On the wire: `data: {json}` events, `data: [DONE]` last, and a Content-Length so the connection stays alive."""
    async with LoopbackServer() as server, httpx2.AsyncClient(base_url=server.base_url) as http:
        body = {"model": "m", "messages": MESSAGES, "stream": True, "stream_options": {"include_usage": True}}
        response = await http.post("/chat/completions", json=body)
        again = await http.get("/models")
        stats = server.stats
    assert response.headers["content-type"].startswith("text/event-stream")
    assert int(response.headers["content-length"]) == len(response.content)
    events = [line for line in response.text.split("\n\n") if line]
    assert all(event.startswith("data: ") for event in events)
    assert events[-1] == "data: [DONE]"
    assert json.loads(events[-2].removeprefix("data: "))["usage"]["total_tokens"] > 0
    assert again.status_code == 200 and stats.connections == 1


# -- other endpoints and bad input -----------------------------------------------------------------------------------


async def test_models_endpoint() -> None:
    async with LoopbackServer() as server, _sdk(server) as client:
        page = await client.models.list()
        one = await client.models.retrieve("sim-judge")
    assert {model.id for model in page.data} == {"sim-tutor", "sim-student", "sim-judge"}
    assert one.id == "sim-judge"


@pytest.mark.parametrize(
    ("method", "path", "content", "status", "param"),
    [
        pytest.param("POST", "/v1/chat/completions", b"{not json", 400, None, id="bad-json"),
        pytest.param("POST", "/v1/chat/completions", b"[1, 2]", 400, None, id="not-an-object"),
        pytest.param("POST", "/v1/chat/completions", b'{"model": "m"}', 400, "messages", id="no-messages"),
        pytest.param("POST", "/v1/chat/completions", b'{"messages": [{"role": "user"}]}', 400, "model", id="no-model"),
        pytest.param(
            "POST", "/v1/chat/completions", b'{"model": "m", "messages": [3]}', 400, "messages[0]", id="bad-message"
        ),
        pytest.param(
            "POST",
            "/v1/chat/completions",
            b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "seed": "one"}',
            400,
            "seed",
            id="bad-seed",
        ),
        pytest.param(
            "POST",
            "/v1/chat/completions",
            b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "seed": 100000000000000000000}',
            400,
            "seed",
            id="seed-beyond-64-bits",
        ),
        pytest.param("GET", "/v1/chat/completions", b"", 405, None, id="wrong-method"),
        pytest.param("GET", "/v2/nothing", b"", 404, None, id="unknown-path"),
    ],
)
async def test_bad_requests_get_json_errors(method: str, path: str, content: bytes, status: int, param: str) -> None:
    """Bad input is answered with an OpenAI-style JSON error, and the connection keeps serving."""
    async with LoopbackServer() as server, httpx2.AsyncClient() as http:
        url = server.base_url.removesuffix("/v1") + path
        response = await http.request(method, url, content=content, headers={"content-type": "application/json"})
        after = await http.get(f"{server.base_url}/models")
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert after.status_code == 200
    assert server.errors == []


async def test_garbage_http_is_answered_400_and_closed() -> None:
    """A request that is not HTTP gets a 400 and a closed connection, and the server keeps accepting."""
    async with LoopbackServer() as server:
        async with await anyio.connect_tcp("127.0.0.1", server.port) as sock:
            await sock.send(b"NOT HTTP AT ALL\r\n\r\n")
            received = b""
            with anyio.fail_after(60):
                while True:
                    try:
                        received += await sock.receive()
                    except anyio.EndOfStream:
                        break
        async with _sdk(server) as client:
            await client.models.list()
    assert received.startswith(b"HTTP/1.1 400 ")
    assert server.errors == []


async def test_stats_counters() -> None:
    """`/stats` and `server.stats` agree and count requests, statuses, streams, tokens and concurrency."""
    _, prompt, completion = await _sim("tutor")
    async with LoopbackServer() as server, _sdk(server) as client:
        await client.chat.completions.create(model="m", messages=MESSAGES)
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        async for _ in stream:
            pass
        with pytest.raises(openai.NotFoundError):
            await client.get("/nothing", cast_to=object)
        async with httpx2.AsyncClient() as http:
            raw = (await http.get(server.base_url.removesuffix("/v1") + "/stats")).json()
        stats = server.stats
    assert raw == stats.to_json()
    assert stats.requests == 2 and stats.http_requests == 3 and stats.streamed == 1
    assert stats.by_status == {200: 2, 404: 1}
    assert raw["by_status"] == {"200": 2, "404": 1}
    assert (stats.prompt_tokens, stats.completion_tokens) == (2 * prompt, 2 * completion)
    assert stats.tokens == stats.prompt_tokens + stats.completion_tokens
    assert stats.in_flight == 0 and stats.max_in_flight == 1
    assert stats.too_many_requests == stats.dropped == stats.malformed == 0


# -- rate limits -----------------------------------------------------------------------------------------------------


async def test_rpm_limit_answers_429_with_retry_after() -> None:
    """Past the RPM limit: 429 `rate_limit_exceeded`, an OpenAI error body and a Retry-After that is honest."""
    async with LoopbackServer(ServeOptions(rpm=2, window_s=0.5)) as server, _sdk(server) as client:
        for _ in range(2):
            await client.chat.completions.create(model="m", messages=MESSAGES)
        with pytest.raises(openai.RateLimitError) as raised:
            await client.chat.completions.create(model="m", messages=MESSAGES)
        exc = raised.value
        wait_ms = int(exc.response.headers["retry-after-ms"])
        await anyio.sleep(wait_ms / 1000)
        await client.chat.completions.create(model="m", messages=MESSAGES)  # a slot has freed
        stats = server.stats
    assert exc.status_code == 429 and exc.code == "rate_limit_exceeded" and exc.type == "requests"
    assert set(exc.response.json()["error"]) == {"message", "type", "param", "code"}
    assert int(exc.response.headers["retry-after"]) == 1  # whole seconds, rounded up
    assert 0 < wait_ms <= 500
    assert stats.rate_limited == 1 and stats.by_status == {200: 3, 429: 1}


async def test_tpm_limit_answers_429() -> None:
    _, prompt, completion = await _sim("tutor")
    options = ServeOptions(tpm=(prompt + completion) * 3 // 2, window_s=30)
    async with LoopbackServer(options) as server, _sdk(server) as client:
        await client.chat.completions.create(model="m", messages=MESSAGES)
        with pytest.raises(openai.RateLimitError) as raised:
            await client.chat.completions.create(model="m", messages=MESSAGES)
    assert raised.value.code == "rate_limit_exceeded" and raised.value.type == "tokens"
    assert 25 <= int(raised.value.response.headers["retry-after"]) <= 30
    assert server.stats.rate_limited == 1


# -- injected faults -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize(
    ("knob", "error", "status", "code"),
    [
        pytest.param("error_429", openai.RateLimitError, 429, "rate_limit_exceeded", id="429"),
        pytest.param("error_500", openai.InternalServerError, 500, None, id="500"),
        pytest.param("error_503", openai.APIStatusError, 503, None, id="503"),
        pytest.param("quota_rate", openai.RateLimitError, 429, "insufficient_quota", id="quota"),
    ],
)
async def test_injected_errors_raise_the_matching_sdk_error(
    knob: str, error: type[openai.APIStatusError], status: int, code: str | None, stream: bool
) -> None:
    options = ServeOptions.model_validate({knob: 1.0, "retry_after_s": 2.5})
    async with LoopbackServer(options) as server, _sdk(server) as client:
        with pytest.raises(error) as raised:
            await client.chat.completions.create(model="m", messages=MESSAGES, stream=stream)
    exc = raised.value
    assert exc.status_code == status and exc.code == code
    if knob in ("error_429", "error_503"):
        assert exc.response.headers["retry-after"] == "3" and exc.response.headers["retry-after-ms"] == "2500"
    else:
        assert "retry-after" not in exc.response.headers
    assert server.stats.by_status == {status: 1}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_dropped_connection_is_an_api_connection_error(stream: bool) -> None:
    """A drop inside the headers (plain) or after some chunks (stream) surfaces as APIConnectionError."""
    async with LoopbackServer(ServeOptions(drop_rate=1.0)) as server, _sdk(server) as client:
        received: list[str] = []
        with pytest.raises(openai.APIConnectionError) as raised:
            if stream:
                chunks = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
                async for chunk in chunks:
                    received.append(chunk.choices[0].delta.content or "")
            else:
                await client.chat.completions.create(model="m", messages=MESSAGES)
        await client.models.list()  # still serving
        stats = server.stats
    assert isinstance(raised.value.__cause__, httpx2.RemoteProtocolError)
    assert stats.dropped == 1 and stats.tokens == 0 and stats.in_flight == 0
    assert stats.by_status == ({200: 2} if stream else {200: 1})  # a stream's headers were sent in full
    assert len(received) >= (1 if stream else 0)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_malformed_body_raises_json_decode_error(stream: bool) -> None:
    """The SDK does not wrap an undecodable 200: it raises json.JSONDecodeError (a ValueError), plain or streamed."""
    async with LoopbackServer(ServeOptions(malformed_rate=1.0)) as server, _sdk(server) as client:
        with pytest.raises(json.JSONDecodeError) as raised:
            if stream:
                chunks = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
                async for _ in chunks:
                    pass
            else:
                await client.chat.completions.create(model="m", messages=MESSAGES)
        stats = server.stats
    assert not isinstance(raised.value, openai.OpenAIError)
    assert stats.malformed == 1 and stats.by_status == {200: 1} and stats.tokens == 0


async def test_openai_provider_maps_malformed_body_to_provider_error() -> None:
    """engine's `openai` provider turns that JSONDecodeError into a (retryable) ProviderError."""
    async with LoopbackServer(ServeOptions(malformed_rate=1.0)) as server:
        model = OpenAIChatModel(ModelSpec(model="openai/sim-judge", base_url=server.base_url))
        try:
            with pytest.raises(ProviderError) as raised:
                await model.complete(ChatRequest(messages=SIM_MESSAGES, context=RequestContext(role="judge")))
        finally:
            await model.aclose()
    assert raised.value.status is None and "malformed response" in str(raised.value)


async def test_slow_drip() -> None:
    """A dripping stream waits slow_drip_s between chunks; a dripping plain body trips the client's read timeout."""
    options = ServeOptions(slow_drip_rate=1.0, slow_drip_s=0.3, chunk_words=100)
    async with LoopbackServer(options) as server, _sdk(server) as client:
        start = anyio.current_time()
        chunks = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        async for _ in chunks:
            pass
        assert anyio.current_time() - start >= 0.3  # one content chunk, then the tail after a drip gap
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(model="m", messages=MESSAGES, timeout=0.1)
        stats = server.stats
    assert stats.slow_drips == 2


async def test_fault_sequence_is_reproducible() -> None:
    """With the seed fixed, the n-th request meets the same fault on every run; another seed gives another mix."""
    knobs: dict[str, Any] = {
        "error_429": 0.15,
        "error_500": 0.1,
        "error_503": 0.1,
        "quota_rate": 0.05,
        "drop_rate": 0.1,
        "malformed_rate": 0.1,
        "retry_after_s": 0,
    }

    async def outcomes(seed: int) -> list[str]:
        seen: list[str] = []
        async with LoopbackServer(ServeOptions(seed=seed, **knobs)) as server, _sdk(server) as client:
            for _ in range(30):
                try:
                    await client.chat.completions.create(model="m", messages=MESSAGES)
                    seen.append("ok")
                except openai.APIStatusError as exc:
                    seen.append(f"{exc.status_code}:{exc.code}")
                except (openai.APIConnectionError, ValueError) as exc:
                    seen.append(type(exc).__name__)
        return seen

    first, second, other = await outcomes(11), await outcomes(11), await outcomes(12)
    assert first == second
    assert first != other
    assert {"ok", "APIConnectionError", "JSONDecodeError", "500:None", "503:None"} <= set(first)


# -- robustness ------------------------------------------------------------------------------------------------------


async def test_100_concurrent_requests() -> None:
    text, *_ = await _sim("tutor")
    replies: list[str | None] = []
    async with LoopbackServer(ServeOptions(latency_s=0.1)) as server, _sdk(server) as client:

        async def one() -> None:
            reply = await client.chat.completions.create(model="m", messages=MESSAGES)
            replies.append(reply.choices[0].message.content)

        async with anyio.create_task_group() as tg:
            for _ in range(100):
                tg.start_soon(one)
        stats = server.stats
    assert replies == [text] * 100
    assert stats.by_status == {200: 100} and stats.in_flight == 0
    assert stats.max_in_flight >= 25  # they really overlapped
    assert server.errors == []


async def test_server_survives_a_client_that_disconnects_mid_stream() -> None:
    options = ServeOptions(tokens_per_s=40.0, chunk_words=2)
    async with LoopbackServer(options) as server, httpx2.AsyncClient(base_url=server.base_url) as http:
        body = {"model": "m", "messages": MESSAGES, "stream": True}
        async with http.stream("POST", "/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    break  # hang up after the first chunk
        for _ in range(250):  # the server notices at its next write, a paced chunk later
            if not server.stats.in_flight:
                break
            await anyio.sleep(0.02)
        async with _sdk(server) as client:
            reply = await client.chat.completions.create(model="m", messages=MESSAGES)
        stats = server.stats
    assert reply.choices[0].message.content
    assert stats.client_disconnects == 1 and stats.requests == 2
    assert server.errors == []


# -- options and command line ----------------------------------------------------------------------------------------


def test_options_are_validated() -> None:
    with pytest.raises(ValidationError, match="at most 1"):
        ServeOptions(error_429=0.6, drop_rate=0.6)
    with pytest.raises(ValidationError, match="extra"):
        ServeOptions.model_validate({"latency": 1})
    with pytest.raises(ValidationError):
        ServeOptions(error_500=1.5)
    with pytest.raises(ValidationError, match="invalid_rat"):
        ServeOptions(sim={"judge": {"invalid_rat": 0.2}})
    assert ServeOptions(sim={"judge": {"invalid_rate": 0.2}}).sim == {"judge": {"invalid_rate": 0.2}}


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--error-429", "1.5"], id="probability-out-of-range"),
        pytest.param(["--error-429", "0.6", "--error-500", "0.6"], id="faults-sum-over-1"),
        pytest.param(["--sim", "judge=0.2"], id="bad-sim-knob-syntax"),
        pytest.param(["--sim", "judge.nope=1"], id="unknown-sim-knob"),
    ],
)
def test_command_rejects_bad_options(args: list[str]) -> None:
    result = CliRunner().invoke(serve_command, ["--port", "0", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


async def test_command_serves_until_interrupted() -> None:
    """`simrun serve` prints its base URL, serves the knobs it was given, and stops cleanly on Ctrl-C."""
    code = "import sys; from engine.cli._serve import serve_command; sys.exit(serve_command.main(sys.argv[1:]))"
    args = [sys.executable, "-c", code, "--port", "0", "--quota-rate", "1"]
    async with await anyio.open_process(args) as process:
        assert process.stdout is not None
        with anyio.fail_after(20):
            first = (await process.stdout.receive()).decode()
            match = re.search(r"(http://127\.0\.0\.1:\d+/v1)", first)
            assert match, first
            async with httpx2.AsyncClient(base_url=match.group(1)) as http:
                response = await http.post("/chat/completions", json={"model": "m", "messages": MESSAGES})
            process.send_signal(signal.SIGINT)
            code_ = await process.wait()
            rest = b"".join([chunk async for chunk in process.stdout]).decode()
    assert response.status_code == 429 and response.json()["error"]["code"] == "insufficient_quota"
    assert code_ == 0
    assert "stopped after 1 chat requests" in first + rest
