"""Responses over WebSocket, through the real gateway process, with a real WebSocket client.

``toolwire serve`` in front of the scripted Chat upstream; the ``websockets`` client
speaks to ``ws://.../v1/responses`` as Codex does: ``response.create`` messages, one
JSON text message back per event. Every rule of the transport has its test: the
handshake, the events (the same as over SSE), sequential responses on one connection,
connection-local history with ``store: false``, ``generate: false``, errors as events
that leave the connection open, the bounds (message size, lifetime, ping, handshake
time) with the metric each one counts, authentication, a client that leaves, SIGTERM,
and 200 sessions at once.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.reliability.helpers import output_text, stream, wait_until
from tests.support.chat_upstream import ChatUpstream, Cut, HttpError, Stall, Text
from tests.support.gateway import GatewayProcess

JSON = dict[str, Any]
TERMINAL = {"response.completed", "response.failed", "response.incomplete"}
CLIENT_KEY = "ws-client-key-0123"
BOUNDED_LIFETIME = 4.0
MESSAGE_LIMIT = 65_536


def ws_url(gateway: GatewayProcess) -> str:
    return f"ws://127.0.0.1:{gateway.port}/v1/responses"


@asynccontextmanager
async def session(gateway: GatewayProcess, *, key: str | None = None, **headers: str) -> AsyncIterator[ClientConnection]:
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    async with connect(ws_url(gateway), additional_headers=headers, open_timeout=20, max_size=None) as ws:
        yield ws


async def next_event(ws: ClientConnection, timeout: float = 30.0) -> JSON:
    message = await asyncio.wait_for(ws.recv(), timeout)
    assert isinstance(message, str), "every event is a JSON text message"
    event: JSON = json.loads(message)
    return event


async def exchange(ws: ClientConnection, timeout: float = 30.0) -> list[JSON]:
    """Events up to the end of one answer: a terminal event, or an error event (with a status)."""
    events: list[JSON] = []
    while True:
        event = await next_event(ws, timeout)
        events.append(event)
        if event["type"] in TERMINAL or (event["type"] == "error" and "status" in event):
            return events


async def create(ws: ClientConnection, timeout: float = 30.0, **body: Any) -> list[JSON]:
    await ws.send(json.dumps({"type": "response.create", "model": "m", **body}))
    return await exchange(ws, timeout)


def completed(events: list[JSON]) -> JSON:
    """The events are one whole stream ending in exactly one ``response.completed``."""
    types = [event["type"] for event in events]
    assert [types.count(kind) for kind in sorted(TERMINAL)] == [1, 0, 0], types
    assert types[0] == "response.created" and types[-1] == "response.completed", types
    assert [event["sequence_number"] for event in events] == list(range(len(events))), types
    response: JSON = events[-1]["response"]
    return response


def error_of(events: list[JSON]) -> JSON:
    """The events are one WebSocket error event: its status and error."""
    [event] = events
    assert event["type"] == "error" and isinstance(event["status"], int), event
    error: JSON = event["error"]
    assert isinstance(error["code"], str) and error["code"] and error["message"], event
    return event


def user_texts(chat_request: JSON) -> list[str]:
    return [m["content"] if isinstance(m["content"], str) else "".join(p.get("text", "") for p in m["content"])
            for m in chat_request["messages"] if m["role"] == "user"]


def echo(request: JSON) -> Text:
    """Answer with the last user message, so each session's answer is its own."""
    return Text("echo: " + user_texts(request)[-1])


