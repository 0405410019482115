"""The smallest HTTP/1.1 server layer simrun needs for loopback servers; keep-alive, Content-Length bodies, no
chunked uploads.

Why it exists: `simrun serve` (engine/serve.py), `simrun view` (engine/view.py) and the scripted OpenAI fake of
the tests (tests/fakes/openai_server.py) all speak HTTP/1.1 over real sockets, so clients meet real keep-alive
reuse, timeouts and dropped connections. They share this one copy of the framing — reading and validating a request,
encoding a response head, closing without losing the last response — so a fix to request parsing (a smuggling
guard, a limit) reaches all three. It uses anyio alone and is deliberately small: request bodies must be framed by
Content-Length (`Transfer-Encoding` is refused), heads and bodies are size-limited, and anything malformed raises
`HttpError`, which a server answers with its status and then closes the connection. A request must arrive
within `HEADER_TIMEOUT_S` of its first byte, a connection idle for `IDLE_TIMEOUT_S` is closed, and connections
beyond a cap get a 503, so slow or idle clients cannot hold every socket.
"""

from __future__ import annotations

import abc
import contextlib
import resource
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Final, Self
from urllib.parse import urlsplit

import anyio
from anyio.abc import SocketAttribute, SocketListener, SocketStream, TaskGroup
from anyio.streams.stapled import MultiListener

__all__ = (
    "LoopbackListener",
    "CLOSE_TIMEOUT_S",
    "HEADER_TIMEOUT_S",
    "IDLE_TIMEOUT_S",
    "IO_ERRORS",
    "MAX_BODY_BYTES",
    "MAX_HEAD_BYTES",
    "Connection",
    "HttpError",
    "Request",
    "content_length",
    "encode_head",
    "linger_close",
    "parse_head",
)

MAX_HEAD_BYTES: Final = 64 * 1024
"""Largest request line plus header block accepted (431 beyond)."""
MAX_BODY_BYTES: Final = 16 * 1024 * 1024
"""Largest request body accepted (413 beyond)."""
HEADER_TIMEOUT_S: Final = 10.0
"""A request's head and body must arrive within this many seconds of its first byte (408 beyond)."""
IDLE_TIMEOUT_S: Final = 60.0
"""A connection that sends nothing for this long between requests is closed."""
CLOSE_TIMEOUT_S: Final = 1.0
"""Upper bound on any graceful close, so neither a handler nor a server's exit can hang on a stuck peer."""
IO_ERRORS: Final = (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)
"""What a peer that vanishes mid-exchange looks like; none of these is the server's fault."""


class HttpError(Exception):
    """A request the server must refuse before routing it; its framing is suspect, so close after."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Request:
    """One request as read off the wire; header names are lower-cased, repeated headers joined with ", "."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


def parse_head(head: bytes) -> tuple[str, str, dict[str, str], bool]:
    """Parses a request line and header block; returns (method, path, headers, keep_alive).

    Raises:
        HttpError: On anything malformed, so the caller answers 400 instead of crashing.
    """
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise HttpError(400, "Malformed request line.")
    method, target, version = parts
    if not (method.isascii() and method.isalpha() and method.isupper()):
        raise HttpError(400, "Malformed request method.")
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise HttpError(400, f"Unsupported HTTP version {version!r}.")
    if not target.startswith(("/", "http://", "https://")):
        raise HttpError(400, "Malformed request target.")
    try:
        path = urlsplit(target).path or "/"
    except ValueError as exc:
        raise HttpError(400, "Malformed request target.") from exc
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or any(ch in name for ch in " \t") or not name.isascii():
            raise HttpError(400, "Malformed header line.")
        key = name.lower()
        value = value.strip(" \t")
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    tokens = {token.strip().lower() for token in headers.get("connection", "").split(",")}
    keep_alive = "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens
    return method, path, headers, keep_alive


def content_length(headers: Mapping[str, str]) -> int:
    """Returns the declared body length, refusing anything ambiguous (request smuggling style).

    Raises:
        HttpError: 400 for Transfer-Encoding or a conflicting or malformed Content-Length; 413 for a body over
            `MAX_BODY_BYTES`.
    """
    if "transfer-encoding" in headers:
        raise HttpError(400, "Transfer-Encoding request bodies are not supported; send Content-Length.")
    raw = headers.get("content-length")
    if raw is None:
        return 0
    values = {value.strip() for value in raw.split(",")}
    if len(values) != 1:
        raise HttpError(400, "Conflicting Content-Length headers.")
    (value,) = values
    if not (value.isascii() and value.isdigit()):
        raise HttpError(400, "Malformed Content-Length header.")
    length = int(value)
    if length > MAX_BODY_BYTES:
        raise HttpError(413, "Request body too large.")
    return length


