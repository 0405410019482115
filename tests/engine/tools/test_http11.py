"""engine.tools._http11: request-head parsing, Content-Length framing and response-head encoding."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from engine.tools._http11 import MAX_BODY_BYTES, HttpError, content_length, encode_head, parse_head


@given(st.binary(max_size=512))
@example(b"")
@example(b"GET / HTTP/1.1\r\nHost")
@example(b"GET http://[::1 HTTP/1.1")
@example(b"GET /\xff HTTP/1.1\r\n\xe9: x")
def test_parse_head_raises_only_http_error_on_arbitrary_bytes(head: bytes) -> None:
    """Any byte string either parses or raises HttpError 400, never another exception."""
    try:
        method, path, headers, keep_alive = parse_head(head)
    except HttpError as err:
        assert err.status == 400
    else:
        assert method.isupper() and path.startswith("/")
        assert all(name == name.lower() for name in headers)
        assert isinstance(keep_alive, bool)


@given(st.lists(st.text(alphabet="GET /v1HTP.:\r\n\t", max_size=40), max_size=6))
def test_parse_head_raises_only_http_error_on_near_miss_heads(lines: list[str]) -> None:
    """Heads built from request-like pieces parse or raise HttpError, never another exception."""
    try:
        parse_head("\r\n".join(lines).encode("latin-1"))
    except HttpError as err:
        assert err.status == 400


def test_parse_head_reads_request_line_and_joins_repeated_headers() -> None:
    """The target's query is dropped, names are lower-cased and repeated headers joined with ", "."""
    head = b"POST http://h/v1/chat?x=1 HTTP/1.1\r\nX-A: 1\r\nx-a:  2 \r\nContent-Length: 3"
    assert parse_head(head) == ("POST", "/v1/chat", {"x-a": "1, 2", "content-length": "3"}, True)


@pytest.mark.parametrize(
    ("version", "connection", "keep_alive"),
    [("1.1", None, True), ("1.1", "close", False), ("1.1", "Upgrade, Close", False), ("1.0", None, False)]
    + [("1.0", "keep-alive", True)],
)
def test_parse_head_keep_alive(version: str, connection: str | None, keep_alive: bool) -> None:
    """HTTP/1.1 keeps alive unless told to close; HTTP/1.0 only when asked."""
    head = f"GET / HTTP/{version}" + (f"\r\nConnection: {connection}" if connection else "")
    assert parse_head(head.encode())[3] is keep_alive


@pytest.mark.parametrize(
    "head",
    [b"GET /  HTTP/1.1", b"get / HTTP/1.1", b"GET / HTTP/2", b"GET * HTTP/1.1", b"GET / HTTP/1.1\r\nX A: 1"]
    + [b"GET / HTTP/1.1\r\nno-colon", b"GET / HTTP/1.1\r\n: empty-name"],
)
def test_parse_head_rejects_malformed_heads(head: bytes) -> None:
    """Bad request lines, methods, versions, targets and header lines are 400s."""
    with pytest.raises(HttpError) as info:
        parse_head(head)
    assert info.value.status == 400


@pytest.mark.parametrize(
    ("headers", "length"),
    [({}, 0), ({"content-length": "0"}, 0), ({"content-length": " 42 "}, 42), ({"content-length": "7, 7"}, 7)],
)
def test_content_length_accepts_unambiguous_values(headers: dict[str, str], length: int) -> None:
    """A missing header means no body; repeated identical values are one value."""
    assert content_length(headers) == length


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"content-length": "5, 6"}, "Conflicting"),
        ({"content-length": "-1"}, "Malformed"),
        ({"content-length": "+5"}, "Malformed"),
        ({"content-length": "0x10"}, "Malformed"),
        ({"content-length": ""}, "Malformed"),
        ({"content-length": "١٢"}, "Malformed"),
        ({"content-length": "5", "transfer-encoding": "chunked"}, "Transfer-Encoding"),
        ({"transfer-encoding": "chunked"}, "Transfer-Encoding"),
    ],
)
def test_content_length_rejects_ambiguous_values(headers: dict[str, str], message: str) -> None:
    """Conflicting, malformed or Transfer-Encoding framing is a 400, never a guess."""
    with pytest.raises(HttpError, match=message) as info:
        content_length(headers)
    assert info.value.status == 400


def test_content_length_refuses_bodies_over_the_limit() -> None:
    """A body longer than MAX_BODY_BYTES is a 413; exactly the limit is accepted."""
    assert content_length({"content-length": str(MAX_BODY_BYTES)}) == MAX_BODY_BYTES
    with pytest.raises(HttpError) as info:
        content_length({"content-length": str(MAX_BODY_BYTES + 1)})
    assert info.value.status == 413


@given(st.text(alphabet=st.characters(codec="latin-1"), max_size=40))
def test_content_length_raises_only_http_error(value: str) -> None:
    """Any header value gives a length or an HttpError, never another exception."""
    try:
        length = content_length({"content-length": value})
    except HttpError:
        return
    assert 0 <= length <= MAX_BODY_BYTES


def test_encode_head_puts_connection_first_and_neutralises_line_breaks() -> None:
    """The connection header leads, and CR/LF in a header cannot split the response."""
    head = encode_head(429, {"retry-after": "1\r\nx-evil: 1"}, keep_alive=False)
    assert head == b"HTTP/1.1 429 Too Many Requests\r\nconnection: close\r\nretry-after: 1  x-evil: 1\r\n\r\n"
    assert encode_head(599, {}, keep_alive=True).startswith(b"HTTP/1.1 599 Unknown\r\nconnection: keep-alive\r\n")
