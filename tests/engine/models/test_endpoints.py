"""The one endpoint-wiring module: what is shared per endpoint, and which HTTP client each transport builds."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import anyio
import pytest

from engine.models._endpoints import open_endpoints, open_http
from engine.models._lean import LeanSession
from engine.models._openai import SdkSession
from engine.models._provider import RequestContext
from engine.scenario._spec import ModelSpec
from engine.tools.loadtest._config import LoadConfig
from engine.tools.loadtest._transport import LeanLoad, SdkLoad, open_transport

TUTOR = ModelSpec(model="sim/tutor", max_concurrency=4, rpm=600)
SAME_ENDPOINT = ModelSpec(model="sim/tutor", max_concurrency=1)
JUDGE = ModelSpec(model="sim/judge")


async def test_roles_on_one_endpoint_share_its_model_and_strictest_throttle() -> None:
    roles = [("tutor", TUTOR), ("student", SAME_ENDPOINT), ("judge", JUDGE)]
    async with open_endpoints(roles) as endpoints:
        tutor, student, judge = (endpoints[spec] for _, spec in roles)
        assert tutor is student and tutor is not judge and tutor.model is not judge.model
        assert tutor.role == "tutor" and tutor.breaker is None
        # The stricter in-flight limit (1) holds for both roles: a second slot waits while one is held.
        held, release = anyio.Event(), anyio.Event()

        async def hold() -> None:
            async with tutor.throttle.slot(1):
                held.set()
                await release.wait()

        async with anyio.create_task_group() as group:
            group.start_soon(hold)
            await held.wait()
            with anyio.move_on_after(0.2) as waited:
                async with student.throttle.slot(1):
                    pass
            release.set()
        assert waited.cancelled_caught
        assert endpoints.probe_targets(roles) == [("judge", judge.model), ("tutor", tutor.model)]


async def test_clients_share_one_stats_and_one_cache(tmp_path: Path) -> None:
    """A second call with the same key is answered by the cache the endpoints opened, counted in their stats."""
    context = RequestContext(role="tutor")
    messages = [{"role": "user", "content": "What is 6 times 9?"}]
    async with open_endpoints([("tutor", TUTOR)], cache_path=tmp_path / "c.sqlite3") as endpoints:
        first, _ = await endpoints.client("tutor", TUTOR).complete(messages, context=context, seed=3)
        again, latency = await endpoints.client("tutor", TUTOR).complete(messages, context=context, seed=3)
    assert again.text == first.text and latency == 0.0
    assert (endpoints.stats.requests, endpoints.stats.cache_hits) == (1, 1)
    assert (tmp_path / "c.sqlite3").is_file()


@pytest.mark.parametrize(("transport", "built"), [("lean", LeanSession), ("sdk", SdkSession)])
async def test_each_transport_builds_its_own_client_only(transport: Literal["lean", "sdk"], built: type) -> None:
    http = open_http(transport, "http://127.0.0.1:9/v1", api_key_env=None, timeout_s=5.0, max_connections=8)
    try:
        assert type(http) is built
    finally:
        await http.aclose()


@pytest.mark.parametrize(("transport", "sender"), [("lean", LeanLoad), ("sdk", SdkLoad)])
async def test_the_load_tester_gets_its_client_from_the_same_place(
    transport: Literal["lean", "sdk"], sender: type
) -> None:
    config = LoadConfig(target="http://127.0.0.1:9/v1", model="m", transport=transport, rate=1.0)
    load = open_transport(config, 8)
    try:
        assert type(load) is sender
    finally:
        await load.aclose()
