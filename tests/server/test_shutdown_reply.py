"""Shutdown while a whole (non-streamed) reply is being written.

A server under flow control makes the app's ``send`` wait until the client reads (a
slow client, a large reply). If the shutdown's grace period ends then, the server
cancels the app, and the app ends what it had begun: a reply that has not begun gets a
503 "shutting down", one that has begun must be left alone, never get a second status
line. uvicorn buffers a whole reply in one write, so this is driven here, in process,
with an ASGI server of our own whose ``send`` blocks on the body as flow control does.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from toolwire.config import parse_config
from toolwire.server._factory import build_app

CONFIG = """
[server]
store = "none"

[[upstreams]]
name = "mock"
kind = "mock"
default = true
"""


class StalledClient:
    """An ASGI server's side of one request whose client stops reading once the body
    starts: ``send`` records each message, and blocks for good on the first body (what
    comes after the app is cancelled is recorded and not waited on, as a server does once
    it gives up on a connection)."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.request = orjson.dumps(body)
        self.sent: list[dict[str, Any]] = []
        self.blocked = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        if self.request:
            request, self.request = self.request, b""
            return {"type": "http.request", "body": request, "more_body": False}
        await asyncio.Event().wait()  # the client stays connected
        raise AssertionError("unreachable")

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and not self.blocked.is_set():
            self.blocked.set()
            await asyncio.Event().wait()


def scope() -> dict[str, Any]:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/responses", "raw_path": b"/v1/responses", "query_string": b"",
        "root_path": "", "headers": [(b"content-type", b"application/json"), (b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8787),
    }


async def cut_at_its_first_body(request: dict[str, Any]) -> list[dict[str, Any]]:
    """What the app sent for ``request`` when cancelled (the grace period over) while its
    first body message was being written."""
    app = build_app(parse_config(CONFIG))
    client = StalledClient(request)
    serving = asyncio.ensure_future(app(scope(), client.receive, client.send))
    async with asyncio.timeout(30):
        await client.blocked.wait()
    serving.cancel()
    await asyncio.gather(serving, return_exceptions=True)
    return client.sent


def statuses(sent: list[dict[str, Any]]) -> list[int]:
    return [message["status"] for message in sent if message["type"] == "http.response.start"]


async def test_a_reply_that_began_gets_no_second_status_when_the_grace_ends() -> None:
    assert statuses(await cut_at_its_first_body({"model": "m", "input": "hello", "stream": False})) == [200]


async def test_a_stream_that_began_is_ended_with_response_failed_when_the_grace_ends() -> None:
    sent = await cut_at_its_first_body({"model": "m", "input": "hello", "stream": True})
    assert statuses(sent) == [200]
    body = b"".join(message.get("body", b"") for message in sent if message["type"] == "http.response.body")
    assert b"event: response.failed" in body and b"The gateway is shutting down." in body, body[-500:]


async def test_an_error_reply_that_began_gets_no_second_status_when_the_grace_ends() -> None:
    sent = await cut_at_its_first_body({"model": "m", "input": 12345})  # not a request: answered 400
    assert statuses(sent) == [400]
    start = next(message for message in sent if message["type"] == "http.response.start")
    assert (b"content-type", b"application/json") in start["headers"]


class LeavingClient(StalledClient):
    """``StalledClient`` that can leave (``leave``: its next ``receive`` is the disconnect)
    and whose connection fails every write once it has left."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body)
        self.left = asyncio.Event()

    def leave(self) -> None:
        self.left.set()

    async def receive(self) -> dict[str, Any]:
        if self.request:
            return await super().receive()
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if self.left.is_set():
            raise ConnectionResetError("the client is gone")
        await super().send(message)


async def served_until_blocked(client: StalledClient) -> asyncio.Task[None]:
    app = build_app(parse_config(CONFIG))
    serving = asyncio.ensure_future(app(scope(), client.receive, client.send))
    async with asyncio.timeout(30):
        await client.blocked.wait()
    return serving


async def test_a_stream_whose_last_words_cannot_be_written_still_ends_as_cancelled_when_the_grace_ends() -> None:
    # The shutdown cancels the exchange; its "shutting down" failure cannot be written
    # (the connection broke): the app ends cancelled, as the server asked, not with the
    # write's error (which the server would log as the app's crash).
    client = LeavingClient({"model": "m", "input": "hello", "stream": True})
    serving = await served_until_blocked(client)
    client.left.set()  # the connection broke; the server has not read the disconnect yet
    serving.cancel()
    [outcome] = await asyncio.gather(serving, return_exceptions=True)
    assert isinstance(outcome, asyncio.CancelledError), outcome


async def test_a_client_that_leaves_as_the_grace_ends_leaves_the_exchange_cancelled() -> None:
    # The client leaves (its watch cancels the exchange, to end it quietly) and the
    # server's grace ends before the exchange takes the first cancel in: the second is the
    # server's, and the app must end cancelled rather than swallow it.
    client = LeavingClient({"model": "m", "input": "hello", "stream": True})
    serving = await served_until_blocked(client)
    client.leave()
    async with asyncio.timeout(30):
        while not serving.cancelling():  # the watch has cancelled it; it has not run since
            await asyncio.sleep(0)
    serving.cancel()
    [outcome] = await asyncio.gather(serving, return_exceptions=True)
    assert isinstance(outcome, asyncio.CancelledError), outcome
