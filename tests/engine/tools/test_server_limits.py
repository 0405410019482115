"""Loopback servers hold no socket for ever: header and idle timeouts, a connection cap, and a Host check in view.

Every test speaks raw HTTP/1.1 over a real socket to a real server. `fail_after(HANG_S)` only turns a hang into a
failure: it is many times any timeout under test, so a loaded machine cannot reach it; no test bounds a duration.
"""

from __future__ import annotations

import http.client
from pathlib import Path

import anyio
import pytest

import engine
from engine.tools._view import serve_report
from engine.tools.serve._server import LoopbackServer
from tests.helpers import make_scenario

HANG_S = 60
GET_MODELS = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


async def _read_all(stream: anyio.abc.SocketStream) -> bytes:
    """Everything the server sends until it closes."""
    data = b""
    while True:
        try:
            data += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return data


async def test_idle_connection_is_closed() -> None:
    """A connection that never sends a request is closed after the idle timeout, without an answer."""
    async with LoopbackServer(idle_timeout_s=0.2) as server:
        with anyio.fail_after(HANG_S):
            started = anyio.current_time()  # before the connect: the server's idle clock starts after it
            stream = await anyio.connect_tcp("127.0.0.1", server.port)
            assert await _read_all(stream) == b""
            assert anyio.current_time() - started >= 0.2
            await stream.aclose()
        assert server.errors == []


async def test_keep_alive_connection_is_closed_once_idle() -> None:
    """After a served request, a silent keep-alive connection is closed too."""
    async with LoopbackServer(idle_timeout_s=0.2) as server:
        with anyio.fail_after(HANG_S):
            stream = await anyio.connect_tcp("127.0.0.1", server.port)
            await stream.send(GET_MODELS)
            data = await _read_all(stream)
            assert data.startswith(b"HTTP/1.1 200") and data.count(b"HTTP/1.1") == 1
            await stream.aclose()


async def test_slow_request_head_gets_408() -> None:
    """A head dripped a byte at a time (slowloris) must still arrive within the header timeout of its first byte."""
    async with LoopbackServer(header_timeout_s=0.3, idle_timeout_s=5) as server:
        with anyio.fail_after(HANG_S):
            stream = await anyio.connect_tcp("127.0.0.1", server.port)
            started = anyio.current_time()
            async with anyio.create_task_group() as tg:

                async def drip() -> None:
                    for byte in GET_MODELS[:-4]:
                        await stream.send(bytes([byte]))
                        await anyio.sleep(0.05)

                tg.start_soon(drip)
                data = await _read_all(stream)
                tg.cancel_scope.cancel()
            assert data.startswith(b"HTTP/1.1 408")  # before the drip ended: it would have been a 200
            assert anyio.current_time() - started >= 0.3
            await stream.aclose()


async def test_connections_over_the_cap_get_503_and_a_slot_frees_on_close() -> None:
    """Beyond `max_connections` open sockets a client gets a 503 at once; closing one lets the next one in."""
    async with LoopbackServer(max_connections=3, idle_timeout_s=10) as server:
        with anyio.fail_after(HANG_S):
            held = [await anyio.connect_tcp("127.0.0.1", server.port) for _ in range(3)]
            await anyio.sleep(0.05)  # let the server accept them
            extra = await anyio.connect_tcp("127.0.0.1", server.port)
            refused = await _read_all(extra)
            assert refused.startswith(b"HTTP/1.1 503") and b"Too many connections" in refused
            await extra.aclose()
            await held.pop().aclose()
            await anyio.sleep(0.05)
            again = await anyio.connect_tcp("127.0.0.1", server.port)
            await again.send(GET_MODELS.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
            assert (await _read_all(again)).startswith(b"HTTP/1.1 200")
            for stream in [*held, again]:
                await stream.aclose()
        assert server.refused == 1 and server.errors == []


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("view-host")
    return Path(engine.run_sync(make_scenario(base, limit=2), out=base / "runs").run_dir)


def _get(port: int, host: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    connection.putrequest("GET", "/", skip_host=True)
    if host:
        connection.putheader("Host", host)
    connection.endheaders()
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body


def test_view_answers_only_its_loopback_host(run_dir: Path) -> None:
    """A page that rebinds its own name to 127.0.0.1 sends its own Host, so it never gets the report (DNS rebinding)."""
    with serve_report(run_dir) as server:
        port = server.port
        for host, status in [
            (f"127.0.0.1:{port}", 200),
            (f"LOCALHOST:{port}", 200),
            (f"evil.example:{port}", 421),
            ("127.0.0.1:1", 421),
            ("127.0.0.1", 421),
            ("", 421),
        ]:
            answer, body = _get(port, host)
            assert answer == status, host
            assert (b"<html" in body.lower()) is (status == 200)


async def test_a_client_that_stops_reading_is_dropped() -> None:
    """Pipelined requests whose answers are never read fill the socket; the server gives up after the idle timeout."""
    async with LoopbackServer(idle_timeout_s=0.3) as server:
        with anyio.fail_after(10):
            stream = await anyio.connect_tcp("127.0.0.1", server.port)
            with anyio.move_on_after(2):
                await stream.send(GET_MODELS * 50_000)  # blocks too, once the server stops reading
            for _ in range(100):  # the server drops it although this socket is still open
                if not server.open_connections:
                    break
                await anyio.sleep(0.05)
            assert server.open_connections == 0
            await stream.aclose()
        assert server.errors == []
