"""What a client is told when the server shuts down with its exchange unfinished
(``Answer.cut_short``), uvicorn in this process shut down as SIGTERM does with a short
grace period: a stream still running ends in its failure events, a request still waiting
for the upstream's first byte gets a 503 that says to retry. tests/reliability/test_shutdown.py
does this to the real process."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.store.redis_server import RedisServer
from tests.support.chat_upstream import ChatUpstream, Stall, Text
from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV
from tests.support.served import chat_config, gateway_app, sse_events, uvicorn_serving
from toolwire.config import GatewayConfig


@pytest.fixture(autouse=True)
def upstream_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UPSTREAM_KEY_ENV, UPSTREAM_KEY)


async def stream_shut_down_at_first_delta(
    config: GatewayConfig, at_first_delta: Callable[[], None] = lambda: None
) -> list[dict[str, Any]]:
    """The events of a streamed request to ``config``'s gateway, shut down as SIGTERM does
    once the first text delta is out (``at_first_delta`` called just before)."""
    async with (
        uvicorn_serving(gateway_app(config), config.server) as (url, server),
        httpx.AsyncClient(base_url=url, timeout=30) as client,
        client.stream("POST", "/v1/responses", json={"model": "m", "input": "hi", "stream": True}) as response,
    ):
        body = b""
        async for chunk in response.aiter_raw():
            body += chunk
            if not server.should_exit and b"response.output_text.delta" in body:
                at_first_delta()
                server.should_exit = True
        return sse_events(body)


async def test_a_stream_still_running_after_the_grace_period_fails_properly(upstream: ChatUpstream) -> None:
    release = threading.Event()
    upstream.enqueue(Stall(after_chunks=3, seconds=30, reply=Text("never finished"), release=release))
    try:
        events = await stream_shut_down_at_first_delta(chat_config(upstream.base_url, shutdown_grace=0.3))
    finally:
        release.set()
    assert [e["type"] for e in events][-2:] == ["error", "response.failed"]
    assert events[-1]["response"]["error"] == {"code": "server_error", "message": "The gateway is shutting down."}
    assert events[-2]["message"] == "The gateway is shutting down."


async def test_a_request_waiting_for_its_first_byte_gets_a_503(upstream: ChatUpstream) -> None:
    release = threading.Event()
    upstream.enqueue(Stall(after_chunks=0, seconds=30, release=release))
    config = chat_config(upstream.base_url, shutdown_grace=0.3)
    try:
        async with (
            uvicorn_serving(gateway_app(config), config.server) as (url, server),
            httpx.AsyncClient(base_url=url, timeout=30) as client,
        ):
            waiting = asyncio.ensure_future(client.post("/v1/responses", json={"model": "m", "input": "hi"}))
            for _ in range(600):  # until the request is at the upstream, bounded
                if upstream.requests:
                    break
                await asyncio.sleep(0.05)
            server.should_exit = True
            response = await waiting
    finally:
        release.set()
    assert response.status_code == 503
    assert response.json()["error"] == {
        "message": "The gateway is shutting down; retry the request.",
        "type": "service_unavailable",
        "param": None,
        "code": None,
    }


async def test_a_finished_stream_whose_storing_outlasts_the_grace_still_gets_its_terminal_event(
    upstream: ChatUpstream, redis_server: RedisServer
) -> None:
    """The response is stored before its terminal event goes out; when the store stalls
    (Redis frozen) past the shutdown grace, the client still gets the answer's end."""
    release = threading.Event()
    upstream.enqueue(Stall(after_chunks=2, seconds=30, reply=Text("all of it"), release=release))

    def freeze_the_store_and_end_the_answer() -> None:
        redis_server.pause()  # the finished response's store write now waits
        release.set()  # the upstream ends its answer

    config = chat_config(upstream.base_url, shutdown_grace=0.3, store=redis_server.url)
    try:
        events = await stream_shut_down_at_first_delta(config, freeze_the_store_and_end_the_answer)
    finally:
        release.set()
        redis_server.resume()
    assert [e["type"] for e in events][-1] == "response.completed"
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "all of it"
