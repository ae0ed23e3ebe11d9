"""Faults of an Anthropic Messages backend, each injected into a real gateway process.

The same cases as for Chat backends (``test_upstream_faults``, ``test_disconnect``),
with Anthropic's own shapes: its error body (``{"type": "error", "error": {...}}``), its
529 (overloaded), ``retry-after``, an ``error`` event mid-stream, a stream cut before
or after its ``message_delta``, garbage, a backend that never answers, and a client
that leaves. Before anything is streamed a fault is an HTTP error with the upstream's
status and message (5xx and 529 retried); after, exactly one ``response.failed``.

The gateways here run with ``--upstream-timeout 1 --upstream-retries 3``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import orjson
import pytest

from tests.support.gateway import GatewayProcess
from tests.support.messages_upstream import (
    Answer,
    Cut,
    HttpError,
    MessagesUpstream,
    Raw,
    Said,
    Stall,
    StreamError,
)

from .conftest import StartGateway
from .helpers import (
    TcpTrap,
    assert_openai_error,
    failure_message,
    open_stream,
    output_text,
    responses_url,
    stream,
    terminal,
    wait_until,
)

TIMEOUT = 1.0
ATTEMPTS = 3
FLAGS = ("--preset", "anthropic", "--upstream-timeout", str(TIMEOUT), "--upstream-retries", str(ATTEMPTS))
BODY: dict[str, Any] = {"model": "claude-sonnet-4-5", "input": "hi"}


@pytest.fixture(scope="module")
def faulty(_session_messages_upstream: MessagesUpstream, start_module_gateway: StartGateway) -> Iterator[GatewayProcess]:
    yield start_module_gateway(_session_messages_upstream.base_url, *FLAGS)


def post(gateway: GatewayProcess, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(responses_url(gateway), json=body, timeout=60)


def event(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: ".encode() + orjson.dumps({"type": kind, **fields}) + b"\n\n"


START = event("message_start", message={"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 3, "output_tokens": 1}})
TEXT = [
    event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
    event("content_block_delta", index=0, delta={"type": "text_delta", "text": "All "}),
    event("content_block_delta", index=0, delta={"type": "text_delta", "text": "done."}),
    event("content_block_stop", index=0),
]
DELTA = event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 2})
STOP = event("message_stop")


# ---------------------------------------------------------------- errors before streaming


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(
    ("status", "error_type", "client_status", "attempts"),
    [
        (400, "invalid_request_error", 400, 1),
        (401, "authentication_error", 401, 1),
        (429, "rate_limit_error", 429, 1),
        (500, "api_error", 502, ATTEMPTS),
        (529, "overloaded_error", 529, ATTEMPTS),
    ],
)
def test_an_error_status_is_passed_on_with_anthropics_message(
    faulty: GatewayProcess,
    messages_upstream: MessagesUpstream,
    streaming: bool,
    status: int,
    error_type: str,
    client_status: int,
    attempts: int,
) -> None:
    message = f"scripted {error_type}: the upstream's own words"
    messages_upstream.enqueue(*[HttpError(status, error_type, message, {"retry-after": "9"})] * 4)
    response = post(faulty, {**BODY, "stream": streaming})
    error = assert_openai_error(response, client_status)
    assert message in error["message"], error
    assert error["type"] == error_type
    assert len(messages_upstream.message_requests) == attempts
    if status in (429, 529):
        assert response.headers["retry-after"] == "9"


def test_529_is_retried_until_it_succeeds(faulty: GatewayProcess, messages_upstream: MessagesUpstream) -> None:
    messages_upstream.enqueue(
        HttpError(529, "overloaded_error", "Overloaded"), HttpError(529, "overloaded_error", "Overloaded"), Answer([Said("third time")])
    )
    assert output_text(terminal(stream(faulty, BODY))["response"]) == "third time"
    assert len(messages_upstream.message_requests) == ATTEMPTS


def test_no_first_byte_within_the_timeout_is_504(start_gateway: StartGateway) -> None:
    with TcpTrap("silent") as trap:
        gateway = start_gateway(trap.url.removesuffix("/v1"), *FLAGS)
        error = assert_openai_error(post(gateway, {**BODY, "stream": True}), 504)
        assert error["code"] == "upstream_timeout", error
        posts = [c for c in trap.connections if c.request.startswith(b"POST")]
        assert posts and b"POST /v1/messages " in posts[0].request


# ---------------------------------------------------------------- faults once streaming has begun


def only_request(upstream: MessagesUpstream) -> None:
    assert len(upstream.message_requests) == 1, f"{len(upstream.message_requests)} attempts"


@pytest.mark.parametrize("after", [0, 2, 5])
def test_a_cut_mid_stream_fails_the_response_and_is_not_retried(
    faulty: GatewayProcess, messages_upstream: MessagesUpstream, after: int
) -> None:
    messages_upstream.enqueue(Cut(after_events=after), Answer([Said("a retry would get this")]))
    message = failure_message(stream(faulty, BODY))
    assert "upstream" in message.lower(), message
    only_request(messages_upstream)


def test_a_stall_mid_stream_fails_after_the_timeout(faulty: GatewayProcess, messages_upstream: MessagesUpstream) -> None:
    messages_upstream.enqueue(Stall(after_events=4, seconds=20), Answer([Said("a retry would get this")]))
    message = failure_message(stream(faulty, BODY))
    assert "stalled" in message and "1 s" in message, message
    only_request(messages_upstream)


def test_an_error_event_fails_the_response_with_its_message(faulty: GatewayProcess, messages_upstream: MessagesUpstream) -> None:
    messages_upstream.enqueue(StreamError(after_events=5, message="Overloaded: the scripted words"))
    events = stream(faulty, BODY)
    assert "Overloaded: the scripted words" in failure_message(events)
    assert [e["type"] for e in events].count("error") == 1
    only_request(messages_upstream)


RAW_FAULTS: dict[str, tuple[list[bytes], str]] = {
    "unparseable data": ([START, b'event: content_block_delta\ndata: {"type": "content\n\n'], "unparseable"),
    "data that is not an object": ([START, b"event: ping\ndata: [1, 2]\n\n"], "not an object"),
    "an HTML page with status 200": ([b"<html><body>Gateway login required</body></html>"], 'an HTML page ("Gateway login required")'),
    "nothing at all": ([], ""),
    "only pings": ([event("ping"), event("ping")], ""),
    "cut before message_delta": ([START, *TEXT], "ended before it finished"),
    "a tool call cut before message_delta": (
        [
            START,
            event("content_block_start", index=0, content_block={"type": "tool_use", "id": "toolu_1", "name": "exec_command", "input": {}}),
            event("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": '{"cmd": "rm -rf /tmp/bu'}),
        ],
        "ended before it finished",
    ),
}


@pytest.mark.parametrize("fault", list(RAW_FAULTS))
def test_a_broken_stream_ends_in_one_response_failed(faulty: GatewayProcess, messages_upstream: MessagesUpstream, fault: str) -> None:
    lines, says = RAW_FAULTS[fault]
    messages_upstream.enqueue(Raw(lines), Answer([Said("a retry would get this")]))
    tools = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]
    events = stream(faulty, {**BODY, "tools": tools})
    message = failure_message(events)
    assert says in message, message
    assert not [e for e in events if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"]
    only_request(messages_upstream)


def test_a_stream_with_its_stop_reason_but_no_message_stop_completes(
    faulty: GatewayProcess, messages_upstream: MessagesUpstream
) -> None:
    """The control for the cut cases: the stop reason came, only ``message_stop`` is missing."""
    messages_upstream.enqueue(Raw([START, *TEXT, DELTA]))
    end = terminal(stream(faulty, BODY))
    assert end["type"] == "response.completed"
    assert output_text(end["response"]) == "All done."


def test_the_answer_ends_at_message_stop(faulty: GatewayProcess, messages_upstream: MessagesUpstream) -> None:
    messages_upstream.enqueue(Raw([START, *TEXT, DELTA, STOP]))
    end = terminal(stream(faulty, BODY))
    assert end["type"] == "response.completed" and output_text(end["response"]) == "All done."


def test_a_garbage_non_streaming_answer_is_502(faulty: GatewayProcess, messages_upstream: MessagesUpstream) -> None:
    messages_upstream.enqueue(Raw([b"not json at all"], content_type="application/json"))
    error = assert_openai_error(post(faulty, BODY), 502)
    assert "not JSON" in error["message"], error
    only_request(messages_upstream)


# ---------------------------------------------------------------- the client leaves


def test_leaving_mid_stream_cancels_the_upstream(faulty: GatewayProcess, messages_upstream: MessagesUpstream) -> None:
    messages_upstream.enqueue(Stall(after_events=5, seconds=60, reply=Answer([Said("This answer stalls after a few words and never ends.")])))
    sock, _ = open_stream(faulty, BODY, until="response.output_text.delta")
    sock.close()
    closed_at = time.monotonic()
    assert wait_until(lambda: bool(messages_upstream.disconnects), timeout=30), "the upstream never saw the close"
    print(f"disconnect-to-cancel: {(time.monotonic() - closed_at) * 1000:.0f} ms (bounded by the wait above)")


def test_the_gateway_is_healthy_after_every_fault(faulty: GatewayProcess, messages_upstream: MessagesUpstream) -> None:
    messages_upstream.enqueue(Answer([Said("fine again")]))
    assert output_text(terminal(stream(faulty, BODY))["response"]) == "fine again"
    assert httpx.get(faulty.url + "/readyz", timeout=30).status_code == 200


@pytest.mark.parametrize(("preset", "auth"), [("anthropic", "x-api-key"), ("glm-anthropic", "bearer")])
def test_the_key_goes_where_the_preset_says(
    start_gateway: StartGateway, messages_upstream: MessagesUpstream, preset: str, auth: Literal["x-api-key", "bearer"]
) -> None:
    """x-api-key for Anthropic (and never a bearer token beside it); a bearer token only for
    a vendor that documents one. The upstream answers 400 to the other."""
    messages_upstream.auth = auth
    gateway = start_gateway(messages_upstream.base_url, "--preset", preset)
    messages_upstream.enqueue(Answer([Said("authorized")]))
    assert output_text(terminal(stream(gateway, BODY))["response"]) == "authorized"
    [sent] = messages_upstream.requests
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert ("x-api-key" in sent.headers) is (auth == "x-api-key")
