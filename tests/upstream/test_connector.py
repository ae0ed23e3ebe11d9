"""``UpstreamConnector``: connections that resume reading only when it is paused, and still
pause and resume as aiohttp's own do (a body far over the reader's buffer, in bytes, in
chunks or once decompressed, comes whole). Against a raw upstream on loopback."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from tests.upstream.raw_upstream import raw_upstream
from toolwire.upstream._buffered import take_buffered
from toolwire.upstream._connector import UpstreamConnector, parser_said


def chunked(pieces: list[bytes], *headers: bytes) -> list[bytes | float]:
    """A chunked answer of ``pieces``: its head, then (a moment later, once the reader has
    the connection in hand) its whole body at once."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
    head += b"".join(header + b"\r\n" for header in headers) + b"\r\n"
    return [head, 0.05, b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"]


class Calls:
    """Counts the calls a connection's protocol gets to ``names`` (and the arguments)."""

    def __init__(self, protocol: Any, *names: str) -> None:
        self.seen: dict[str, list[tuple[Any, ...]]] = {name: [] for name in names}
        for name in names:
            setattr(protocol, name, self._counting(name, getattr(protocol, name)))

    def _counting(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            self.seen[name].append(args)
            return method(*args)

        return counted


async def read_slowly(url: str, *, wait: float = 0.3, taking: bool = False, **session: Any) -> tuple[bytes, Calls]:
    """POST, then let the answer's body pile up for ``wait`` seconds before reading it all:
    by ``readany``, or ``taking`` what is buffered at once as the gateway does (``take_buffered``)."""
    async with (
        aiohttp.ClientSession(connector=UpstreamConnector(), **session) as client,
        client.post(url + "/chat/completions", data=b"{}") as response,
    ):
        assert response.connection is not None and response.connection.protocol is not None
        calls = Calls(response.connection.protocol, "pause_reading", "resume_reading", "data_received")
        await asyncio.sleep(wait)
        content, pieces = response.content, []
        while data := (take_buffered(content) if taking else None) or await content.readany():
            pieces.append(data)
        body = b"".join(pieces)
    return body, calls


async def test_a_stream_that_never_paused_is_read_without_resuming() -> None:
    events = [b'data: {"n":%d}\n\n' % n for n in range(44)]  # one HTTP chunk per event, as model servers write
    async with raw_upstream(chunked(events)) as url:
        body, calls = await read_slowly(url, wait=0.1)
    assert body == b"".join(events)
    assert calls.seen["pause_reading"] == []
    # aiohttp's own connection is asked to resume once per chunk read, and feeds its parser an empty read each time
    assert len(calls.seen["resume_reading"]) >= 44
    assert [args for args in calls.seen["data_received"] if args == (b"",)] == []


async def test_a_stream_taken_at_once_asks_to_resume_once() -> None:
    events = [b'data: {"n":%d}\n\n' % n for n in range(44)]
    async with raw_upstream(chunked(events)) as url:
        body, calls = await read_slowly(url, wait=0.1, taking=True)
    assert body == b"".join(events)
    assert calls.seen["pause_reading"] == []
    assert len(calls.seen["resume_reading"]) == 1


@pytest.mark.parametrize("taking", [False, True], ids=["readany", "take_buffered"])
@pytest.mark.parametrize(
    ("pieces", "why"),
    [
        ([bytes([65 + n % 26]) * 4096 for n in range(512)], "2 MiB: over the reader's high-water mark (512 KiB in aiohttp 3.14)"),
        ([b"data: %d\n\n" % n for n in range(24_000)], "24,000 chunks: over the unread chunks a reader holds (16,384)"),
    ],
)
async def test_a_stream_over_the_readers_buffer_pauses_and_comes_whole(pieces: list[bytes], why: str, taking: bool) -> None:
    async with raw_upstream(chunked(pieces)) as url:
        body, calls = await asyncio.wait_for(read_slowly(url, taking=taking), timeout=10)
    assert body == b"".join(pieces), why
    assert calls.seen["pause_reading"], f"{why}: the connection never paused, so this tested nothing"
    assert len(calls.seen["resume_reading"]) >= len(calls.seen["pause_reading"])


@pytest.mark.parametrize("taking", [False, True], ids=["readany", "take_buffered"])
async def test_a_compressed_stream_that_grows_past_the_buffer_pauses_and_comes_whole(taking: bool) -> None:
    text = b"".join(b'data: {"choices":[{"delta":{"content":"token %d"}}]}\n\n' % n for n in range(120_000))
    packed = gzip.compress(text)
    assert len(packed) < 512 * 1024 < 4 * 1024 * 1024 < len(text)
    pieces = [packed[start : start + 16384] for start in range(0, len(packed), 16384)]
    async with raw_upstream(chunked(pieces, b"Content-Encoding: gzip")) as url:
        body, calls = await asyncio.wait_for(read_slowly(url, taking=taking, auto_decompress=True), timeout=10)
    assert body == text
    assert calls.seen["pause_reading"]


async def test_the_connector_refuses_an_aiohttp_that_makes_connections_another_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = aiohttp.TCPConnector.__init__

    def without_a_factory(self: aiohttp.TCPConnector, **kwargs: Any) -> None:
        original(self, **kwargs)
        del self._factory

    monkeypatch.setattr(aiohttp.TCPConnector, "__init__", without_a_factory)
    with pytest.raises(RuntimeError) as raised:
        UpstreamConnector()
    assert str(raised.value) == "this aiohttp makes its connections differently: UpstreamConnector needs updating"


@pytest.mark.parametrize(
    ("message", "said"),
    [
        # aiohttp's C parser: the fault, a blank line, the bytes it stopped at, a caret under them
        ("Invalid character in chunk size:\n\n    b'zz'\n      ^", "Invalid character in chunk size: b'zz'"),
        ("Invalid header value char:\n\n    b'X'", "Invalid header value char: b'X'"),  # no caret: still three lines
        ("Bad status line:\n  Expected HTTP/\n    b'SMTP'", "Bad status line:"),  # the second line is not blank
        ("Data after the body\n\n    b'zz'", "Data after the body"),  # the first line ends with no colon
        ("Invalid method:\n\n", "Invalid method:"),  # nothing quoted
        ("  Invalid method  ", "Invalid method"),
    ],
)
def test_what_a_parser_said_is_told_on_one_line(message: str, said: str) -> None:
    assert parser_said(message) == said


def test_what_a_parser_said_is_bounded() -> None:
    """The bytes it quotes are cut at 200 characters, a message of one line at 500."""
    assert parser_said("Bad chunk:\n\n" + "z" * 300 + "\n  ^") == "Bad chunk: " + "z" * 200
    assert parser_said("y" * 600 + "\nnext line") == "y" * 500
