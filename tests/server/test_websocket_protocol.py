"""``DrainingWebSocketProtocol`` at shutdown, on a raw socket, with an app that does what
the test says: a connection still in its handshake is refused (500) and one whose
closing handshake is under way is closed at once, rather than left waiting for the app
or for the client's answer to the close."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from tests.support.served import uvicorn_serving

UPGRADE = (
    b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)
Handler = Callable[[Callable[[], Awaitable[Any]], Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]]


def app_with(websocket: Handler) -> Any:
    """An ASGI app: lifespan answered, each WebSocket handed to ``websocket(receive, send)``."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
        elif scope["type"] == "websocket":
            await websocket(receive, send)

    return app


async def test_a_websocket_still_in_its_handshake_at_shutdown_is_refused_and_closed() -> None:
    connected, never = asyncio.Event(), asyncio.Event()

    async def slow_to_accept(receive: Callable[[], Awaitable[Any]], send: Any) -> None:
        assert (await receive())["type"] == "websocket.connect"
        connected.set()
        await never.wait()  # it never accepts

    async with uvicorn_serving(app_with(slow_to_accept)) as (url, server):
        reader, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))
        writer.write(UPGRADE)
        await asyncio.wait_for(connected.wait(), 10)
        server.should_exit = True  # as SIGTERM
        answer = await asyncio.wait_for(reader.read(), 5)  # everything, until the server closes
        never.set()
        writer.close()
    assert answer.startswith(b"HTTP/1.1 500 ")


async def test_a_websocket_whose_close_is_unanswered_at_shutdown_is_closed_at_once() -> None:
    closing, never = asyncio.Event(), asyncio.Event()

    async def closes_first(receive: Callable[[], Awaitable[Any]], send: Any) -> None:
        assert (await receive())["type"] == "websocket.connect"
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": 1000})
        closing.set()
        await never.wait()

    async with uvicorn_serving(app_with(closes_first)) as (url, server):
        reader, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))
        writer.write(UPGRADE)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        await asyncio.wait_for(closing.wait(), 10)
        close_frame = await asyncio.wait_for(reader.readexactly(4), 10)  # and the client does not answer it
        server.should_exit = True
        rest = await asyncio.wait_for(reader.read(), 5)  # the server's close_timeout is 10 s
        never.set()
        writer.close()
    assert head.startswith(b"HTTP/1.1 101 ")
    assert close_frame == b"\x88\x02\x03\xe8" and rest == b""  # close, 1000; then the end
