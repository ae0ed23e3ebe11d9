"""The bounded HTTP/1.1 connection layer (``BoundedHttpToolsProtocol``) with uvicorn in
this process: every bound on a client read, what the client gets when one trips, and
the connection table at its cap. Clients are raw sockets, so that they can be as slow,
silent or greedy as the case needs; nothing here asserts how long anything took.
tests/reliability/test_client_limits.py runs the same bounds in the real gateway process.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import re
import socket
import struct
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any, cast

import orjson
import pytest
from websockets.asyncio.client import connect

from tests.support.chat_upstream import ChatUpstream, Stall, Text
from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV
from tests.support.hostile_upstream import HostileUpstream, prompt
from tests.support.loop_errors import loop_errors
from tests.support.served import chat_config, gateway_app, tripped_here, uvicorn_serving
from tests.support.waiting import until
from toolwire.config import GatewayConfig
from toolwire.server import _connections
from toolwire.server._connections import ConnectionLimits
from toolwire.server._settings import CONFIG_ENV
from toolwire.server._transport import CLIENT_GONE_EXTENSION
from toolwire.server._uvicorn import DrainingWebSocketProtocol

BOUNDS: dict[str, Any] = {
    "client_header_timeout": 0.5,
    "max_header_bytes": 2048,
    "client_body_timeout": 0.5,
    "client_body_min_rate": 1,
    "keep_alive_timeout": 0.5,
}


@pytest.fixture(autouse=True)
def upstream_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UPSTREAM_KEY_ENV, UPSTREAM_KEY)


@pytest.fixture(autouse=True)
async def no_loop_errors() -> AsyncIterator[None]:
    """Whatever a client does, the protocol raises nothing into the event loop (where
    uvloop would log it and close the connection without a word)."""
    with loop_errors() as errors:
        yield
    assert errors == []


@pytest.fixture
def fresh_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The connection table is read once per process from the configuration serve sets;
    each test here reads its own."""
    monkeypatch.setattr(_connections, "_table", None)
    yield


class Raw:
    """A client on a raw connection that sends only what the test says."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def until_closed(self, timeout: float = 30.0) -> bytes:
        """Everything the server sends until it closes the connection."""
        return await asyncio.wait_for(self.reader.read(), timeout)

    def close(self) -> None:
        self.writer.close()


class Served:
    def __init__(self, url: str) -> None:
        self.url = url
        self.port = int(url.rsplit(":", 1)[1])
        self.clients: list[Raw] = []

    async def connect(self, first: bytes = b"") -> Raw:
        client = Raw(*await asyncio.open_connection("127.0.0.1", self.port))
        self.clients.append(client)
        if first:
            await client.send(first)
        return client

    async def close_all(self) -> None:
        for client in self.clients:
            client.close()
            with contextlib.suppress(OSError):
                await client.writer.wait_closed()

    async def hold_streams(self, count: int) -> list[Raw]:
        """``count`` connections, each busy with a stream the upstream holds open (its
        stalls enqueued first), once each stream has begun."""
        held = [await self.connect(HELD_STREAM) for _ in range(count)]
        for client in held:
            await asyncio.wait_for(client.reader.readuntil(b"response.created"), 30)
        return held

    async def get(self, path: str) -> bytes:
        client = await self.connect(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        return await client.until_closed()

    async def tripped(self) -> dict[str, float]:
        text = (await self.get("/metrics")).decode()
        return {m[1]: float(m[2]) for m in re.finditer(r'^toolwire_limits_tripped_total\{limit="([^"]+)"\} (\S+)$', text, re.M)}

    async def connections(self, state: str) -> int:
        text = (await self.get("/metrics")).decode()
        found = re.search(rf'^toolwire_client_connections\{{state="{state}"\}} (\S+)$', text, re.M)
        assert found, text
        return int(float(found[1]))


@asynccontextmanager
async def bounded(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch, **server: Any) -> AsyncIterator[Served]:
    config: GatewayConfig = chat_config(upstream.base_url, **{**BOUNDS, **server})
    monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())
    async with uvicorn_serving(gateway_app(config), config.server) as (url, _):
        served = Served(url)
        try:
            yield served
        finally:
            await served.close_all()


def status_of(answer: bytes) -> int:
    match = re.match(rb"HTTP/1\.1 (\d{3}) ", answer)
    assert match, answer[:200]
    return int(match[1])


def header_names(answer: bytes) -> list[str]:
    """The names of an answer's headers, each line checked to be ``name: value``."""
    head = answer.partition(b"\r\n\r\n")[0].decode()
    lines = head.split("\r\n")[1:]
    assert all(re.fullmatch(r"[a-z-]+: \S.*", line) for line in lines), lines
    return sorted(line.partition(":")[0] for line in lines)


def error_of(answer: bytes) -> dict[str, Any]:
    error: dict[str, Any] = orjson.loads(answer.partition(b"\r\n\r\n")[2])["error"]
    return error


def grew(before: dict[str, float], after: dict[str, float], limit: str) -> float:
    return after.get(limit, 0.0) - before.get(limit, 0.0)


async def served_lifespan(scope: Any, receive: Any, send: Any) -> bool:
    """A bare app's part in uvicorn's lifespan: whether ``scope`` was the lifespan (then
    it has run its course)."""
    if scope["type"] != "lifespan":
        return False
    for reply in ("lifespan.startup.complete", "lifespan.shutdown.complete"):
        await receive()
        await send({"type": reply})
    return True


REQUEST_HEAD = b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
_STREAM = b'{"model": "m", "input": "hold", "stream": true}'
HELD_STREAM = REQUEST_HEAD + f"Content-Length: {len(_STREAM)}\r\n\r\n".encode() + _STREAM