def metric(gateway: GatewayProcess, name: str, **labels: str) -> float:
    text = httpx.get(gateway.url + "/metrics", headers={"Authorization": f"Bearer {CLIENT_KEY}"}, timeout=10).text
    selector = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    found = re.search(rf"^{re.escape(name)}\{{{re.escape(selector)}\}} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


@pytest.fixture(scope="module")
def bounded(_session_upstream: ChatUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway with client keys and short bounds: lifetime, message size, ping, handshake."""
    log_path = tmp_path_factory.mktemp("bounded") / "gateway.log"
    args = [
        "--api-key-env", "TOOLWIRE_TEST_CLIENT_KEYS",
        "--ws-max-lifetime", str(BOUNDED_LIFETIME),
        "--ws-max-message-bytes", str(MESSAGE_LIMIT),
        "--ws-ping-interval", "0.5", "--ws-ping-timeout", "0.5",
        "--client-header-timeout", "1",
    ]
    env = {"TOOLWIRE_TEST_CLIENT_KEYS": CLIENT_KEY}
    with GatewayProcess(_session_upstream.base_url, log_path, *args, env=env) as gateway:
        yield gateway


# --------------------------------------------------------------------------- the handshake


async def test_the_handshake_tells_the_limit_and_echoes_the_turn_state(gateway: GatewayProcess) -> None:
    async with session(gateway, **{"x-codex-turn-state": "sticky-42", "OpenAI-Beta": "responses_websockets=2026-02-06"}) as ws:
        headers = ws.response.headers
        assert headers["x-codex-websocket-max-message-bytes"] == str(32 * 1024 * 1024)  # --max-body-bytes
        assert headers["x-codex-turn-state"] == "sticky-42"
        assert headers["x-reasoning-included"] == "true"
        assert "openai-model" not in headers  # the model is named per response, not here


async def test_without_a_turn_state_none_is_invented(gateway: GatewayProcess) -> None:
    async with session(gateway) as ws:
        assert "x-codex-turn-state" not in ws.response.headers


# --------------------------------------------------------------------------- responses


def kinds(events: list[dict[str, Any]]) -> list[str]:
    """The events' types, a run of deltas of one kind counted once."""
    types = [event["type"] for event in events]
    return [kind for n, kind in enumerate(types) if not (kind.endswith(".delta") and n and types[n - 1] == kind)]


async def test_a_response_is_the_same_events_as_over_sse(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    reply = Text("The same answer, whatever carries it.", reasoning="thinking first")
    upstream.enqueue(reply, reply)
    sse = stream(gateway, {"model": "m", "input": "hi"})
    async with session(gateway) as ws:
        events = await create(ws, input="hi")
    response = completed(events)
    # How the text is cut into deltas depends on how the upstream's chunks came to the
    # gateway (those that come in one read make one delta): runs of deltas count as one.
    assert kinds(events) == kinds(sse)
    assert output_text(response) == output_text(sse[-1]["response"]) == "The same answer, whatever carries it."
    assert [item["type"] for item in response["output"]] == ["reasoning", "message"]


async def test_responses_follow_one_another_on_one_connection(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.responder = echo
    async with session(gateway) as ws:
        for n in range(3):  # sent at once: each waits for the one before it to end
            await ws.send(json.dumps({"type": "response.create", "model": "m", "input": f"number {n}"}))
        answers = [completed(await exchange(ws)) for _ in range(3)]
    assert [output_text(answer) for answer in answers] == [f"echo: number {n}" for n in range(3)]
    assert len({answer["id"] for answer in answers}) == 3


async def test_store_false_is_continued_from_the_connection(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.responder = echo
    async with session(gateway) as ws:
        first = completed(await create(ws, input="remember the word lantern", store=False))
        second = completed(await create(ws, input="which word?", store=False, previous_response_id=first["id"]))
        third = completed(await create(ws, input="and again?", store=False, previous_response_id=second["id"]))
    assert third["previous_response_id"] == second["id"]
    last = upstream.chat_requests[-1]
    assert user_texts(last) == ["remember the word lantern", "which word?", "and again?"]
    assistant = [m["content"] for m in last["messages"] if m["role"] == "assistant"]
    assert assistant == ["echo: remember the word lantern", "echo: which word?"]
    # store: false kept nothing in the store
    assert httpx.get(f"{gateway.base_url}/responses/{first['id']}", timeout=10).status_code == 404


async def test_an_unknown_id_is_an_error_event_and_the_connection_stays(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.responder = echo
    async with session(gateway) as ws:
        private = completed(await create(ws, input="only here", store=False))
    async with session(gateway) as ws:  # a new connection does not know it
        event = error_of(await create(ws, input="go on", previous_response_id=private["id"]))
        assert (event["status"], event["error"]["code"]) == (404, "previous_response_not_found")
        assert event["error"]["param"] == "previous_response_id"
        assert private["id"] in event["error"]["message"]
        assert output_text(completed(await create(ws, input="still here?"))) == "echo: still here?"


async def test_a_stored_response_is_continued_on_any_connection(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.responder = echo
    async with session(gateway) as ws:
        kept = completed(await create(ws, input="kept in the store"))  # store defaults to true
    stored = httpx.get(f"{gateway.base_url}/responses/{kept['id']}", timeout=10)
    assert stored.status_code == 200 and output_text(stored.json()) == "echo: kept in the store"
    async with session(gateway) as ws:
        completed(await create(ws, input="continued", previous_response_id=kept["id"]))
    assert user_texts(upstream.chat_requests[-1]) == ["kept in the store", "continued"]


async def test_a_failed_continuation_forgets_the_id_it_named(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.responder = echo
    async with session(gateway) as ws:
        first = completed(await create(ws, input="start", store=False))
        upstream.responder = lambda _request: HttpError(400, {"error": {"message": "context too long", "type": "invalid_request_error"}})
        failure = error_of(await create(ws, input="too much", store=False, previous_response_id=first["id"]))
        assert failure["status"] == 400 and "context too long" in failure["error"]["message"]
        upstream.responder = echo
        event = error_of(await create(ws, input="retry", store=False, previous_response_id=first["id"]))
        assert event["error"]["code"] == "previous_response_not_found"
        assert output_text(completed(await create(ws, input="from the start"))) == "echo: from the start"


async def test_generate_false_creates_an_empty_response_without_the_model(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.responder = echo
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}]
    async with session(gateway) as ws:
        before = len(upstream.requests)
        warm = await create(ws, input="the prewarmed message", instructions="Be brief.", tools=tools,
                            store=False, generate=False)
        response = completed(warm)
        assert len(upstream.requests) == before  # nothing went upstream
        assert (response["status"], response["output"], response["usage"]) == ("completed", [], None)
        assert [tool["name"] for tool in response["tools"]] == ["lookup"]
        # Codex's next request: the prewarm's id and only what is new (here: nothing).
        answer = completed(await create(ws, input=[], instructions="Be brief.", tools=tools, store=False,
                                        previous_response_id=response["id"]))
    assert output_text(answer) == "echo: the prewarmed message"
    [chat] = upstream.chat_requests[-1:]
    assert chat["messages"][0] == {"role": "system", "content": "Be brief."}
    assert [tool["function"]["name"] for tool in chat["tools"]] == ["lookup"]


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("{not json", "invalid_json"),
        ("[1, 2]", "invalid_json"),
        (json.dumps({"type": "response.cancel"}), "unknown_event_type"),
        (json.dumps({"model": "m", "input": "no type"}), "unknown_event_type"),
        (json.dumps({"type": "response.create", "model": "m", "input": "x", "generate": "no"}), "invalid_request"),
        (json.dumps({"type": "response.create", "input": "no model"}), "invalid_request"),
        (b'{"type": "response.create"}', "invalid_message"),  # a binary message
    ],
    ids=["not-json", "not-an-object", "unknown-type", "no-type", "bad-generate", "invalid-body", "binary"],
)
async def test_a_bad_message_gets_an_error_event_and_the_connection_stays(
    gateway: GatewayProcess, upstream: ChatUpstream, message: str | bytes, code: str
) -> None:
    upstream.responder = echo
    async with session(gateway) as ws:
        await ws.send(message)
        event = error_of(await exchange(ws))
        assert (event["status"], event["error"]["code"]) == (400, code), event
        assert output_text(completed(await create(ws, input="after the error"))) == "echo: after the error"


async def test_upstream_errors_map_as_over_http(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.responder = lambda _request: HttpError(429, {"error": {"message": "slow down", "type": "rate_limit"}},
                                                    headers={"retry-after": "7"})
    http = httpx.post(gateway.base_url + "/responses", json={"model": "m", "input": "x", "stream": True}, timeout=30)
    async with session(gateway) as ws:
        event = error_of(await create(ws, input="x"))
    assert event["status"] == http.status_code == 429
    assert event["error"]["message"] == http.json()["error"]["message"]
    assert event["headers"] == {"retry-after": http.headers["retry-after"]}


async def test_a_broken_stream_ends_in_response_failed_and_the_connection_stays(
    gateway: GatewayProcess, upstream: ChatUpstream
) -> None:
    upstream.enqueue(Cut(after_chunks=3))
    async with session(gateway) as ws:
        events = await create(ws, input="x")
        assert events[-1]["type"] == "response.failed"
        assert sum(event["type"] in TERMINAL for event in events) == 1
        upstream.responder = echo
        assert output_text(completed(await create(ws, input="next"))) == "echo: next"


async def test_an_unknown_model_is_routed_as_over_http(tmp_path: Path, _session_upstream: ChatUpstream) -> None:
    config = tmp_path / "toolwire.toml"
    config.write_text(
        f'[[upstreams]]\nname = "local"\nbase_url = "{_session_upstream.base_url}"\n\n'
        '[[models]]\nname = "known"\nupstream = "local"\nupstream_model = "real-name"\n'
    )
    _session_upstream.responder = echo
    with GatewayProcess(None, tmp_path / "gateway.log", "--config", str(config)) as gateway:
        async with session(gateway) as ws:
            event = error_of(await create(ws, model="elsewhere", input="x"))
            assert (event["status"], event["error"]["code"]) == (404, "model_not_found")
            completed(await create(ws, model="known", input="x"))
    assert _session_upstream.chat_requests[-1]["model"] == "real-name"


# --------------------------------------------------------------------------- a client that leaves


async def test_a_client_that_leaves_cancels_its_upstream_request(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Stall(after_chunks=3, seconds=60, reply=Text("an answer nobody waits for to the end")))
    async with session(gateway) as ws:
        await ws.send(json.dumps({"type": "response.create", "model": "m", "input": "x"}))
        while (await next_event(ws))["type"] != "response.output_text.delta":
            pass
    assert wait_until(lambda: len(upstream.disconnects) == 1, timeout=10), "the upstream request was not cancelled"


# --------------------------------------------------------------------------- bounds and auth


async def test_the_handshake_needs_the_client_key(bounded: GatewayProcess, upstream: ChatUpstream) -> None:
    for key in (None, "wrong-key"):
        with pytest.raises(InvalidStatus) as refused:
            async with session(bounded, key=key):
                pass
        assert refused.value.response.status_code == 401
        assert json.loads(refused.value.response.body or b"{}")["error"]["code"] == "invalid_api_key"
    upstream.responder = echo
    before = metric(bounded, "toolwire_requests_total", model="m", upstream="upstream", status="200", outcome="completed")
    async with session(bounded, key=CLIENT_KEY) as ws:
        completed(await create(ws, input="with the key"))
    after = metric(bounded, "toolwire_requests_total", model="m", upstream="upstream", status="200", outcome="completed")
    assert after == before + 1  # observed as any request


async def test_a_message_over_the_limit_closes_with_1009(bounded: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.responder = echo
    before = metric(bounded, "toolwire_limits_tripped_total", limit="ws_max_message_bytes")
    async with session(bounded, key=CLIENT_KEY) as ws:
        assert ws.response.headers["x-codex-websocket-max-message-bytes"] == str(MESSAGE_LIMIT)
        small = "s" * (MESSAGE_LIMIT - 200)
        assert output_text(completed(await create(ws, input=small))) == "echo: " + small
        await ws.send(json.dumps({"type": "response.create", "model": "m", "input": "x" * MESSAGE_LIMIT}))
        with pytest.raises(ConnectionClosed) as closed:
            await next_event(ws)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    assert wait_until(lambda: metric(bounded, "toolwire_limits_tripped_total", limit="ws_max_message_bytes") == before + 1, timeout=10)


async def test_a_connection_ends_at_its_lifetime(bounded: GatewayProcess, upstream: ChatUpstream) -> None:
    """Idle at the deadline: closed (1000). Busy: its response finishes first, and a
    message that waited gets ``websocket_connection_limit_reached``."""
    before = metric(bounded, "toolwire_limits_tripped_total", limit="ws_max_lifetime")
    async with session(bounded, key=CLIENT_KEY) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await next_event(ws, timeout=BOUNDED_LIFETIME + 20)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000

    upstream.enqueue(Stall(after_chunks=3, seconds=BOUNDED_LIFETIME + 1, reply=Text("outlives the connection's deadline")))
    async with session(bounded, key=CLIENT_KEY) as ws:
        await ws.send(json.dumps({"type": "response.create", "model": "m", "input": "slow"}))
        await ws.send(json.dumps({"type": "response.create", "model": "m", "input": "waiting"}))
        assert output_text(completed(await exchange(ws, timeout=BOUNDED_LIFETIME + 20))) == "outlives the connection's deadline"
        event = error_of(await exchange(ws))
        assert event["error"]["code"] == "websocket_connection_limit_reached"
        with pytest.raises(ConnectionClosed) as closed:
            await next_event(ws)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
    assert len(upstream.chat_requests) == 1  # the waiting message never went upstream
    assert wait_until(lambda: metric(bounded, "toolwire_limits_tripped_total", limit="ws_max_lifetime") == before + 2, timeout=10)


def raw_upgrade(gateway: GatewayProcess) -> socket.socket:
    """A WebSocket opened by hand: a client that will never answer a ping."""
    sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=20)
    sock.sendall(
        b"GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        + f"Authorization: Bearer {CLIENT_KEY}\r\n\r\n".encode()
    )
    return sock


def read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    """Everything the gateway sends until it closes the connection (or the deadline)."""
    received = b""
    deadline = time.monotonic() + timeout
    sock.settimeout(0.5)
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            return received
        received += chunk
    raise AssertionError(f"still open after {timeout} s; received {received!r}")


def test_a_client_that_does_not_answer_pings_is_dropped(bounded: GatewayProcess) -> None:
    before = metric(bounded, "toolwire_limits_tripped_total", limit="ws_ping_timeout")
    with raw_upgrade(bounded) as sock:
        received = read_until_closed(sock, timeout=20)
    assert received.startswith(b"HTTP/1.1 101"), received[:200]
    assert b"\x89" in received  # a ping frame came, and went unanswered
    assert wait_until(lambda: metric(bounded, "toolwire_limits_tripped_total", limit="ws_ping_timeout") == before + 1, timeout=10)


def test_a_connection_that_never_finishes_its_handshake_is_closed(bounded: GatewayProcess) -> None:
    before = metric(bounded, "toolwire_limits_tripped_total", limit="client_header_timeout")
    with socket.create_connection(("127.0.0.1", bounded.port), timeout=20) as sock:
        sock.sendall(b"GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n")  # and no more
        assert read_until_closed(sock, timeout=20).startswith(b"HTTP/1.1 408 ")  # the head began: 408, closed
    assert wait_until(lambda: metric(bounded, "toolwire_limits_tripped_total", limit="client_header_timeout") == before + 1, timeout=10)


# --------------------------------------------------------------------------- shutdown


async def test_sigterm_lets_the_response_in_flight_finish_then_closes_with_1001(
    tmp_path: Path, _session_upstream: ChatUpstream
) -> None:
    upstream = _session_upstream
    upstream.responder = echo
    with GatewayProcess(upstream.base_url, tmp_path / "gateway.log", "--shutdown-grace", "30") as gateway:
        async with session(gateway) as idle, session(gateway) as busy:
            completed(await create(idle, input="one before"))
            upstream.enqueue(Stall(after_chunks=3, seconds=2, reply=Text("finished after the signal")))
            await busy.send(json.dumps({"type": "response.create", "model": "m", "input": "slow"}))
            while (await next_event(busy))["type"] != "response.output_text.delta":
                pass
            assert gateway.process is not None
            gateway.process.send_signal(signal.SIGTERM)
            with pytest.raises(ConnectionClosed) as idle_closed:
                await next_event(idle)
            assert idle_closed.value.rcvd is not None and idle_closed.value.rcvd.code == 1001
            rest = await exchange(busy)
            assert rest[-1]["type"] == "response.completed"
            assert output_text(rest[-1]["response"]) == "finished after the signal"
            with pytest.raises(ConnectionClosed) as busy_closed:
                await next_event(busy)
            assert busy_closed.value.rcvd is not None and busy_closed.value.rcvd.code == 1001
        assert gateway.process.wait(timeout=30) in (0, -signal.SIGTERM)


async def test_a_response_still_running_after_the_grace_fails_then_closes_with_1001(
    tmp_path: Path, _session_upstream: ChatUpstream
) -> None:
    upstream = _session_upstream
    upstream.enqueue(Stall(after_chunks=3, seconds=60, reply=Text("never finishes while the gateway lives")))
    with GatewayProcess(upstream.base_url, tmp_path / "gateway.log", "--shutdown-grace", "1") as gateway:
        async with session(gateway) as ws:
            await ws.send(json.dumps({"type": "response.create", "model": "m", "input": "slow"}))
            while (await next_event(ws))["type"] != "response.output_text.delta":
                pass
            assert gateway.process is not None
            gateway.process.send_signal(signal.SIGTERM)
            rest = await exchange(ws)
            assert rest[-1]["type"] == "response.failed"
            assert "shutting down" in rest[-1]["response"]["error"]["message"]
            with pytest.raises(ConnectionClosed) as closed:
                await next_event(ws)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        assert gateway.process.wait(timeout=30) in (0, -signal.SIGTERM)
    assert wait_until(lambda: len(upstream.disconnects) == 1, timeout=10)


# --------------------------------------------------------------------------- many at once

SESSIONS = 200


async def test_200_sessions_at_once(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    """Every session opens, prewarms and then answers a continued turn, all at once."""
    upstream.responder = echo

    async def one(n: int, ws: ClientConnection) -> str:
        warm = completed(await create(ws, input=f"session {n}", store=False, generate=False, timeout=120))
        answer = completed(await create(ws, input=f"turn of {n}", store=False,
                                        previous_response_id=warm["id"], timeout=120))
        return output_text(answer)

    sockets = [connect(ws_url(gateway), open_timeout=60, max_size=None) for _ in range(SESSIONS)]
    connections = await asyncio.gather(*(opening.__aenter__() for opening in sockets))
    try:
        answers = await asyncio.gather(*(one(n, ws) for n, ws in enumerate(connections)))
    finally:
        await asyncio.gather(*(ws.close() for ws in connections))
    # Each turn reached the backend after its own session's prewarmed message (the two
    # user messages merged into one, as consecutive user messages are for Chat backends).
    assert answers == [f"echo: session {n}\n\nturn of {n}" for n in range(SESSIONS)]
    assert len(upstream.chat_requests) == SESSIONS  # the prewarms asked nothing upstream
