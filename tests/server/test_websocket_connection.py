"""Responses over WebSocket with the gateway served in this process (tests/support/served.py),
by the ``websockets`` client as Codex speaks it: the handshake, each answer's events, the
connection's own history, ``generate: false``, every refused message as an ``error`` event
on a connection that stays open, the lifetime, the size bound, a client that leaves, and
a shutdown that lets the answer in flight finish. tests/server/test_websocket.py runs the
same transport in the real gateway process."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.support.chat_upstream import ChatUpstream, HttpError, Stall, Text
from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV
from tests.support.loop_errors import loop_errors
from tests.support.served import chat_config, gateway_app, uvicorn_serving
from tests.support.waiting import until
from toolwire.config import GatewayConfig
from toolwire.keys import STATIC_KEY_NAME
from toolwire.protocol import KNOWN_HISTORIES, ResponsesRequest
from toolwire.server import _connections
from toolwire.translate.chat._tools import DeclaredTools

JSON = dict[str, Any]
TERMINAL = {"response.completed", "response.failed", "response.incomplete"}


@pytest.fixture(autouse=True)
def upstream_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UPSTREAM_KEY_ENV, UPSTREAM_KEY)


class Gateway:
    def __init__(self, url: str, server: Any) -> None:
        self.url = url
        self.server = server
        self.ws_url = url.replace("http://", "ws://") + "/v1/responses"

    async def metric(self, name: str, **labels: str) -> float:
        async with httpx.AsyncClient() as client:
            text = (await client.get(self.url + "/metrics")).text
        selector = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
        found = re.search(rf"^{re.escape(name)}\{{{re.escape(selector)}\}} (\S+)$", text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0


@asynccontextmanager
async def gateway(config: GatewayConfig) -> AsyncIterator[Gateway]:
    async with uvicorn_serving(gateway_app(config), config.server) as (url, server):
        yield Gateway(url, server)


@asynccontextmanager
async def session(gw: Gateway, **headers: str) -> AsyncIterator[ClientConnection]:
    async with connect(gw.ws_url, additional_headers=headers, open_timeout=20, max_size=None) as ws:
        yield ws


async def next_event(ws: ClientConnection, timeout: float = 30.0) -> JSON:
    message = await asyncio.wait_for(ws.recv(), timeout)
    assert isinstance(message, str), "every event is a JSON text message"
    event: JSON = json.loads(message)
    return event


async def answer(ws: ClientConnection) -> list[JSON]:
    events: list[JSON] = []
    while True:
        events.append(await next_event(ws))
        if events[-1]["type"] in TERMINAL or events[-1]["type"] == "error":
            return events


async def create(ws: ClientConnection, **body: Any) -> list[JSON]:
    await ws.send(json.dumps({"type": "response.create", "model": "m", **body}))
    return await answer(ws)


def completed(events: list[JSON]) -> JSON:
    types = [event["type"] for event in events]
    assert types[0] == "response.created" and types[-1] == "response.completed", types
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    response: JSON = events[-1]["response"]
    return response


def text_of(response: JSON) -> str:
    return "".join(p["text"] for item in response["output"] if item["type"] == "message" for p in item["content"])


async def test_the_handshake_says_the_bounds_and_echoes_the_turn_state(upstream: ChatUpstream) -> None:
    config = chat_config(upstream.base_url, ws_max_message_bytes=123_456)
    async with gateway(config) as gw, session(gw, **{"x-codex-turn-state": "turn-7"}) as ws:
        headers = ws.response.headers
    assert headers["x-codex-websocket-max-message-bytes"] == "123456"
    assert headers["x-reasoning-included"] == "true"
    assert headers["x-codex-turn-state"] == "turn-7"
    assert "openai-model" not in headers


async def test_answers_one_after_another_and_the_connection_remembers_its_own(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("Paris."), Text("Two million."))
    async with gateway(chat_config(upstream.base_url, store="none")) as gw, session(gw) as ws:
        first = completed(await create(ws, input="Capital of France?", store=False))
        assert text_of(first) == "Paris."
        second = completed(await create(ws, input="People?", previous_response_id=first["id"], store=False))
    assert text_of(second) == "Two million." and second["previous_response_id"] == first["id"]
    assert [m["content"] for m in upstream.chat_requests[1]["messages"]] == ["Capital of France?", "Paris.", "People?"]
    assert all(request["stream"] is True for request in upstream.chat_requests)


async def test_a_conversation_continued_turn_by_turn_derives_its_tools_once(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Codex continues on its WebSocket: the first request declares the tools (V2: in an
    ``additional_tools`` item), each later one names the response before it and sends its
    new item. The conversation the connection holds declares the very specs of the first
    request, so the tool table translation derives from them is derived once; and no
    continuing body is kept as a history of resent bytes (none will be resent)."""
    derived: list[object] = []
    of = DeclaredTools.of.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(DeclaredTools, "of", classmethod(lambda cls, catalog: derived.append(catalog) or of(cls, catalog)))
    tools = {"type": "additional_tools", "role": "developer", "tools": [
        {"type": "namespace", "name": "once_ns", "description": "", "tools": [{"type": "function", "name": "derived_once"}]}
    ]}
    upstream.enqueue(*(Text(f"answer {n}") for n in range(5)))
    KNOWN_HISTORIES.clear()
    async with gateway(chat_config(upstream.base_url, store="none")) as gw, session(gw) as ws:
        last = completed(await create(ws, input=[tools, {"role": "user", "content": "hi"}], store=False, prompt_cache_key="t"))
        for n in range(4):
            turn = [{"role": "user", "content": f"go on {n}"}]
            last = completed(await create(ws, input=turn, previous_response_id=last["id"], store=False, prompt_cache_key="t"))
    assert text_of(last) == "answer 4"
    assert len(derived) == 1
    assert len(KNOWN_HISTORIES) == 1  # the first request's
    assert upstream.chat_requests[-1]["tools"][0]["function"]["name"].endswith("derived_once")