@pytest.mark.usefixtures("fresh_table")
async def test_a_head_that_does_not_arrive_in_time(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    async with bounded(upstream, monkeypatch) as served:
        before = await served.tripped()
        partial = await served.connect(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\n")
        silent = await served.connect()
        answer = await partial.until_closed()
        assert await silent.until_closed() == b"", "a connection that sent nothing is just closed"
        after = await served.tripped()
    assert status_of(answer) == 408
    assert b"\r\nconnection: close\r\n" in answer.lower() and b"content-type: application/json" in answer
    assert header_names(answer) == ["connection", "content-length", "content-type", "date", "server"]
    assert error_of(answer) == {
        "message": "The request head did not arrive within 0.5 s (client_header_timeout).",
        "type": "invalid_request_error", "param": None, "code": "request_timeout",
    }  # fmt: skip
    assert grew(before, after, "client_header_timeout") == 2


@pytest.mark.usefixtures("fresh_table")
async def test_a_head_too_large(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    async with bounded(upstream, monkeypatch) as served:
        before = await served.tripped()
        # The bound holds while a head is still arriving: past it, the rest is not waited for.
        client = await served.connect(REQUEST_HEAD + b"X-Filler: " + b"a" * 3000)
        answer = await client.until_closed()
        after = await served.tripped()
    assert status_of(answer) == 431
    assert error_of(answer) == {
        "message": "The request head is larger than the gateway's limit of 2048 bytes (max_header_bytes).",
        "type": "invalid_request_error", "param": None, "code": "request_header_too_large",
    }  # fmt: skip
    assert grew(before, after, "max_header_bytes") == 1


@pytest.mark.usefixtures("fresh_table")
async def test_a_head_too_large_counts_every_piece_it_came_in(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    """A head dripped in pieces each far under the bound is refused once their sum passes it."""
    async with bounded(upstream, monkeypatch, client_header_timeout=30) as served:
        client = await served.connect(REQUEST_HEAD)
        piece = b"X-Filler: " + b"a" * 90 + b"\r\n"
        for _ in range(-(-(BOUNDS["max_header_bytes"] + 1 - len(REQUEST_HEAD)) // len(piece))):  # just past it
            await asyncio.sleep(0.01)  # each piece read alone
            await client.send(piece)
        answer = await client.until_closed()
    assert status_of(answer) == 431


@pytest.mark.usefixtures("fresh_table")
async def test_a_head_uvicorn_refuses_as_malformed_is_answered_once(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    """A malformed head past the size bound, in one read: uvicorn answers 400 and closes;
    the bound's own check then has nothing more to do (no 431 after it, nothing counted)."""
    async with bounded(upstream, monkeypatch) as served:
        before = tripped_here("max_header_bytes")
        client = await served.connect(b"NOT HTTP AT ALL " + b"a" * 3000 + b"\r\n\r\n")
        answer = await client.until_closed()
        after = tripped_here("max_header_bytes")
    assert status_of(answer) == 400 and answer.count(b"HTTP/1.1 ") == 1, answer
    assert after == before


@pytest.mark.usefixtures("fresh_table")
async def test_a_head_as_large_as_the_bound_is_not_refused(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    """``max_header_bytes`` is the largest head allowed, not the first refused: a head
    still arriving with exactly that many bytes is waited for."""
    partial = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Filler: "
    partial += b"a" * (BOUNDS["max_header_bytes"] - len(partial))
    async with bounded(upstream, monkeypatch, client_header_timeout=30) as served:
        client = await served.connect(partial)
        assert await until(lambda: _connections.process_table().waiting == 1)  # the connection is open
        await asyncio.sleep(0.2)  # the piece read
        await client.send(b"\r\n\r\n")
        answer = await client.until_closed()
    assert status_of(answer) == 200


@pytest.mark.usefixtures("fresh_table")
async def test_a_body_that_stops_arriving(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    async with bounded(upstream, monkeypatch) as served:
        before = await served.tripped()
        started = time.monotonic()
        client = await served.connect(REQUEST_HEAD + b"Content-Length: 100\r\n\r\n" + b'{"model"')
        answer = await client.until_closed()
        waited = time.monotonic() - started
        after = await served.tripped()
    assert status_of(answer) == 408
    assert (error_of(answer)["type"], error_of(answer)["code"]) == ("invalid_request_error", "request_timeout")
    message = error_of(answer)["message"]
    said = re.fullmatch(
        r"The request body arrived too slowly: 8 bytes in (\d+) s, the last (\d+) s ago "
        r"\(client_body_timeout 0\.5 s, client_body_min_rate 1 bytes/s\)\.",
        message,
    )
    assert said, message
    # Both spans are within what this test waited (not a bound on how long it took).
    assert int(said[1]) <= round(waited) + 1 and int(said[2]) <= int(said[1])
    assert grew(before, after, "client_body_timeout") == 1
    assert upstream.requests == []


@pytest.mark.usefixtures("fresh_table")
async def test_a_body_that_keeps_coming_is_waited_for(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    upstream.enqueue(Text("worth the wait"))
    body = b'{"model": "m", "input": "slow but steady"}'
    async with bounded(upstream, monkeypatch, client_body_timeout=1.0, client_body_min_rate=8) as served:
        client = await served.connect(REQUEST_HEAD + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
        for start in range(0, len(body), 8):  # 8 bytes every 0.3 s: no gap of a second, the rate kept
            await client.send(body[start : start + 8])
            await asyncio.sleep(0.3)
        answer = await client.until_closed()
    assert status_of(answer) == 200 and b"worth the wait" in answer


async def trickle(client: Raw, body: bytes, piece: int, every: float) -> None:
    """``body``, ``piece`` bytes every ``every`` seconds (the pace is the subject here)."""
    for start in range(0, len(body), piece):
        await client.send(body[start : start + piece])
        await asyncio.sleep(every)


@pytest.mark.usefixtures("fresh_table")
async def test_a_body_that_stops_after_its_first_check_is_checked_again(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes 0.3 s in, then nothing: at the first check (0.5 s) the client is within its
    0.5 s, so the check is set again for then, and ends the request."""
    async with bounded(upstream, monkeypatch) as served:
        client = await served.connect(REQUEST_HEAD + b"Content-Length: 100\r\n\r\n" + b'{"model"')
        await asyncio.sleep(0.3)
        await client.send(b': "m", ')
        answer = await client.until_closed(timeout=10)
    assert status_of(answer) == 408
    assert error_of(answer)["message"].startswith("The request body arrived too slowly: 15 bytes in ")


@pytest.mark.usefixtures("fresh_table")
async def test_a_body_a_little_faster_than_the_minimum_rate_is_waited_for(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """30 bytes/s against a minimum of 20, no gap near the 0.5 s timeout: the rate's
    allowance (the timeout, then a second for each 20 bytes) is never passed."""
    upstream.enqueue(Text("worth the wait"))
    body = b'{"model": "m", "input": "' + b"x" * 24 + b'"}'  # 52 bytes, 1.8 s
    async with bounded(upstream, monkeypatch, client_body_min_rate=20) as served:
        client = await served.connect(REQUEST_HEAD + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
        await trickle(client, body, 3, 0.1)
        answer = await client.until_closed()
    assert status_of(answer) == 200 and b"worth the wait" in answer


@pytest.mark.usefixtures("fresh_table")
async def test_a_body_under_the_minimum_rate_is_refused_though_it_never_pauses(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10 bytes/s against a minimum of 20: never a gap of the 0.5 s timeout, but past
    its allowance after about a second, checked again and again until then."""
    body = b'{"model": "m", "input": "' + b"x" * 40 + b'"}'  # 68 bytes, 6.8 s at this pace
    async with bounded(upstream, monkeypatch, client_body_min_rate=20) as served:
        client = await served.connect(REQUEST_HEAD + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
        sending = asyncio.ensure_future(trickle(client, body, 1, 0.1))
        answer = await client.until_closed()
        sending.cancel()
    assert status_of(answer) == 408
    assert error_of(answer)["message"].startswith("The request body arrived too slowly: ")
    assert upstream.requests == []


@pytest.mark.usefixtures("fresh_table")
async def test_a_body_s_clock_starts_again_when_the_gateway_reads_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app takes the body only after 2.5 body timeouts: past 64 kB uvicorn stops
    reading, so the client, its kernel buffers full, can send nothing until then. Once
    the app reads, the client has a whole ``client_body_timeout`` for its next bytes, not
    what was left of it at the last check while reading was paused.

    The timeline, in body timeouts of 2 s from the head: checks at 1 and 2 find reading
    paused; reading resumes at 2.5; the client sends the rest 0.75 later, at 3.25, after
    the check at 3, within the timeout counted from 2.5."""
    timeout = 2.0
    config = chat_config("http://127.0.0.1:9/v1", **{**BOUNDS, "client_body_timeout": timeout})
    monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())
    reading = asyncio.Event()
    received: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if await served_lifespan(scope, receive, send):
            return
        await asyncio.sleep(2.5 * timeout)
        reading.set()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            received.append(len(message["body"]))
            more = message["more_body"]
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    first, rest = b"x" * 70_000, b"y" * 1_000  # past uvicorn's 64 kB, all in the kernel's buffers
    async with uvicorn_serving(app, config.server) as (url, _):
        head = REQUEST_HEAD + f"Content-Length: {len(first) + len(rest)}\r\nConnection: close\r\n\r\n".encode()
        client = await Served(url).connect(head + first)
        await asyncio.wait_for(reading.wait(), 30)
        await asyncio.sleep(0.75 * timeout)
        await client.send(rest)
        answer = await client.until_closed()
        client.close()
    assert status_of(answer) == 200 and answer.endswith(b"ok")
    assert sum(received) == len(first) + len(rest)


@pytest.mark.usefixtures("fresh_table")
async def test_a_body_that_stalls_once_the_gateway_reads_again_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the gateway does not read (the app has not taken the first 64 kB), the body's
    check is put off without a busy wait; once it reads again, a client that sends nothing
    more has a ``client_body_timeout`` from then, counted from zero bytes, and no longer.

    All the client sends is read before reading pauses (the last piece alone crosses 64
    kB), so no byte arrives when reading resumes to set a check of its own."""
    timeout, paused_for = 1.0, 2.5
    config = chat_config("http://127.0.0.1:9/v1", **{**BOUNDS, "client_body_timeout": timeout})
    monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())
    cpu_while_paused: list[float] = []
    received: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if await served_lifespan(scope, receive, send):
            return
        cpu = time.process_time()
        await asyncio.sleep(paused_for)
        cpu_while_paused.append(time.process_time() - cpu)
        while (message := await receive())["type"] != "http.disconnect":
            received.append(len(message["body"]))

    first, last = b"x" * 65_000, b"y" * 1_000
    async with uvicorn_serving(app, config.server) as (url, _):
        head = REQUEST_HEAD + f"Content-Length: {len(first) + len(last) + 1_000}\r\n\r\n".encode()
        client = await Served(url).connect(head + first)
        await asyncio.sleep(0.3)  # read, under uvicorn's 64 kB mark
        await client.send(last)
        answer = await client.until_closed(timeout=30)
        client.close()
    assert status_of(answer) == 408
    assert error_of(answer)["message"] == (
        "The request body arrived too slowly: 0 bytes in 1 s, the last 1 s ago "
        "(client_body_timeout 1 s, client_body_min_rate 1 bytes/s)."
    )
    assert sum(received) == len(first) + len(last)
    assert cpu_while_paused[0] < paused_for / 2, "the check is put off, not retried at once"


@pytest.mark.usefixtures("fresh_table")
async def test_a_body_reaches_the_app_byte_for_byte_however_it_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A body in pieces of every size around uvicorn's 64 kB mark, some of them arriving
    while the app is not reading (so several wait together) and a second body on the same
    connection: each message the app takes is ``bytes``, and they add up to each body as
    sent, nothing of one in the other."""
    config = chat_config("http://127.0.0.1:9/v1", **{**BOUNDS, "client_body_timeout": 10.0})
    monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())
    taken: list[list[Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if await served_lifespan(scope, receive, send):
            return
        messages: list[Any] = []
        taken.append(messages)
        more = True
        while more:
            await asyncio.sleep(0.02)  # meanwhile the client sends on: what came waits together
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            messages.append(message["body"])
            more = message["more_body"]
        answer = str(sum(map(len, messages))).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(len(answer)).encode())]})
        await send({"type": "http.response.body", "body": answer})

    sizes = [1, 65_535, 65_536, 65_537, 1_000, 300_000, 7, 1_000_000, *[20_000] * 5]
    first = [bytes([65 + index % 26]) * size for index, size in enumerate(sizes)]
    second = [bytes([97 + index % 26]) * 1_000 for index in range(40)]  # each while the app waits: some wait together
    sent = [b"".join(first), b"".join(second)]
    async with uvicorn_serving(app, config.server) as (url, _):
        client = await Served(url).connect()
        for pieces, body in zip((first, second), sent, strict=True):
            close = b"Connection: close\r\n" if pieces is second else b""
            await client.send(REQUEST_HEAD + f"Content-Length: {len(body)}\r\n".encode() + close + b"\r\n")
            for piece in pieces:
                await client.send(piece)
                await asyncio.sleep(0.002)
            if pieces is first:  # the answer before the next request: not pipelined, whose body uvicorn reads later at once
                head = await asyncio.wait_for(client.reader.readuntil(b"\r\n\r\n"), 30)
                told = await client.reader.readexactly(len(str(len(body))))
                assert status_of(head) == 200 and int(told) == len(body)
        answer = await client.until_closed()
        client.close()
    assert status_of(answer) == 200 and answer.endswith(str(len(sent[1])).encode())
    assert [b"".join(messages) for messages in taken] == sent
    assert all(type(body) is bytes for messages in taken for body in messages)
    assert all(len(messages) > 1 for messages in taken)  # each body came in several messages
    assert max(map(len, taken[1])) > 1_000  # some of them several pieces that waited together


def test_body_chunks_are_measured_and_given_joined_and_one_alone_as_it_came() -> None:
    """What uvicorn asks of the body waiting for the app: ``+=``, ``len`` (against its
    64 kB mark) and ``bytes()``."""
    assert (len(_connections.BodyChunks()), bytes(_connections.BodyChunks())) == (0, b"")
    one, first, second = _connections.BodyChunks(), b"a" * 70_000, b"b" * 3
    one += first
    assert len(one) == 70_000 and bytes(one) is first  # not copied
    one += second
    assert len(one) == 70_003 and bytes(one) == first + second


@pytest.mark.usefixtures("fresh_table")
async def test_a_body_waits_for_the_app_as_the_chunks_it_came_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each request's body waits in a ``BodyChunks`` (uvicorn's ``bytearray`` would copy it
    in and out again): the chunks they were given are the body, byte for byte."""
    config = chat_config("http://127.0.0.1:9/v1", **{**BOUNDS, "client_body_timeout": 10.0})
    monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())
    given: list[bytes] = []

    class Watched(_connections.BodyChunks):
        def __iadd__(self, chunk: bytes) -> Watched:
            given.append(chunk)
            super().__iadd__(chunk)
            return self

    monkeypatch.setattr(_connections, "BodyChunks", Watched)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if await served_lifespan(scope, receive, send):
            return
        more = True
        while more:
            message = await receive()
            more = message["type"] == "http.request" and message["more_body"]
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    bodies = [b"x" * 300_000, b"y" * 10]
    async with uvicorn_serving(app, config.server) as (url, _):
        client = await Served(url).connect()
        for body in bodies:
            await client.send(REQUEST_HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            assert status_of(await asyncio.wait_for(client.reader.readuntil(b"\r\n\r\n"), 30)) == 204
        client.close()
    assert b"".join(given) == b"".join(bodies)


@pytest.mark.usefixtures("fresh_table")
async def test_a_request_answered_before_its_body_is_not_answered_again_when_the_body_stalls(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with bounded(upstream, monkeypatch, max_body_bytes=1000) as served:
        client = await served.connect(REQUEST_HEAD + b"Content-Length: 5000\r\n\r\n" + b'{"model"')  # then nothing
        answer = await client.until_closed()
    assert status_of(answer) == 413
    assert answer.count(b"HTTP/1.1 ") == 1, answer


@pytest.mark.usefixtures("fresh_table")
async def test_a_body_that_ends_after_its_answer_leaves_the_connection_waiting_for_a_request(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request answered before its body came (no route reads it): once the body is in,
    the connection waits for its next request like any kept-alive one, and is closed when
    none comes within keep_alive_timeout."""
    async with bounded(upstream, monkeypatch) as served:
        before = await served.tripped()
        client = await served.connect(b"POST /v2/nothing HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
        answer = await asyncio.wait_for(client.reader.readuntil(b"}}"), 30)
        await client.send(b"0123456789")
        assert await until(lambda: _connections.process_table().waiting == 1)  # the body is in, the connection waits
        rest = await client.until_closed()
        after = await served.tripped()
    assert status_of(answer) == 404 and rest == b""
    assert grew(before, after, "keep_alive_timeout") == 1


@pytest.mark.usefixtures("fresh_table")
async def test_a_kept_alive_connection_s_next_head_has_the_whole_bound(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each request's head is counted from its own first byte: after a request and its
    answer, the next head on the connection may again have ``max_header_bytes``."""
    partial = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Filler: "
    partial += b"a" * (BOUNDS["max_header_bytes"] - len(partial))
    async with bounded(upstream, monkeypatch, client_header_timeout=30, keep_alive_timeout=30) as served:
        client = await served.connect(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        first = await asyncio.wait_for(client.reader.readuntil(b'{"status":"ok"}'), 30)
        await client.send(partial)
        await asyncio.sleep(0.2)  # the piece read
        await client.send(b"\r\n\r\n")
        second = await client.until_closed()
    assert status_of(first) == 200
    assert status_of(second) == 200


@pytest.mark.usefixtures("fresh_table")
async def test_an_idle_kept_alive_connection_is_closed(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    async with bounded(upstream, monkeypatch) as served:
        before = await served.tripped()
        client = await served.connect(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = await client.until_closed()
        after = await served.tripped()
    assert status_of(answer) == 200 and answer.count(b"HTTP/1.1") == 1
    assert grew(before, after, "keep_alive_timeout") == 1


@pytest.mark.usefixtures("fresh_table")
async def test_a_second_request_on_a_kept_alive_connection_has_its_own_head_deadline(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with bounded(upstream, monkeypatch, keep_alive_timeout=30) as served:
        client = await served.connect(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        first = await asyncio.wait_for(client.reader.readuntil(b'{"status":"ok"}'), 30)
        await client.send(b"GET /healthz HTTP/1.1\r\n")  # and then nothing more
        rest = await client.until_closed()
    assert status_of(first) == 200
    assert status_of(rest) == 408


@pytest.mark.usefixtures("fresh_table")
async def test_a_pipelined_head_waits_for_the_answer_before_it_without_a_deadline(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head deadline is for a client that stalls, not for one whose next request is
    early: while the answer before it streams, a pipelined head's clock does not run."""
    release = threading.Event()
    upstream.enqueue(Stall(after_chunks=2, seconds=30, reply=Text("slow"), release=release))
    body = b'{"model": "m", "input": "hi", "stream": true}'
    try:
        async with bounded(upstream, monkeypatch, keep_alive_timeout=30) as served:
            client = await served.connect(REQUEST_HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            first = await asyncio.wait_for(client.reader.readuntil(b"response.output_text.delta"), 30)
            await client.send(b"GET /healthz HTTP/1.1\r\n")  # the next request's head begins
            await asyncio.sleep(2 * BOUNDS["client_header_timeout"])  # past the head deadline, the answer still streaming
            release.set()
            first += await asyncio.wait_for(client.reader.readuntil(b"0\r\n\r\n"), 30)  # the stream's last chunk
            await client.send(b"Host: x\r\nConnection: close\r\n\r\n")
            second = await client.until_closed()
    finally:
        release.set()
    assert status_of(first) == 200 and b"response.completed" in first
    assert status_of(second) == 200 and second.endswith(b'{"status":"ok"}')


@pytest.mark.usefixtures("fresh_table")
async def test_at_the_cap_the_longest_idle_connection_makes_room(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    async with bounded(upstream, monkeypatch, max_connections=2, keep_alive_timeout=30, client_header_timeout=30) as served:
        before = await served.tripped()
        oldest = await served.connect()
        await asyncio.sleep(0.1)
        newer = await served.connect()
        await asyncio.sleep(0.1)
        newest = await served.connect(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert status_of(await newest.until_closed()) == 200
        assert await oldest.until_closed() == b"", "the longest waiting, silent one was closed"
        table = _connections.process_table()
        assert await until(lambda: table.open <= 1)  # the server has let the closed ones go
        assert (table.open, table.waiting) == (1, 1), "the reclaimed one is counted out once, not twice"
        newer.close()
        after = await served.tripped()
    assert grew(before, after, "max_connections_reclaimed") >= 1


@pytest.mark.usefixtures("fresh_table")
async def test_when_every_connection_is_busy_a_newcomer_is_told_to_retry(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream.enqueue(*[Stall(after_chunks=1, seconds=30)] * 2)
    async with bounded(upstream, monkeypatch, max_connections=2, client_header_timeout=30) as served:
        held = await served.hold_streams(2)
        before = await served.tripped()
        refused = await served.connect(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = await refused.until_closed()
        for client in held:
            client.close()
        await asyncio.to_thread(upstream.wait_for_disconnect, 10)
        after = await served.tripped()
    assert status_of(answer) == 503
    assert b"retry-after: 1\r\n" in answer.lower() and b"connection: close\r\n" in answer.lower()
    assert error_of(answer) == {
        "message": "The gateway has as many connections as it allows (max_connections), all busy; retry in 1 s.",
        "type": "service_unavailable", "param": None, "code": "gateway_busy",
    }  # fmt: skip
    assert grew(before, after, "max_connections") >= 1


@pytest.mark.usefixtures("fresh_table")
async def test_past_the_overflow_a_newcomer_is_closed_at_once(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    """One place (max_connections 1), held by a stream: the next four connections (the
    overflow for one) are each told to retry when their request comes; a fifth is closed
    without a word; every one is counted, and every one gives its count back."""
    upstream.enqueue(Stall(after_chunks=1, seconds=30))
    healthz = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    async with bounded(upstream, monkeypatch, max_connections=1, client_header_timeout=30) as served:
        table = _connections.process_table()
        [held] = await served.hold_streams(1)
        before = tripped_here("max_connections")  # read in this process: no connection is left to ask /metrics
        told = [await served.connect() for _ in range(4)]
        closed = await served.connect()
        assert await closed.until_closed() == b"", "closed at once, past the overflow"
        for client in told:
            await client.send(healthz)
        answers = [await client.until_closed() for client in told]
        after = tripped_here("max_connections")
        held.close()
        await asyncio.to_thread(upstream.wait_for_disconnect, 10)
        assert await until(lambda: table.open == 0), "the server lets every connection go"
    assert [status_of(answer) for answer in answers] == [503] * 4
    assert after - before == 5


@pytest.mark.usefixtures("fresh_table")
async def test_the_connections_are_counted(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    async with bounded(upstream, monkeypatch, client_header_timeout=30) as served:
        [await served.connect() for _ in range(3)]
        for _ in range(200):  # until the server has taken the three in, bounded (10 s)
            waiting = await served.connections("waiting")
            if waiting >= 3:
                break
            await asyncio.sleep(0.05)
        opened = await served.connections("open")
    assert waiting == 3 and opened >= 4  # the three, and the one asking


def test_the_table_reads_its_limits_from_the_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_connections, "_table", None)
    config = chat_config("http://127.0.0.1:9/v1", max_connections=7, client_header_timeout=3.5, max_header_bytes=4096)
    monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())
    table = _connections.process_table()
    assert _connections.process_table() is table, "read once per process"
    limits = table.limits
    assert (limits.max_connections, limits.overflow, limits.header_timeout, limits.max_header_bytes) == (7, 4, 3.5, 4096)
    assert (limits.body_timeout, limits.body_min_rate, limits.send_timeout) == (30.0, 8192, 60.0)
    monkeypatch.setattr(_connections, "_table", None)
    monkeypatch.delenv(CONFIG_ENV)
    assert _connections.process_table().limits.header_timeout == 10.0  # no configuration: the defaults
    # Without max_connections, the connections are what the open files leave beside max_streams.
    streams_set = _connections.ConnectionLimits.of(chat_config("http://127.0.0.1:9/v1", max_streams=10).server, 1024)
    assert (streams_set.max_connections, streams_set.overflow) == (891, 55)


@pytest.mark.usefixtures("fresh_table")
async def test_a_client_that_stops_reading_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """An endless stream to a client that takes nothing: once the socket's buffers are full
    the gateway waits ``client_send_timeout``, then drops the client, which cancels the
    upstream request."""
    with HostileUpstream() as hostile:
        config = chat_config(f"http://127.0.0.1:{hostile.port}/v1", **BOUNDS, client_send_timeout=0.5)
        monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())
        async with uvicorn_serving(gateway_app(config), config.server) as (url, _):
            served = Served(url)
            body = orjson.dumps({"model": "m", "input": prompt("endless-text"), "stream": True})
            sock = socket.create_connection(("127.0.0.1", served.port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            try:
                before = await served.tripped()
                sock.sendall(REQUEST_HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                closed = await asyncio.to_thread(hostile.closed.wait_for_first, 60)  # nothing read
                after = await served.tripped()
                answers = await served.get("/healthz")
            finally:
                sock.close()
                await served.close_all()
    assert closed.behaviour == "endless-text"
    assert grew(before, after, "client_send_timeout") == 1
    assert status_of(answers) == 200


def _read_for(sock: socket.socket, seconds: float, at_most: int) -> int:
    """Read whatever comes for ``seconds``, up to ``at_most`` bytes: the bytes read."""
    sock.settimeout(0.05)
    read, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline and read < at_most:
        with contextlib.suppress(TimeoutError):
            read += len(sock.recv(min(65536, at_most - read)))
    return read


@pytest.mark.usefixtures("fresh_table")
async def test_a_client_that_stops_reading_again_is_dropped_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The send deadline is for each time the client stops reading: one that stalls, takes
    its answer again in time, then stalls for good is dropped ``client_send_timeout`` after
    its second stall (not spared because its first stall ended)."""
    with HostileUpstream() as hostile:
        config = chat_config(f"http://127.0.0.1:{hostile.port}/v1", **BOUNDS, client_send_timeout=2)
        monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())
        async with uvicorn_serving(gateway_app(config), config.server) as (url, _):
            served = Served(url)
            body = orjson.dumps({"model": "m", "input": prompt("endless-text"), "stream": True})
            sock = socket.create_connection(("127.0.0.1", served.port))  # a window wide enough to drain at once
            try:
                before = await served.tripped()
                sock.sendall(REQUEST_HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                await asyncio.sleep(1)  # the first stall: the buffers on the way fill
                # Taken again in time: a few MiB, not all that comes. Read for the whole half second
                # at loopback speed, the stream could pass the upstream's 128 MiB bound, which would
                # end it before the second stall (seen once, on a fast host).
                read = await asyncio.to_thread(_read_for, sock, 0.5, 8 * 1024 * 1024)
                during = await served.tripped()
                closed = await asyncio.to_thread(hostile.closed.wait_for_first, 30)  # the second stall, for good
                after = await served.tripped()
            finally:
                sock.close()
                await served.close_all()
    assert read > 0 and grew(before, during, "client_send_timeout") == 0
    assert closed.behaviour == "endless-text"
    assert grew(before, after, "client_send_timeout") == 1


@pytest.mark.usefixtures("fresh_table")
async def test_a_newcomer_over_the_cap_is_served_when_room_is_made_before_its_head(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Accepted while every place was busy, it would be told 503 when its head arrives; but
    a place came free meanwhile, so it is served."""
    upstream.enqueue(*[Stall(after_chunks=1, seconds=30)] * 2)
    async with bounded(upstream, monkeypatch, max_connections=2, client_header_timeout=30) as served:
        held = await served.hold_streams(2)
        newcomer = await served.connect()  # over the cap, its head not sent yet
        held[0].close()
        await asyncio.to_thread(upstream.wait_for_disconnect, 10)  # its place is free
        await newcomer.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = await newcomer.until_closed()
        held[1].close()
    assert status_of(answer) == 200, answer


def test_the_busy_answer_is_json_that_says_when_to_retry() -> None:
    """What uvicorn is handed for a request that finds every place busy (``_refuse_busy``)."""
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(_connections._refuse_busy({}, None, send))
    start, body = sent
    headers = {name.lower(): value.lower() for name, value in start["headers"]}
    assert start["status"] == 503 and body["body"] == _connections._BUSY_BODY
    assert headers == {
        b"content-type": b"application/json",
        b"content-length": str(len(_connections._BUSY_BODY)).encode(),
        b"retry-after": b"1",
        b"connection": b"close",
    }


@pytest.mark.usefixtures("fresh_table")
async def test_a_websocket_asked_for_when_every_place_is_busy_is_told_to_retry(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream.enqueue(*[Stall(after_chunks=1, seconds=30)] * 2)
    handshake = (
        b"GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    async with bounded(upstream, monkeypatch, max_connections=2, client_header_timeout=30) as served:
        held = await served.hold_streams(2)
        refused = await served.connect(handshake)
        answer = await refused.until_closed()
        for client in held:
            client.close()
    assert status_of(answer) == 503
    assert b"\r\nretry-after: 1\r\n" in answer and b"\r\nconnection: close\r\n" in answer
    assert error_of(answer) == {
        "message": "The gateway has as many connections as it allows (max_connections), all busy; retry in 1 s.",
        "type": "service_unavailable", "param": None, "code": "gateway_busy",
    }  # fmt: skip


@pytest.mark.usefixtures("fresh_table")
async def test_a_websocket_keeps_its_place_until_it_closes(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    """An upgraded connection counts as open and busy (never closed to make room) for as
    long as its WebSocket lasts; once it closes, its place is free again."""
    upstream.enqueue(Text("hi"), Text("yes"))
    async with bounded(upstream, monkeypatch, max_connections=1, keep_alive_timeout=30, client_header_timeout=30) as served:
        table = _connections.process_table()
        async with connect(served.url.replace("http://", "ws://") + "/v1/responses", open_timeout=20) as ws:
            await ws.send(orjson.dumps({"type": "response.create", "model": "m", "input": "hi"}).decode())
            while orjson.loads(await asyncio.wait_for(ws.recv(), 30))["type"] != "response.completed":
                pass
            assert (table.open, table.waiting) == (1, 0)
            refused = await served.connect(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert status_of(await refused.until_closed()) == 503, "the WebSocket was not closed to make room"
            await asyncio.sleep(2 * BOUNDS["client_body_timeout"])  # the HTTP side's bounds end with the upgrade
            await ws.send(orjson.dumps({"type": "response.create", "model": "m", "input": "still here?"}).decode())
            while orjson.loads(await asyncio.wait_for(ws.recv(), 30))["type"] != "response.completed":
                pass
        assert await until(lambda: table.open == 0), "the server sees the WebSocket close"
        assert status_of(await served.get("/healthz")) == 200


@pytest.mark.usefixtures("fresh_table")
async def test_a_kept_alive_connection_waiting_for_its_next_request_makes_room(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with bounded(upstream, monkeypatch, max_connections=1, keep_alive_timeout=30, client_header_timeout=30) as served:
        kept = await served.connect(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        first = await asyncio.wait_for(kept.reader.readuntil(b'{"status":"ok"}'), 30)
        newcomer = await served.connect(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = await newcomer.until_closed()
        assert await kept.until_closed() == b"", "the idle kept-alive one was closed to make room"
    assert status_of(first) == 200 and status_of(answer) == 200


@pytest.mark.usefixtures("fresh_table")
async def test_a_connection_that_left_is_no_longer_one_to_make_room_with(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A silent client that leaves gives its place back for good: at the cap, room is made
    by closing one still there (not by forgetting the one gone a second time)."""
    async with bounded(upstream, monkeypatch, max_connections=1, keep_alive_timeout=30, client_header_timeout=30) as served:
        gone = await served.connect()
        gone.close()
        await asyncio.wait_for(gone.writer.wait_closed(), 30)
        assert await until(lambda: _connections.process_table().open == 0, seconds=2, step=0.01)  # the server has seen it go
        waiting = await served.connect()
        newcomer = await served.connect(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = await newcomer.until_closed()
        assert await waiting.until_closed() == b"", "the one still waiting was closed to make room"
    assert status_of(answer) == 200


@pytest.mark.usefixtures("fresh_table")
@pytest.mark.parametrize(
    "case", ["a head cut short", "a stream answered", "a stream its client left", "a WebSocket", "a kept-alive one reset"]
)
async def test_a_closed_connection_is_let_go_without_the_cyclic_collector(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """When a connection closes, its protocols (and the buffers they hold) go at once: no
    reference cycle keeps them for the cyclic collector, which under a burst of connections
    runs too seldom to give their memory back (otherwise only bench.hostile's 60 s soak sees
    it, by the process's RSS; here the collector is off)."""
    protocols: list[weakref.ref[Any]] = []
    for kind in (_connections.BoundedHttpToolsProtocol, DrainingWebSocketProtocol):
        monkeypatch.setattr(kind, "connection_made", _recording(kind.connection_made, protocols))
    upstream.enqueue(Stall(after_chunks=1, seconds=30) if case == "a stream its client left" else Text("let go"))
    async with bounded(upstream, monkeypatch, keep_alive_timeout=30) as served:  # no timer lets any go
        gc.collect()
        gc.disable()
        try:
            if case == "a WebSocket":
                async with connect(served.url.replace("http://", "ws://") + "/v1/responses", open_timeout=20) as ws:
                    await ws.send(orjson.dumps({"type": "response.create", "model": "m", "input": "hi"}).decode())
                    while orjson.loads(await asyncio.wait_for(ws.recv(), 30))["type"] != "response.completed":
                        pass
            else:
                if case == "a head cut short":
                    client = await served.connect(b"POST /v1/resp")
                    assert await until(lambda: _connections.process_table().waiting == 1)
                elif case == "a kept-alive one reset":  # its loss comes with an error (ECONNRESET)
                    client = await served.connect(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                    await asyncio.wait_for(client.reader.readuntil(b'{"status":"ok"}'), 30)
                    sock = client.writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    client = await served.connect(HELD_STREAM)
                    ending = b"response.completed" if case == "a stream answered" else b"response.created"
                    await asyncio.wait_for(client.reader.readuntil(ending), 30)
                client.close()
                await asyncio.wait_for(client.writer.wait_closed(), 30)
            assert await until(lambda: _connections.process_table().open == 0)
            assert len(protocols) == (2 if case == "a WebSocket" else 1)
            held = lambda: [protocol() for protocol in protocols if protocol() is not None]  # noqa: E731
            assert await until(lambda: not held(), seconds=5), f"still held: {held()}"
        finally:
            gc.enable()


def _recording(connection_made: Any, protocols: list[weakref.ref[Any]]) -> Any:
    def recorded(protocol: Any, transport: asyncio.Transport) -> None:
        protocols.append(weakref.ref(protocol))
        connection_made(protocol, transport)

    return recorded


async def test_bytes_pending_are_those_the_kernel_holds_unread() -> None:
    """What spares a connection from being reclaimed: its request's bytes have arrived but
    the busy event loop has not read them yet (reading paused here, as a busy loop would)."""
    loop = asyncio.get_running_loop()
    accepted: asyncio.Future[asyncio.Transport] = loop.create_future()

    class Unread(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            transport.pause_reading()
            accepted.set_result(transport)

    server = await loop.create_server(Unread, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        transport = await asyncio.wait_for(accepted, 10)
        connection = SimpleNamespace(transport=transport)  # what bytes_pending reads of the protocol
        assert _connections.BoundedHttpToolsProtocol.bytes_pending(connection) is False  # type: ignore[arg-type]
        writer.write(b"GET /healthz HTTP/1.1\r\n")
        await writer.drain()
        pending = _connections.BoundedHttpToolsProtocol.bytes_pending
        assert await until(lambda: pending(connection) is True)  # type: ignore[arg-type]  # in the kernel's buffer
        writer.close()
        transport.close()
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.usefixtures("fresh_table")
async def test_each_request_is_offered_the_watch_on_its_connection_s_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every request finds in its scope (``CLIENT_GONE_EXTENSION``) the watch of its
    connection's ``Departures``: the same for the requests of a kept-alive connection,
    another for another connection; when the client goes, what watches is called."""
    config = chat_config("http://127.0.0.1:9/v1", **BOUNDS)
    monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())
    offered: list[Any] = []
    gone = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if await served_lifespan(scope, receive, send):
            return
        watch = scope["extensions"][CLIENT_GONE_EXTENSION]["watch"]
        offered.append(watch)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]
                    if scope["path"] != "/hold" else []})
        if scope["path"] != "/hold":
            await send({"type": "http.response.body", "body": b"ok"})
            return
        watch(gone.set)
        await send({"type": "http.response.body", "body": b"held", "more_body": True})
        await gone.wait()

    async with uvicorn_serving(app, config.server) as (url, _):
        served = Served(url)
        first = await served.connect(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.wait_for(first.reader.readuntil(b"\r\n\r\nok"), 10)
        await first.send(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.wait_for(first.reader.readuntil(b"held"), 10)
        other = await served.connect(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.wait_for(other.reader.readuntil(b"\r\n\r\nok"), 10)
        assert not gone.is_set()
        first.close()
        await asyncio.wait_for(gone.wait(), 10)
        await served.close_all()
    assert len(offered) == 3
    assert offered[0] == offered[1], "one connection, one Departures"
    assert offered[0].__self__ is not offered[2].__self__, "each connection its own"


class _Upgraded:
    """What the table sets on a connection upgraded to a WebSocket."""

    on_connection_lost: Any = None


def _table_of(max_connections: int, overflow: int) -> _connections.ConnectionTable:
    return _connections.ConnectionTable(ConnectionLimits(
        header_timeout=1, max_header_bytes=1024, body_timeout=1, body_min_rate=1, send_timeout=1,
        max_connections=max_connections, overflow=overflow,
    ))  # fmt: skip


def test_when_the_last_connection_closes_what_they_held_goes_back_a_moment_later(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a burst, the memory its connections freed as they closed goes back to the
    system (``return_freed_memory_soon``) once none is left, over HTTP or a WebSocket; not
    while others are open."""
    table = _table_of(max_connections=8, overflow=2)
    trims: list[int] = []
    monkeypatch.setattr(_connections, "return_freed_memory_soon", lambda: trims.append(table.open))
    first, second, third = (cast(_connections.BoundedHttpToolsProtocol, object()) for _ in range(3))
    for connection in (first, second, third):
        table.admit(connection)
    table.closed(first)
    websocket = cast(DrainingWebSocketProtocol, _Upgraded())
    table.upgraded(second, websocket)
    table.closed(third)
    assert trims == []
    assert websocket.on_connection_lost is not None
    websocket.on_connection_lost()
    assert trims == [0]
    table.admit(first)
    table.closed(first)
    table.closed(first)  # told twice: counted once
    assert trims == [0, 0] and table.open == 0


class _Waiting:
    """A connection as the table sees it: whether its client's bytes wait unread, and
    whether it was closed to make room."""

    def __init__(self, pending: bool = False) -> None:
        self.pending = pending
        self.asked = 0
        self.reclaimed = False

    def bytes_pending(self) -> bool:
        self.asked += 1
        return self.pending

    def reclaim(self) -> None:
        self.reclaimed = True


def _as_connection(waiting: _Waiting) -> _connections.BoundedHttpToolsProtocol:
    return cast(_connections.BoundedHttpToolsProtocol, waiting)


def test_at_the_cap_a_newcomer_is_admitted_in_the_place_of_the_longest_waiting() -> None:
    """The room is made at once (counted out before the newcomer is judged), not when the
    closed connection's loss is reported later; the one whose bytes wait unread is spared."""
    table = _table_of(max_connections=3, overflow=2)
    unread, idle, newer = _Waiting(pending=True), _Waiting(), _Waiting()  # longest waiting first
    for waiting in (unread, idle, newer):
        assert table.admit(_as_connection(waiting)) is _connections.Admission.ADMITTED
    newcomer = _Waiting()
    assert table.admit(_as_connection(newcomer)) is _connections.Admission.ADMITTED
    assert (unread.reclaimed, idle.reclaimed, newer.reclaimed) == (False, True, False)
    assert (table.open, table.waiting) == (3, 3)
    table.closed(_as_connection(idle))  # its loss, reported when the transport closes
    assert (table.open, table.waiting) == (3, 3), "counted out once"


def test_a_newcomer_closed_at_once_is_not_counted() -> None:
    """Past the overflow a newcomer is closed at once: counted out as it is turned away,
    not when its loss is reported later (another newcomer meanwhile sees the true count)."""
    table = _table_of(max_connections=1, overflow=1)
    busy = [_Waiting(pending=True), _Waiting(pending=True)]
    assert [table.admit(_as_connection(connection)) for connection in busy] == [
        _connections.Admission.ADMITTED, _connections.Admission.OVER,
    ]  # fmt: skip
    turned_away = _Waiting()
    assert table.admit(_as_connection(turned_away)) is _connections.Admission.CLOSED
    assert table.open == 2
    table.closed(_as_connection(turned_away))  # its loss, reported when the transport closes
    assert table.open == 2


def test_making_room_looks_at_no_more_than_the_longest_waiting_few() -> None:
    """Each admission at the cap asks at most ``RECLAIM_SCAN`` connections whether bytes
    wait for them, however many wait: a flood of newcomers costs no scan of the whole table."""
    many = 3 * _connections.RECLAIM_SCAN
    table = _table_of(max_connections=many, overflow=1)
    waiting = [_Waiting(pending=True) for _ in range(many)]
    for connection in waiting:
        table.admit(_as_connection(connection))
    assert table.admit(_as_connection(_Waiting())) is _connections.Admission.OVER
    assert sum(connection.asked for connection in waiting) == _connections.RECLAIM_SCAN
    assert [connection.asked for connection in waiting[: _connections.RECLAIM_SCAN]] == [1] * _connections.RECLAIM_SCAN
    assert not any(connection.reclaimed for connection in waiting)


def test_an_upgraded_connection_is_never_one_to_make_room_with_and_nothing_of_it_is_kept() -> None:
    """Once upgraded, the HTTP protocol is let go by the table (it hears nothing more of
    that connection), and the WebSocket is let go once it closes: neither is kept alive."""
    table = _table_of(max_connections=1, overflow=1)
    http, websocket = _Waiting(), _Upgraded()
    http_gone, websocket_gone = weakref.ref(http), weakref.ref(websocket)
    table.admit(_as_connection(http))
    table.upgraded(_as_connection(http), cast(DrainingWebSocketProtocol, websocket))
    assert (table.open, table.waiting) == (1, 0)
    newcomer = _Waiting()
    assert table.admit(_as_connection(newcomer)) is _connections.Admission.OVER
    assert not http.reclaimed
    table.closed(_as_connection(newcomer))
    del http
    gc.collect()
    assert http_gone() is None, "the table let the upgraded HTTP protocol go"
    closing, websocket.on_connection_lost = websocket.on_connection_lost, None  # as the protocol does
    del websocket
    closing()
    closing()  # told twice: counted once
    del closing
    gc.collect()
    assert websocket_gone() is None, "the table let the closed WebSocket go"
    assert (table.open, table.waiting) == (0, 0)


async def test_a_connection_without_its_socket_has_no_bytes_pending() -> None:
    """A connection being torn down (its transport has let its socket go) is one to make
    room with, not one spared as if its request were on its way."""
    connection = SimpleNamespace(transport=SimpleNamespace(get_extra_info=lambda name: None))
    assert _connections.BoundedHttpToolsProtocol.bytes_pending(connection) is False  # type: ignore[arg-type]


@pytest.mark.usefixtures("fresh_table")
async def test_a_connection_busy_with_a_pipelined_request_is_not_one_to_make_room_with(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request pipelined behind another runs once the first is answered: the connection
    is busy again, not waiting for a request, so at the cap a newcomer is told to retry
    rather than the pipelined request's stream cut to make room."""
    upstream.enqueue(Stall(after_chunks=1, seconds=30))
    async with bounded(upstream, monkeypatch, max_connections=1, keep_alive_timeout=30, client_header_timeout=30) as served:
        table = _connections.process_table()
        pipelined = await served.connect(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + HELD_STREAM)
        first = await asyncio.wait_for(pipelined.reader.readuntil(b"response.created"), 30)
        assert (table.open, table.waiting) == (1, 0)
        newcomer = await served.connect(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = await newcomer.until_closed()
        assert not pipelined.reader.at_eof()
        pipelined.close()
        await asyncio.to_thread(upstream.wait_for_disconnect, 10)
    assert first.count(b"HTTP/1.1 200 OK") == 2
    assert status_of(answer) == 503


@pytest.mark.usefixtures("fresh_table")
async def test_a_connection_still_sending_a_body_after_its_answer_is_not_one_to_make_room_with(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answered before its body came (no route reads it), the connection is still in its
    request until the body is in: at the cap, a newcomer is told to retry."""
    bounds = {"max_connections": 1, "keep_alive_timeout": 30, "client_header_timeout": 30, "client_body_timeout": 30}
    async with bounded(upstream, monkeypatch, **bounds) as served:
        table = _connections.process_table()
        sending = await served.connect(b"POST /v2/nothing HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
        answered = await asyncio.wait_for(sending.reader.readuntil(b"}}"), 30)
        assert (table.open, table.waiting) == (1, 0)
        newcomer = await served.connect(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        refused = await newcomer.until_closed()
        await sending.send(b"0123456789")
        assert await until(lambda: table.waiting == 1), "the body is in: now it waits for a request"
    assert status_of(answered) == 404
    assert status_of(refused) == 503


@pytest.mark.usefixtures("fresh_table")
async def test_a_websocket_protocol_that_would_not_say_when_it_ends_is_not_counted(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under uvicorn's own WebSocket protocol (which has no ``on_connection_lost``), an
    upgraded connection gives its place back at the upgrade, rather than holding it forever."""
    upstream.enqueue(Text("hi"))
    config: GatewayConfig = chat_config(upstream.base_url, **BOUNDS)
    monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())
    async with uvicorn_serving(gateway_app(config), config.server, ws="websockets-sansio") as (url, _):
        table = _connections.process_table()
        async with connect(url.replace("http://", "ws://") + "/v1/responses", open_timeout=20) as ws:
            await ws.send(orjson.dumps({"type": "response.create", "model": "m", "input": "hi"}).decode())
            while orjson.loads(await asyncio.wait_for(ws.recv(), 30))["type"] != "response.completed":
                pass
            assert table.open == 0
    assert table.open == 0
