"""How an exchange hears that its client left: a connection's ``Departures`` (what toolwire's
HTTP protocol and the WebSocket connection call when the client goes), the HTTP endpoint
watching by the one its server offers, and the HTTP transport's own wait for
``http.disconnect`` under a server that offers none. The whole
way, a client leaving mid-stream and its upstream request cancelled, is in
tests/server/test_pipeline.py (under both servers) and tests/server/test_websocket.py."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
import pytest

from tests.support.waiting import until
from toolwire.config import GatewayConfig
from toolwire.server import GatewaySettings, build_router
from toolwire.server._http_responses import ResponsesHttpEndpoint, SseTransport
from toolwire.server._pipeline import ExchangePipeline
from toolwire.server._transport import CLIENT_GONE_EXTENSION, Departures

MOCK_ONLY = GatewayConfig.model_validate(
    {"server": {"store": "none"}, "upstreams": [{"name": "mock", "kind": "mock", "default": True}]}
)


class Calls:
    """Watches that note, in order, which of them was called."""

    def __init__(self) -> None:
        self.called: list[str] = []

    def watch(self, name: str) -> Any:
        return lambda: self.called.append(name)


def test_each_watch_is_called_once_in_order_when_the_client_departs() -> None:
    departures, calls = Departures(), Calls()
    departures.watch(calls.watch("first"))
    departures.watch(calls.watch("second"))
    assert calls.called == [] and departures.gone is False
    departures.depart()
    assert calls.called == ["first", "second"] and departures.gone
    departures.depart()
    assert calls.called == ["first", "second"], "a watch is called once"


def test_a_watch_ended_before_the_departure_is_not_called() -> None:
    departures, calls = Departures(), Calls()
    end_first = departures.watch(calls.watch("first"))
    departures.watch(calls.watch("second"))
    end_first()
    end_first()  # ending it again changes nothing
    departures.depart()
    assert calls.called == ["second"]


def test_a_watch_begun_after_the_departure_is_called_at_once() -> None:
    departures, calls = Departures(), Calls()
    departures.depart()
    end = departures.watch(calls.watch("late"))
    assert calls.called == ["late"]
    end()  # ending a watch already called changes nothing
    departures.depart()
    assert calls.called == ["late"]


def test_a_watch_that_fails_is_logged_and_the_next_is_still_called(caplog: pytest.LogCaptureFixture) -> None:
    departures, calls = Departures(), Calls()

    def failing() -> None:
        raise RuntimeError("planted")

    departures.watch(failing)
    departures.watch(calls.watch("after"))
    departures.depart()
    assert calls.called == ["after"]
    [record] = [r for r in caplog.records if r.name == "toolwire.server"]
    assert (record.levelno, record.getMessage()) == (logging.ERROR, "a watch on a client that left failed")
    assert record.exc_info is not None and str(record.exc_info[1]) == "planted"


async def _send(message: Any) -> None:
    raise AssertionError("nothing is sent here")


class Receive:
    """An ASGI ``receive`` whose messages the test lets through one by one."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[Any] = asyncio.Queue()
        self.asked = 0

    async def __call__(self) -> Any:
        self.asked += 1
        message = await self.messages.get()
        if isinstance(message, Exception):
            raise message
        return message


async def test_the_transport_uses_the_watch_the_server_offers() -> None:
    departures, calls, receive = Departures(), Calls(), Receive()
    transport = SseTransport(_send, receive, departures.watch)
    end = transport.watch_client(calls.watch("gone"))
    departures.depart()
    assert calls.called == ["gone"]
    end()
    await asyncio.sleep(0)
    assert receive.asked == 0, "no task of its own waits for http.disconnect"


async def test_without_a_watch_offered_the_transport_waits_for_http_disconnect() -> None:
    calls, receive = Calls(), Receive()
    transport = SseTransport(_send, receive)
    transport.watch_client(calls.watch("gone"))
    receive.messages.put_nowait({"type": "http.request", "body": b"late", "more_body": False})
    assert await until(lambda: receive.asked == 2)
    assert calls.called == [], "another message is not the client leaving"
    receive.messages.put_nowait({"type": "http.disconnect"})
    assert await until(lambda: calls.called == ["gone"])


async def test_a_wait_for_http_disconnect_that_fails_counts_as_the_client_gone() -> None:
    calls, receive = Calls(), Receive()
    SseTransport(_send, receive).watch_client(calls.watch("gone"))
    receive.messages.put_nowait(OSError("the server broke"))
    assert await until(lambda: calls.called == ["gone"])


async def test_a_wait_for_http_disconnect_ended_by_the_exchange_calls_nothing() -> None:
    calls, receive = Calls(), Receive()
    end = SseTransport(_send, receive).watch_client(calls.watch("gone"))
    assert await until(lambda: receive.asked == 1)
    end()
    receive.messages.put_nowait({"type": "http.disconnect"})
    await asyncio.sleep(0.05)
    assert calls.called == [] and receive.asked == 1


async def test_the_endpoint_watches_by_the_extension_the_server_offers() -> None:
    """Offered the watch of its connection's ``Departures`` (toolwire's HTTP protocol offers
    it to every request), the endpoint's exchange watches by it: ``receive`` is asked for the
    body only, no task of the exchange's waits for ``http.disconnect``, and the watch is
    ended once the exchange is over."""
    pipeline = ExchangePipeline(build_router(MOCK_ONLY), GatewaySettings())
    watched: list[Any] = []
    ended: list[Any] = []

    def watch(on_gone: Any) -> Any:
        watched.append(on_gone)
        return lambda: ended.append(on_gone)

    body = orjson.dumps({"model": "m", "input": "hi", "stream": True})
    asked: list[Any] = []

    async def receive() -> Any:
        asked.append("receive")
        if len(asked) == 1:
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays
        raise AssertionError("not reached")

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/responses", "headers": [],
             "extensions": {CLIENT_GONE_EXTENSION: {"watch": watch}}}
    await ResponsesHttpEndpoint(pipeline)(scope, receive, send)
    await asyncio.sleep(0.05)  # a task of the exchange's, had it made one, would have asked by now
    assert sent[0]["status"] == 200 and b"response.completed" in sent[-1]["body"]
    assert asked == ["receive"]
    assert len(watched) == 1 and ended == watched