async def test_a_turn_that_changes_the_fields_it_resends_is_answered_with_the_new_ones(upstream: ChatUpstream) -> None:
    """The connection validates the fields its turns resend once (``TurnFields``): a turn
    whose fields differ is read with its own, and the turns after it keep those."""
    upstream.enqueue(*(Text(f"answer {n}") for n in range(4)))
    async with gateway(chat_config(upstream.base_url, store="none")) as gw, session(gw) as ws:
        last = completed(await create(ws, input="zero", instructions="Be brief.", store=False))
        for n, instructions in enumerate(["Be brief.", "Be thorough.", "Be thorough."], start=1):
            last = completed(
                await create(ws, input=f"turn {n}", instructions=instructions, previous_response_id=last["id"], store=False)
            )
            assert last["instructions"] == instructions
        bad = [{"type": "function_call_output", "call_id": 7}]
        [refused] = await create(ws, input=bad, instructions="Be thorough.", previous_response_id=last["id"], store=False)
    systems = [request["messages"][0]["content"] for request in upstream.chat_requests]
    assert systems == ["Be brief.", "Be brief.", "Be thorough.", "Be thorough."]
    assert [m["content"] for m in upstream.chat_requests[-1]["messages"][1:]] == [
        "zero", "answer 0", "turn 1", "answer 1", "turn 2", "answer 2", "turn 3"
    ]
    assert (refused["type"], refused["status"], refused["error"]["param"]) == ("error", 400, "input[0].call_id")


