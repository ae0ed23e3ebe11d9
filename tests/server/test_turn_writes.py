"""``TurnWrites``: the writes of one event-loop turn reach the socket's transport as one,
in order, and nothing is held past the turn, nor lost when the connection closes; and in
the served gateway, an answer written in one turn leaves in one write."""

from __future__ import annotations

import asyncio
from asyncio import selector_events
from typing import Any

import orjson
import pytest

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV
from tests.support.served import chat_config, gateway_app, uvicorn_serving
from toolwire.server import _connections
from toolwire.server._settings import CONFIG_ENV
from toolwire.server._turn_writes import TurnWrites
from toolwire.server.observe import LogObserver


class SocketTransport(asyncio.Transport):
    """The socket's transport, as far as ``TurnWrites`` uses it: what was written, and when."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closing = False
        self.closed_after: int | None = None
        """How many writes had been made when it was closed."""
        self.eof_after: int | None = None
        self.aborted = False
        self.reading = True
        self.protocol: asyncio.BaseProtocol | None = None

    def write(self, data: Any) -> None:
        assert not self.closing, "written after it was closed"
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closing, self.closed_after = True, len(self.writes)

    def write_eof(self) -> None:
        self.eof_after = len(self.writes)

    def can_write_eof(self) -> bool:
        return True

    def abort(self) -> None:
        self.closing, self.aborted = True, True

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 7

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return (1, 2)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.limits = (high, low)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 9)}.get(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        assert self.protocol is not None
        return self.protocol

    def is_reading(self) -> bool:
        return self.reading

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


async def next_turn() -> None:
    """Let the current turn of the event loop end, and the callbacks it scheduled run."""
    await asyncio.sleep(0)
    await asyncio.sleep(0)


async def test_the_writes_of_one_turn_go_out_as_one_at_its_end_in_order() -> None:
    socket = SocketTransport()
    writes = TurnWrites(socket, asyncio.get_running_loop())
    writes.write(b"HTTP/1.1 200 OK\r\n\r\n")
    writes.write(bytearray(b"event: one\n\n"))
    writes.writelines([memoryview(b"event: two\n\n"), b"", b"0\r\n\r\n"])
    assert socket.writes == []
    assert writes.get_write_buffer_size() == 7 + 19 + 12 + 12 + 5  # held, and the socket's own
    await next_turn()
    assert socket.writes == [b"HTTP/1.1 200 OK\r\n\r\nevent: one\n\nevent: two\n\n0\r\n\r\n"]
    assert writes.get_write_buffer_size() == 7


async def test_each_turn_has_its_own_write_and_a_lone_write_is_passed_on_as_it_is() -> None:
    socket = SocketTransport()
    writes = TurnWrites(socket, asyncio.get_running_loop())
    first = b"event: one\n\n"
    writes.write(first)
    await next_turn()
    writes.write(b"event: two\n\n")
    writes.write(b"event: three\n\n")
    await next_turn()
    writes.write(b"")  # nothing to write: no write
    await next_turn()
    assert socket.writes == [first, b"event: two\n\nevent: three\n\n"]
    assert socket.writes[0] is first


async def test_closing_hands_over_what_is_held_first_and_aborting_drops_it() -> None:
    loop = asyncio.get_running_loop()
    closed, ended, aborted = SocketTransport(), SocketTransport(), SocketTransport()
    for socket in (closed, ended, aborted):
        writes = TurnWrites(socket, loop)
        writes.write(b"the answer's end")
        if socket is closed:
            writes.close()
        elif socket is ended:
            writes.write_eof()
        else:
            writes.abort()
    await next_turn()
    assert (closed.writes, closed.closed_after) == ([b"the answer's end"], 1)
    assert (ended.writes, ended.eof_after) == ([b"the answer's end"], 1)
    assert aborted.writes == [] and aborted.aborted
    writes = TurnWrites(aborted, loop)
    writes.abort()
    writes.write(b"after the end")  # a write after aborting goes nowhere, quietly
    await next_turn()
    assert aborted.writes == []


async def test_what_is_held_when_the_connection_is_closed_elsewhere_is_dropped() -> None:
    socket = SocketTransport()
    writes = TurnWrites(socket, asyncio.get_running_loop())
    writes.write(b"late")
    socket.close()  # the client left, or a timeout closed it, in the same turn
    await next_turn()
    assert socket.writes == []


async def test_everything_else_is_the_socket_transports() -> None:
    socket = SocketTransport()
    writes = TurnWrites(socket, asyncio.get_running_loop())
    protocol = asyncio.Protocol()
    writes.set_protocol(protocol)
    assert writes.get_protocol() is protocol
    assert writes.get_extra_info("peername") == ("127.0.0.1", 9)
    assert writes.get_extra_info("socket", "none") == "none"
    assert writes.can_write_eof() and writes.get_write_buffer_limits() == (1, 2)
    writes.set_write_buffer_limits(10, 5)
    assert socket.limits == (10, 5)
    writes.pause_reading()
    assert not writes.is_reading() and not socket.reading
    writes.resume_reading()
    assert writes.is_reading()
    assert not writes.is_closing()
    writes.close()
    assert writes.is_closing()


# ---------------------------------------------------------------------- served


@pytest.fixture
def socket_writes(monkeypatch: pytest.MonkeyPatch) -> dict[int, list[bytes]]:
    """Every write to a socket of this process's event loops, by the peer's port."""
    written: dict[int, list[bytes]] = {}
    write = selector_events._SelectorSocketTransport.write

    def recorded(self: Any, data: Any) -> None:
        peer = self.get_extra_info("peername")
        if peer is not None:
            written.setdefault(peer[1], []).append(bytes(data))
        write(self, data)

    monkeypatch.setattr(selector_events._SelectorSocketTransport, "write", recorded)
    return written


async def test_a_gateway_answer_made_in_one_turn_leaves_in_one_write(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch, socket_writes: dict[int, list[bytes]]
) -> None:
    """A whole Response and an error are each a head and a body, sent in one turn: one
    write each (uvicorn alone writes the head and the body apart)."""
    monkeypatch.setenv(UPSTREAM_KEY_ENV, UPSTREAM_KEY)
    monkeypatch.setattr(_connections, "_table", None)
    config = chat_config(upstream.base_url)
    monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())
    upstream.enqueue(Text("hello there"))
    async with uvicorn_serving(gateway_app(config), config.server) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = orjson.dumps({"model": "m", "input": "hi", "stream": False})
        requests = [
            b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body),
            b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 5\r\nConnection: close\r\n\r\n{bad}",
        ]
        answers = []
        for request in requests:
            writer.write(request)
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            length = int(next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))[15:])
            answers.append(head + await asyncio.wait_for(reader.readexactly(length), 30))
        client_port = writer.get_extra_info("sockname")[1]
        writer.close()
    assert answers[0].startswith(b"HTTP/1.1 200 ") and b"hello there" in answers[0]
    assert answers[1].startswith(b"HTTP/1.1 400 ")
    assert socket_writes[client_port] == answers


async def test_an_answers_last_bytes_are_written_before_the_work_after_it(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch, socket_writes: dict[int, list[bytes]]
) -> None:
    """The end of an answer is not held to the end of its turn: the exchange's work after
    its answer (the observers, here the log line) comes after the client has it all."""
    monkeypatch.setenv(UPSTREAM_KEY_ENV, UPSTREAM_KEY)
    monkeypatch.setattr(_connections, "_table", None)
    config = chat_config(upstream.base_url)
    monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())
    written_when_logged: list[bytes] = []
    finished = LogObserver.finished

    def logged(self: LogObserver, exchange: Any) -> None:
        written_when_logged.append(b"".join(socket_writes.get(client_port, [])))
        finished(self, exchange)

    monkeypatch.setattr(LogObserver, "finished", logged)
    upstream.enqueue(Text("streamed to its end"))
    async with uvicorn_serving(gateway_app(config), config.server) as (url, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))
        client_port = writer.get_extra_info("sockname")[1]
        body = orjson.dumps({"model": "m", "input": "hi", "stream": True})
        writer.write(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n0\r\n\r\n"), 30)
        await asyncio.sleep(0.1)
        writer.close()
    assert b"response.completed" in answer
    assert written_when_logged == [answer]