def encode_head(status: int, headers: Mapping[str, str], keep_alive: bool) -> bytes:
    """A response status line and header block; the caller supplies Content-Length and owns the framing.

    The `connection` header comes first, from `keep_alive`. CR and LF in names and values become spaces, so a
    header (e.g. a scripted one) can never split the response.
    """
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {status} {reason}", f"connection: {'keep-alive' if keep_alive else 'close'}"]
    lines.extend(f"{_one_line(name)}: {_one_line(value)}" for name, value in headers.items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


def _default_max_connections() -> int:
    """Half the file descriptors this process may open (at most 8192), so the server never runs out of them."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(16, min(8192, soft // 2)) if soft != resource.RLIM_INFINITY else 8192


class Connection:
    """Buffered reader over one socket; bytes past one request are kept for the next (pipelining)."""

    def __init__(
        self,
        stream: SocketStream,
        *,
        header_timeout_s: float = HEADER_TIMEOUT_S,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
    ) -> None:
        self.stream = stream
        self.header_timeout_s, self.idle_timeout_s = header_timeout_s, idle_timeout_s
        self._buffer = bytearray()
        self._deadline: float | None = None

    async def _fill(self) -> bool:
        """Reads more bytes; returns False when the peer closed its side cleanly (or idled out between requests).

        Raises:
            HttpError: 408 when a started request does not arrive in time.
        """
        waiting = self._deadline is None and not self._buffer
        timeout = self.idle_timeout_s if waiting else (self._deadline or 0) - anyio.current_time()
        with anyio.move_on_after(max(0.0, timeout)) as scope:
            try:
                chunk = await self.stream.receive()
            except anyio.EndOfStream:
                return False
        if scope.cancelled_caught:
            if waiting:
                return False
            raise HttpError(408, "Request not received in time.")
        if self._deadline is None:
            self._deadline = anyio.current_time() + self.header_timeout_s
        self._buffer += chunk
        return True

    async def send(self, data: bytes) -> None:
        """Sends bytes; a peer that reads nothing for `idle_timeout_s` counts as gone (BrokenResourceError)."""
        with anyio.move_on_after(self.idle_timeout_s) as scope:
            await self.stream.send(data)
        if scope.cancelled_caught:
            raise anyio.BrokenResourceError("the client stopped reading")

    async def read_request(self) -> Request | None:
        """Reads one request; returns None when the peer closed the connection (or idled) between requests.

        Raises:
            HttpError: The request is malformed, unsupported or too slow.
            anyio.EndOfStream: The peer closed the connection half-way through a body.
        """
        self._deadline = anyio.current_time() + self.header_timeout_s if self._buffer.strip(b"\r\n") else None
        request = await self._read_request()
        self._deadline = None
        return request

    async def _read_request(self) -> Request | None:
        while True:
            while self._buffer.startswith(b"\r\n"):  # RFC 9112 §2.2: ignore empty lines before a request
                del self._buffer[:2]
            end = self._buffer.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise HttpError(431, "Request header block too large.")
            if not await self._fill():
                return None  # closed before or during the head: nothing to answer
        if end > MAX_HEAD_BYTES:
            raise HttpError(431, "Request header block too large.")
        head = bytes(self._buffer[:end])
        del self._buffer[: end + 4]
        method, path, headers, keep_alive = parse_head(head)
        length = content_length(headers)
        if headers.get("expect", "").lower() == "100-continue" and len(self._buffer) < length:
            await self.stream.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        while len(self._buffer) < length:
            if not await self._fill():
                raise anyio.EndOfStream
        body = bytes(self._buffer[:length])
        del self._buffer[:length]
        return Request(method, path, headers, body, keep_alive)


async def linger_close(stream: SocketStream) -> None:
    """Half-closes, then drains until the peer closes, so a final response is not lost to a TCP RST.

    Closing a socket that still has unread input makes the kernel send RST, which can destroy a response
    (e.g. a 400) that the client has not read yet. The drain stops after `CLOSE_TIMEOUT_S`.
    """
    await stream.send_eof()
    with anyio.move_on_after(CLOSE_TIMEOUT_S):
        while True:
            await stream.receive()


class LoopbackListener(abc.ABC):
    """A listening socket served by one task per connection, in a task group the object owns.

    Subclasses implement `converse` (the request/response loop of one connection); this class binds, accepts,
    contains every per-connection failure, and shuts down within a bounded time. Use it as `async with` in the
    task that will also leave it (anyio's task-group rule).

    Attributes:
        host: The address bound.
        port: The port bound (the requested one until entered; 0 asks for any free port).
        connections: Connections accepted so far.
        refused: Connections answered 503 because `max_connections` were open (default: half the process's
            file-descriptor limit, at most 8192).
        errors: Unexpected exceptions swallowed to keep serving; a test can assert it is empty.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        header_timeout_s: float = HEADER_TIMEOUT_S,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        max_connections: int | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.header_timeout_s, self.idle_timeout_s = header_timeout_s, idle_timeout_s
        self.max_connections = max_connections or _default_max_connections()
        self.refused = 0
        self.connections = 0
        self.errors: list[Exception] = []
        self._listener: MultiListener[SocketStream] | None = None
        self._tg: TaskGroup | None = None
        self._owner_task_id: int | None = None
        self._streams: set[SocketStream] = set()

    @property
    def serving(self) -> bool:
        return self._tg is not None

    @property
    def open_connections(self) -> int:
        """Connections being served now (those refused over the cap are not counted)."""
        return len(self._streams)

    @abc.abstractmethod
    async def converse(self, conn: Connection) -> None:
        """Serve one connection until it should close."""

    async def __aenter__(self) -> Self:
        """Binds the port and starts accepting in a task group this object owns."""
        name = type(self).__name__
        if self._tg is not None:
            raise RuntimeError(f"{name} is already serving.")
        listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self.port)
        tg = anyio.create_task_group()
        try:
            await tg.__aenter__()
        except BaseException:
            with anyio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
                await listener.aclose()
            raise
        self._listener, self._tg = listener, tg
        self._owner_task_id = anyio.get_current_task().id
        self.port = listener.extra(SocketAttribute.local_port)
        for sub in listener.listeners:
            if isinstance(sub, SocketListener):
                tg.start_soon(self._accept_loop, sub, tg)
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Stops serving and closes every socket; bounded so a stuck peer cannot hang the caller."""
        tg, listener = self._tg, self._listener
        self._tg = self._listener = None
        if tg is None or listener is None:
            return
        tg.cancel_scope.cancel()
        try:
            if anyio.get_current_task().id != self._owner_task_id:
                name = type(self).__name__
                raise RuntimeError(
                    f"{name} must be exited by the task that entered it (anyio task-group rule); use "
                    f"`async with {name}(...)` in the test body, not across a pytest-asyncio fixture's yield."
                )
            await tg.__aexit__(None, None, None)
        finally:
            with anyio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
                await listener.aclose()
                for stream in list(self._streams):  # accepted during shutdown, handler never ran
                    await stream.aclose()
                self._streams.clear()

    async def _accept_loop(self, listener: SocketListener, tg: TaskGroup) -> None:
        """Accepts connections forever, one handler task each, so a slow request never blocks another."""
        while True:
            try:
                stream = await listener.accept()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            except OSError as exc:  # e.g. EMFILE or ECONNABORTED: keep serving, leave a trace
                self.errors.append(exc)
                await anyio.sleep(0.01)
                continue
            self.connections += 1
            if len(self._streams) >= self.max_connections:
                self.refused += 1
                tg.start_soon(self._refuse_connection, stream)
                continue
            self._streams.add(stream)
            tg.start_soon(self._handle_connection, stream)

    async def _refuse_connection(self, stream: SocketStream) -> None:
        """Over the cap: a 503 and a close, bounded, without reading the request."""
        body = b'{"error": {"message": "Too many connections.", "type": "server_error", "code": null}}'
        head = encode_head(503, {"content-type": "application/json", "content-length": str(len(body))}, False)
        with anyio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
            with contextlib.suppress(*IO_ERRORS):
                await stream.send(head + body)
            await stream.aclose()

    async def _handle_connection(self, stream: SocketStream) -> None:
        """Serves one connection; contains every failure so the server keeps running."""
        try:
            await self.converse(
                Connection(stream, header_timeout_s=self.header_timeout_s, idle_timeout_s=self.idle_timeout_s)
            )
        except IO_ERRORS:
            pass  # the client went away (timeout, pool shutdown, reset): its right, not our error
        except Exception as exc:
            self.errors.append(exc)
        finally:
            self._streams.discard(stream)
            with anyio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
                await stream.aclose()