async def test_the_fields_continuing_turns_resend_are_validated_once(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A continuing turn that resends the connection's last fields has only what it sends
    of its own validated (``TurnFields``): the tools and instructions once per change."""
    validated: list[set[str]] = []
    validate = ResponsesRequest.model_validate.__func__  # type: ignore[attr-defined]

    def counting(cls: type[ResponsesRequest], data: Any, **kwargs: Any) -> ResponsesRequest:
        validated.append(set(data))
        return validate(cls, data, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(ResponsesRequest, "model_validate", classmethod(counting))
    tools = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]
    upstream.enqueue(*(Text(f"answer {n}") for n in range(4)))
    fields: JSON = {"instructions": "Be brief.", "tools": tools, "store": False}
    async with gateway(chat_config(upstream.base_url, store="none")) as gw, session(gw) as ws:
        last = completed(await create(ws, input="zero", **fields))
        for n in range(1, 4):
            last = completed(await create(ws, input=f"turn {n}", previous_response_id=last["id"], **fields))
    own = {"model", "input", "previous_response_id"}
    # the first request whole, the first continuing turn whole (its fields are kept), then only the turns' own
    assert [keys >= {"tools", "instructions"} for keys in validated] == [True, True, False, False]
    assert validated[2:] == [own, own]
    assert upstream.chat_requests[-1]["tools"][0]["function"]["name"] == "exec_command"


async def test_a_response_not_held_by_the_connection_is_looked_up_in_the_store(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("kept"), Text("continued"))
    async with gateway(chat_config(upstream.base_url)) as gw:
        async with session(gw) as ws:
            first = completed(await create(ws, input="one"))
        async with session(gw) as ws:  # a new connection holds nothing of its own
            second = completed(await create(ws, input="two", previous_response_id=first["id"]))
            missing = await create(ws, input="three", previous_response_id="resp_unknown")
    assert text_of(second) == "continued"
    assert [m["content"] for m in upstream.chat_requests[1]["messages"]] == ["one", "kept", "two"]
    [event] = missing
    assert (event["type"], event["status"], event["error"]["code"]) == ("error", 404, "previous_response_not_found")


async def test_without_a_store_only_the_connections_own_responses_exist(upstream: ChatUpstream) -> None:
    async with gateway(chat_config(upstream.base_url, store="none")) as gw, session(gw) as ws:
        [event] = await create(ws, input="hi", previous_response_id="resp_elsewhere")
    assert event == {
        "type": "error",
        "status": 404,
        "error": {
            "message": "Previous response with id 'resp_elsewhere' not found.",
            "type": "not_found_error",
            "param": "previous_response_id",
            "code": "previous_response_not_found",
        },
    }


async def test_a_failed_continuation_forgets_the_response_it_named(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("first"), HttpError(400, {"error": {"message": "context too long"}}))
    async with gateway(chat_config(upstream.base_url, store="none")) as gw, session(gw) as ws:
        first = completed(await create(ws, input="one", store=False))
        [failed] = await create(ws, input="two", previous_response_id=first["id"], store=False)
        [gone] = await create(ws, input="three", previous_response_id=first["id"], store=False)
    assert (failed["status"], failed["error"]["message"]) == (400, "context too long")
    assert (gone["status"], gone["error"]["code"]) == (404, "previous_response_not_found")


async def test_a_response_continued_once_can_be_continued_again(upstream: ChatUpstream) -> None:
    """Only a failed continuation forgets what it named: a branch from the same response works."""
    upstream.enqueue(Text("first"), Text("one branch"), Text("another branch"))
    async with gateway(chat_config(upstream.base_url, store="none")) as gw, session(gw) as ws:
        first = completed(await create(ws, input="one", store=False))
        branch = completed(await create(ws, input="two", previous_response_id=first["id"], store=False))
        again = completed(await create(ws, input="two again", previous_response_id=first["id"], store=False))
    assert (text_of(branch), text_of(again)) == ("one branch", "another branch")
    assert [m["content"] for m in upstream.chat_requests[2]["messages"]] == ["one", "first", "two again"]


async def test_a_continuation_of_a_response_never_held_fails_and_the_connection_goes_on(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("still serving"))
    async with gateway(chat_config(upstream.base_url, store="none")) as gw, session(gw) as ws:
        [unknown] = await create(ws, input="two", previous_response_id="resp_never_made", store=False)
        after = completed(await create(ws, input="fresh", store=False))
    assert (unknown["status"], unknown["error"]["code"]) == (404, "previous_response_not_found")
    assert text_of(after) == "still serving"


async def test_generate_false_creates_an_empty_response_to_continue(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("answered"))
    tools = [{"type": "function", "name": "ls", "parameters": {"type": "object"}}]
    async with gateway(chat_config(upstream.base_url, store="none")) as gw, session(gw) as ws:
        events = await create(ws, input="warm up", tools=tools, instructions="Be brief.", generate=False, store=False)
        prewarmed = completed(events)
        assert upstream.requests == []  # nothing was asked of the model
        assert [event["type"] for event in events] == ["response.created", "response.in_progress", "response.completed"]
        assert (prewarmed["status"], prewarmed["output"], prewarmed["usage"]) == ("completed", [], None)
        assert isinstance(prewarmed["completed_at"], int) and prewarmed["completed_at"] >= prewarmed["created_at"]
        assert prewarmed["instructions"] == "Be brief." and prewarmed["tools"][0]["name"] == "ls"
        then = completed(await create(ws, input="now", previous_response_id=prewarmed["id"], store=False))
    assert text_of(then) == "answered"
    assert [m["content"] for m in upstream.chat_requests[0]["messages"] if m["role"] == "user"] == ["warm up\n\nnow"]


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (b"binary", {"message": "Binary messages are not accepted: send each event as a JSON text message.",
                     "type": "invalid_request_error", "param": None, "code": "invalid_message"}),
        ("[1, 2]", {"message": "The message must be a JSON object (an event with a 'type').",
                    "type": "invalid_request_error", "param": None, "code": "invalid_json"}),
        ('{"type": "response.cancel"}', {"message": "Unknown event type 'response.cancel': this connection accepts "
                                         "'response.create'.", "type": "invalid_request_error", "param": "type",
                                         "code": "unknown_event_type"}),
        ('{"model": "m"}', {"message": "Unknown event type None: this connection accepts 'response.create'.",
                            "type": "invalid_request_error", "param": "type", "code": "unknown_event_type"}),
        ('{"type": "response.create", "model": "m", "input": "x", "generate": "no"}',
         {"message": "'generate' must be a boolean.", "type": "invalid_request_error", "param": "generate",
          "code": "invalid_request"}),
    ],
)  # fmt: skip
async def test_a_message_that_is_not_a_response_create_gets_an_error_and_the_connection_stays(
    upstream: ChatUpstream, message: str | bytes, error: JSON
) -> None:
    upstream.enqueue(Text("still here"))
    async with gateway(chat_config(upstream.base_url)) as gw, session(gw) as ws:
        await ws.send(message)
        refused = await next_event(ws)
        after = completed(await create(ws, input="hi"))
    assert refused == {"type": "error", "status": 400, "error": error}
    assert text_of(after) == "still here"


async def test_a_message_that_is_not_json(upstream: ChatUpstream, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="toolwire.server"):
        async with gateway(chat_config(upstream.base_url)) as gw, session(gw) as ws:
            await ws.send("{nope")
            refused = await next_event(ws)
    assert (refused["status"], refused["error"]["code"]) == (400, "invalid_json")
    assert refused["error"]["message"].startswith("The message is not valid JSON: ")
    said = [r.getMessage() for r in caplog.records if r.name == "toolwire.server" and r.levelno == logging.INFO]
    assert f"websocket message refused: {refused['error']['message']}" in said


async def test_a_message_nested_too_deeply(upstream: ChatUpstream) -> None:
    nested: Any = "x"
    for _ in range(300):
        nested = [nested]
    async with gateway(chat_config(upstream.base_url)) as gw, session(gw) as ws:
        await ws.send(json.dumps({"type": "response.create", "model": "m", "input": nested}))
        refused = await next_event(ws)
    assert refused == {
        "type": "error",
        "status": 400,
        "error": {"message": "The message is nested too deeply.", "type": "invalid_request_error", "param": None,
                  "code": "invalid_json"},
    }  # fmt: skip


async def test_errors_before_a_stream_are_error_events_with_the_status(upstream: ChatUpstream) -> None:
    upstream.enqueue(HttpError(429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"Retry-After": "3"}))
    async with gateway(chat_config(upstream.base_url)) as gw, session(gw) as ws:
        [limited] = await create(ws, input="hi")
    assert limited == {
        "type": "error",
        "status": 429,
        "error": {"message": "slow down", "type": "rate_limit", "param": None, "code": "rate_limit"},
        "headers": {"retry-after": "3"},
    }


async def test_the_lifetime_closes_an_idle_connection_and_refuses_what_waits(upstream: ChatUpstream) -> None:
    config = chat_config(upstream.base_url, ws_max_lifetime=0.5)
    async with gateway(config) as gw:
        before = await gw.metric("toolwire_limits_tripped_total", limit="ws_max_lifetime")
        async with session(gw) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)
        assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1000, "connection lifetime limit reached")
        assert await gw.metric("toolwire_limits_tripped_total", limit="ws_max_lifetime") == before + 1
        upstream.enqueue(Stall(after_chunks=1, seconds=2, reply=Text("a slow answer")))
        async with session(gw) as ws:
            await ws.send(json.dumps({"type": "response.create", "model": "m", "input": "slow"}))
            await ws.send(json.dumps({"type": "response.create", "model": "m", "input": "waits"}))
            slow = await answer(ws)
            refused = await next_event(ws)
    assert slow[-1]["type"] == "response.completed", "the answer in flight finishes"
    assert refused == {
        "type": "error",
        "status": 400,
        "error": {
            "message": "This WebSocket reached its lifetime limit (0.00833333 minutes); open a new connection to continue.",
            "type": "invalid_request_error",
            "param": None,
            "code": "websocket_connection_limit_reached",
        },
    }


async def test_a_connection_ended_by_its_lifetime_ends_without_an_error(
    upstream: ChatUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    # The connection's task ends as it should: its reader stopped and awaited quietly, its
    # timer let go. An exception out of it is logged by uvicorn ("Exception in ASGI
    # application", with its traceback) on its own logger, which does not propagate.
    async with gateway(chat_config(upstream.base_url, ws_max_lifetime=0.3)) as gw:
        uvicorn_log = logging.getLogger("uvicorn.error")
        uvicorn_log.addHandler(caplog.handler)
        try:
            for answered_first in (False, True):  # idle, then after an answer
                async with session(gw) as ws:
                    if answered_first:
                        upstream.enqueue(Text("hello"))
                        assert (await create(ws, input="hi"))[-1]["type"] == "response.completed"
                    with pytest.raises(ConnectionClosed) as closed:
                        await asyncio.wait_for(ws.recv(), 30)
                    assert closed.value.rcvd.code == 1000
                # uvicorn's task for the connection (its ASGI call) has returned, or raised
                assert await until(lambda: not gw.server.server_state.tasks)
        finally:
            uvicorn_log.removeHandler(caplog.handler)
    assert [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_the_lifetime_ends_a_connection_at_its_time_even_when_timers_fire_early(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A loop may run a timer a little before its time; the connection's lifetime timer,
    # run at half of what is left every time here, must neither end it early nor leave it
    # waiting past its end.
    loop = asyncio.get_running_loop()
    call_later = loop.call_later

    def early(delay: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        if getattr(callback, "__name__", "") == "_at_deadline":
            delay /= 2
        return call_later(delay, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_later", early)
    lifetime = 0.5
    async with gateway(chat_config(upstream.base_url, ws_max_lifetime=lifetime)) as gw, session(gw) as ws:
        opened = loop.time()
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 30)
        lasted = loop.time() - opened
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1000, "connection lifetime limit reached")
    assert lifetime * 0.9 < lasted < 10


async def test_a_closed_connection_leaves_no_lifetime_timer_behind(upstream: ChatUpstream) -> None:
    # A timer left for an hour would hold on to the connection (and what it kept) that long.
    loop = asyncio.get_running_loop()

    def lifetime_timers() -> list[asyncio.TimerHandle]:
        scheduled: list[asyncio.TimerHandle] = getattr(loop, "_scheduled", [])
        return [timer for timer in scheduled
                if getattr(timer._callback, "__name__", "") == "_at_deadline" and not timer.cancelled()]  # fmt: skip

    async with gateway(chat_config(upstream.base_url)) as gw:
        async with session(gw) as ws:
            assert await until(lambda: len(lifetime_timers()) == 1)
            upstream.enqueue(Text("hello"))
            assert (await create(ws, input="hi"))[-1]["type"] == "response.completed"
        assert await until(lambda: lifetime_timers() == [])


async def test_a_message_over_the_limit_closes_with_1009(upstream: ChatUpstream) -> None:
    async with gateway(chat_config(upstream.base_url, ws_max_message_bytes=2048)) as gw:
        before = await gw.metric("toolwire_limits_tripped_total", limit="ws_max_message_bytes")
        async with session(gw) as ws:
            await ws.send(json.dumps({"type": "response.create", "model": "m", "input": "x" * 4096}))
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)
        assert closed.value.rcvd.code == 1009
        for _ in range(100):
            if await gw.metric("toolwire_limits_tripped_total", limit="ws_max_message_bytes") == before + 1:
                break
            await asyncio.sleep(0.05)
        assert await gw.metric("toolwire_limits_tripped_total", limit="ws_max_message_bytes") == before + 1


async def test_past_max_streams_a_response_gets_an_error_event_and_the_connection_stays(upstream: ChatUpstream) -> None:
    upstream.enqueue(Stall(after_chunks=1, seconds=30), Text("room again"))
    async with gateway(chat_config(upstream.base_url, max_streams=1)) as gw, session(gw) as ws:
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http, http.stream(
            "POST", "/v1/responses", json={"model": "m", "input": "hold", "stream": True}
        ) as held:
            assert held.status_code == 200
            async for _ in held.aiter_raw():
                break
            await ws.send(json.dumps({"type": "response.create", "model": "m", "input": "hi"}))
            refused = await next_event(ws)
        for _ in range(200):  # until the held stream has ended and given its place back, bounded
            events = await create(ws, input="hi")
            if events[0]["type"] != "error":
                break
            await asyncio.sleep(0.05)
    assert (refused["type"], refused["status"], refused["error"]["code"]) == ("error", 503, "gateway_busy")
    assert "max_streams" in refused["error"]["message"]
    assert text_of(completed(events)) == "room again"


async def test_a_client_that_closes_normally_trips_no_limit(upstream: ChatUpstream) -> None:
    """Only a close for a message over the limit (1009) counts as the limit tripped."""
    upstream.enqueue(Text("hi"))
    async with gateway(chat_config(upstream.base_url)) as gw:
        before = await gw.metric("toolwire_limits_tripped_total", limit="ws_max_message_bytes")
        async with session(gw) as ws:
            completed(await create(ws, input="hi"))
        assert await until(lambda: not gw.server.server_state.connections), "the server lets the closed connection go"
        assert await gw.metric("toolwire_limits_tripped_total", limit="ws_max_message_bytes") == before


async def test_a_client_that_leaves_cancels_its_answer(upstream: ChatUpstream) -> None:
    upstream.enqueue(Stall(after_chunks=2, seconds=30))
    async with gateway(chat_config(upstream.base_url)) as gw:
        async with session(gw) as ws:
            await ws.send(json.dumps({"type": "response.create", "model": "m", "input": "hi"}))
            await next_event(ws)
        await asyncio.to_thread(upstream.wait_for_disconnect, 10)


async def test_on_shutdown_an_answer_past_the_grace_fails_then_1001(upstream: ChatUpstream) -> None:
    release = __import__("threading").Event()
    upstream.enqueue(Stall(after_chunks=2, seconds=30, reply=Text("never finished"), release=release))
    try:
        async with gateway(chat_config(upstream.base_url, shutdown_grace=0.3)) as gw, session(gw) as ws:
            await ws.send(json.dumps({"type": "response.create", "model": "m", "input": "hi"}))
            await next_event(ws)
            gw.server.should_exit = True  # as SIGTERM; the grace ends with the answer still running
            events = await answer(ws)  # up to the error event
            events.append(await next_event(ws))
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)
    finally:
        release.set()
    assert [e["type"] for e in events][-2:] == ["error", "response.failed"]
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1001, "The gateway is shutting down.")


async def test_on_shutdown_an_idle_connection_is_closed_with_1001_at_once(upstream: ChatUpstream) -> None:
    async with gateway(chat_config(upstream.base_url, shutdown_grace=120)) as gw, session(gw) as ws:
        await ws.send(json.dumps({"type": "response.create", "model": "m", "input": "hi"}))
        await answer(ws)
        gw.server.should_exit = True
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 10)  # not the 120 s of grace
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1001, "The gateway is shutting down.")


async def test_on_shutdown_the_answer_in_flight_finishes_then_1001(upstream: ChatUpstream) -> None:
    release = __import__("threading").Event()
    upstream.enqueue(Stall(after_chunks=2, seconds=30, reply=Text("finished anyway"), release=release))
    async with gateway(chat_config(upstream.base_url, shutdown_grace=120)) as gw, session(gw) as ws:  # closed at once, not at its end
        await ws.send(json.dumps({"type": "response.create", "model": "m", "input": "hi"}))
        await next_event(ws)
        gw.server.should_exit = True  # as SIGTERM
        await asyncio.sleep(0.2)
        release.set()
        events = await answer(ws)
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 30)
    assert events[-1]["type"] == "response.completed" and text_of(events[-1]["response"]) == "finished anyway"
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1001, "The gateway is shutting down.")


async def test_a_connection_without_a_key_is_refused(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TW_WS_TEST_KEYS", "ws-key-1")
    config = chat_config(upstream.base_url, api_key_env="TW_WS_TEST_KEYS", store="none")
    upstream.enqueue(Text("with a key"))
    async with gateway(config) as gw:
        with pytest.raises(InvalidStatus) as refused:
            async with session(gw):
                pass
        async with session(gw, Authorization="Bearer ws-key-1") as ws:
            accepted = completed(await create(ws, input="hi"))
        counted = await gw.metric("toolwire_key_requests_total", key=STATIC_KEY_NAME, model="m", status="200")
        async with httpx.AsyncClient() as http:
            over_http = await http.post(gw.url + "/v1/responses", json={"model": "m", "input": "hi"})
    assert counted == 1  # the request was the key's, as over HTTP
    assert (over_http.status_code, over_http.headers["content-type"]) == (401, "application/json")
    assert over_http.headers["www-authenticate"] == "Bearer" and over_http.json()["error"]["code"] == "invalid_api_key"
    response = refused.value.response
    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert response.headers["content-type"] == "application/json"
    assert json.loads(response.body)["error"]["code"] == "invalid_api_key"
    assert text_of(accepted) == "with a key"


async def test_a_client_that_never_answers_pings_is_dropped_and_counted(upstream: ChatUpstream) -> None:
    config = chat_config(upstream.base_url, ws_ping_interval=0.2, ws_ping_timeout=0.2)
    async with gateway(config) as gw:
        before = await gw.metric("toolwire_limits_tripped_total", limit="ws_ping_timeout")
        port = int(gw.url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            f"GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        assert (await reader.readline()).startswith(b"HTTP/1.1 101")
        # never answer a ping: the server gives up on this client
        for _ in range(200):
            if await gw.metric("toolwire_limits_tripped_total", limit="ws_ping_timeout") == before + 1:
                break
            await asyncio.sleep(0.05)
        writer.close()
        assert await gw.metric("toolwire_limits_tripped_total", limit="ws_ping_timeout") == before + 1


def test_a_server_without_the_drain_extension_serves_websockets_too(upstream: ChatUpstream) -> None:
    """Under another ASGI server (here Starlette's test client), which does not offer
    ``toolwire.drain``, a WebSocket is answered all the same."""
    upstream.enqueue(Text("no drain needed"))
    with TestClient(gateway_app(chat_config(upstream.base_url))) as client, client.websocket_connect("/v1/responses") as ws:
        ws.send_text(json.dumps({"type": "response.create", "model": "m", "input": "hi"}))
        events: list[JSON] = []
        while not events or events[-1]["type"] not in ("response.completed", "response.failed", "error"):
            events.append(ws.receive_json())
    assert events[-1]["type"] == "response.completed" and text_of(events[-1]["response"]) == "no drain needed"


async def test_a_handshake_the_websocket_protocol_refuses_is_answered_and_leaves_nothing_behind(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upgrade asked for with a WebSocket version the server does not speak: the client
    is told what was wrong (400), no error is left in the event loop, and the connection's
    place is given back."""
    monkeypatch.setattr(_connections, "_table", None)  # this server's own count
    with loop_errors() as errors:
        async with gateway(chat_config(upstream.base_url)) as gw:
            reader, writer = await asyncio.open_connection("127.0.0.1", int(gw.url.rsplit(":", 1)[1]))
            key = base64.b64encode(os.urandom(16)).decode()
            writer.write(
                f"GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 8\r\n\r\n".encode()
            )
            refused = await asyncio.wait_for(reader.read(), 30)
            writer.close()
            open_connections = await gw.metric("toolwire_client_connections", state="open")
    assert refused.startswith(b"HTTP/1.1 400 "), refused[:200]
    assert refused.endswith(b"invalid Sec-WebSocket-Version header: 8.\n")
    assert errors == []
    assert open_connections == 1, "only the connection asking for /metrics"
