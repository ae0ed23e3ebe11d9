"""Upstream faults, each injected into a real gateway process.

Before anything is streamed a fault is an HTTP error (the upstream's own status and
message; 502 when it cannot be reached, 504 when it sends no first byte within
``--upstream-timeout``). A failed connect or a 5xx is retried up to
``--upstream-retries`` attempts with a growing pause; nothing is retried once the
stream has begun. A fault after that ends the stream with exactly one terminal event,
``response.failed``, whose message says what happened.

The gateways here run with ``--upstream-timeout 1 --upstream-retries 3``. Attempts are
counted where the upstream sees them: the scripted upstream's request log, or a
``TcpTrap`` that records every connection.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from tests.support.chat_upstream import ChatUpstream, Cut, HttpError, Raw, Stall, StreamError, Text
from tests.support.gateway import GatewayProcess

from .conftest import StartGateway
from .helpers import (
    TcpTrap,
    assert_openai_error,
    dead_port_url,
    failure_message,
    output_text,
    responses_url,
    stream,
    terminal,
    wait_until,
)

TIMEOUT = 1.0
ATTEMPTS = 3
FLAGS = ("--upstream-timeout", str(TIMEOUT), "--upstream-retries", str(ATTEMPTS))
BODY: dict[str, Any] = {"model": "m", "input": "hi"}


@pytest.fixture(scope="module")
def faulty(_session_upstream: ChatUpstream, start_module_gateway: StartGateway) -> Iterator[GatewayProcess]:
    yield start_module_gateway(_session_upstream.base_url, *FLAGS)


def post(gateway: GatewayProcess, body: dict[str, Any], timeout: float = 60) -> httpx.Response:
    return httpx.post(responses_url(gateway), json=body, timeout=timeout)


def chunk(**delta: Any) -> bytes:
    payload = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def finish_chunk(reason: str) -> bytes:
    payload = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}
    return b"data: " + orjson.dumps(payload) + b"\n\n"


DONE = b"data: [DONE]\n\n"


# ---------------------------------------------------------------- errors before streaming


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(
    ("status", "client_status", "attempts"),
    [(400, 400, 1), (401, 401, 1), (404, 404, 1), (422, 422, 1), (429, 429, 1), (500, 502, ATTEMPTS), (503, 503, ATTEMPTS)],
)
def test_an_error_status_is_passed_on_and_only_5xx_is_retried(
    faulty: GatewayProcess, upstream: ChatUpstream, streaming: bool, status: int, client_status: int, attempts: int
) -> None:
    message = f"scripted failure {status}: the upstream's own words"
    upstream.enqueue(*[HttpError(status, {"error": {"message": message, "type": "x", "code": "c"}}, {"retry-after": "9"})] * 4)
    response = post(faulty, {**BODY, "stream": streaming})
    error = assert_openai_error(response, client_status)
    assert message in error["message"], error
    assert len(upstream.chat_requests) == attempts
    if status == 429:
        assert response.headers["retry-after"] == "9"


def test_a_plain_text_error_body_still_gives_an_openai_error(faulty: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(HttpError(403, "<html><body>Forbidden by proxy</body></html>"))
    response = post(faulty, {**BODY, "stream": True})
    error = assert_openai_error(response, 403)
    assert "Forbidden by proxy" in error["message"], error


def test_5xx_is_retried_after_a_pause_until_it_succeeds(faulty: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(HttpError(502, {"error": {"message": "warming"}}), HttpError(503, {"error": {"message": "still"}}), Text("third time"))
    events = stream(faulty, BODY)
    assert output_text(terminal(events)["response"]) == "third time"
    arrivals = [r.received_at for r in upstream.requests if r.path == "/v1/chat/completions"]
    assert len(arrivals) == ATTEMPTS
    pauses = [b - a for a, b in itertools.pairwise(arrivals)]
    # A backoff exists (the default policy waits 0.25 s, then 0.5 s). Lower bounds only: a
    # busy machine can make a pause longer, never shorter.
    assert min(pauses) >= 0.1, pauses


def test_retries_stop_at_the_configured_count(faulty: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(*[HttpError(503, {"error": {"message": "overloaded"}})] * (ATTEMPTS + 2))
    response = post(faulty, {**BODY, "stream": True})
    assert response.status_code == 503
    assert len(upstream.chat_requests) == ATTEMPTS
    assert upstream.pending == 2


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
def test_connection_refused_is_502_naming_the_url_and_readyz_says_so(
    start_gateway: StartGateway, streaming: bool
) -> None:
    with dead_port_url() as url:
        gateway = start_gateway(url, *FLAGS)
        started = time.monotonic()
        response = post(gateway, {**BODY, "stream": streaming})
        elapsed = time.monotonic() - started
        error = assert_openai_error(response, 502)
        assert error["code"] == "upstream_unreachable", error
        assert url in error["message"], error
        # three attempts, with a pause before each retry
        assert elapsed >= 2 * 0.1, elapsed
        ready = httpx.get(gateway.url + "/readyz", timeout=30)
        assert ready.status_code == 503
        assert url.removesuffix("/v1") in ready.json()["reason"]
        assert httpx.get(gateway.url + "/healthz", timeout=30).json() == {"status": "ok"}


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
def test_a_connection_closed_before_any_answer_is_retried_then_502(
    start_gateway: StartGateway, streaming: bool
) -> None:
    with TcpTrap("close") as trap:
        gateway = start_gateway(trap.url, *FLAGS)
        response = post(gateway, {**BODY, "stream": streaming})
        error = assert_openai_error(response, 502)
        assert trap.url in error["message"], error
        chat_attempts = [c for c in trap.connections if c.request.startswith(b"POST")]
        assert len(chat_attempts) == ATTEMPTS


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
def test_no_first_byte_within_the_timeout_is_504(start_gateway: StartGateway, streaming: bool) -> None:
    """A backend that accepts the request and says nothing: 504 after ``--upstream-timeout``
    (1 s here), not after the default 300 s."""
    with TcpTrap("silent") as trap:
        gateway = start_gateway(trap.url, *FLAGS)
        started = time.monotonic()
        response = post(gateway, {**BODY, "stream": streaming}, timeout=120)  # not 300 s
        elapsed = time.monotonic() - started
        error = assert_openai_error(response, 504)
        assert error["code"] == "upstream_timeout", error
        assert "1 s" in error["message"] and trap.url in error["message"], error
        assert elapsed >= TIMEOUT * 0.9, elapsed  # a lower bound: load only makes it longer
        # an upstream that accepts and never answers is not ready either
        ready = httpx.get(gateway.url + "/readyz", timeout=30)
        assert ready.status_code == 503, ready.text


def test_a_stalled_non_streaming_answer_is_504(faulty: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Stall(0, seconds=5, reply=Text("too late")))
    response = post(faulty, BODY)
    assert assert_openai_error(response, 504)["code"] == "upstream_timeout"


def dripped_answer(seconds: float) -> Raw:
    """A whole JSON answer written a byte every 0.1 s for ``seconds``: each byte well within
    the read timeout, the whole far longer than it."""
    drips: list[bytes | float] = [b'{"id": "c", "object": "chat.completion", "choices": [{"index": 0, "message": {"content": "']
    for _ in range(int(seconds * 10)):
        drips += [0.1, b"a"]
    drips.append(b'"}, "finish_reason": "stop"}]}')
    return Raw(drips, content_type="application/json")


def test_a_whole_answer_written_a_byte_at_a_time_is_bounded_as_a_whole(
    start_gateway: StartGateway, upstream: ChatUpstream
) -> None:
    """Non-streamed, the body must come within the read timeout and the largest body's time
    at 1 MiB/s (here 1 s and 1 ms: a 504); streamed, the answer is one event, which must
    come within the event timeout (2 s: ``response.failed``). Before, each byte restarted
    the wait, and the request was held until the upstream chose to end it."""
    gateway = start_gateway(upstream.base_url, *FLAGS, "--upstream-max-body-bytes", "1024", "--upstream-event-timeout", "2")
    upstream.enqueue(dripped_answer(20), dripped_answer(20))
    started = time.monotonic()
    error = assert_openai_error(post(gateway, BODY), 504)
    whole_at = time.monotonic() - started
    assert error["code"] == "upstream_timeout" and "did not send its whole answer within 1 s" in error["message"], error
    started = time.monotonic()
    message = failure_message(stream(gateway, BODY, timeout=60))
    streamed_at = time.monotonic() - started
    assert "brought no event for more than 2 s" in message, message
    assert whole_at < 10 and streamed_at < 10, (whole_at, streamed_at)  # not the 20 s the upstream would take


# ---------------------------------------------------------------- faults once streaming has begun
# ---------------------------------------------------------------- faults once streaming has begun


def only_request(upstream: ChatUpstream) -> None:
    """Nothing was retried: the upstream saw exactly one chat request."""
    assert len(upstream.chat_requests) == 1, f"{len(upstream.chat_requests)} attempts"


@pytest.mark.parametrize("after", [0, 1, 5])
def test_a_reset_mid_stream_fails_the_response_and_is_not_retried(
    faulty: GatewayProcess, upstream: ChatUpstream, after: int
) -> None:
    upstream.enqueue(Cut(after_chunks=after), Text("a retry would get this"))
    message = failure_message(stream(faulty, BODY))
    assert "upstream" in message.lower(), message
    only_request(upstream)


def test_a_stall_mid_stream_fails_after_the_timeout(faulty: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Stall(after_chunks=3, seconds=600), Text("a retry would get this"))
    message = failure_message(stream(faulty, BODY, timeout=120))  # long before the stall ends
    assert "stalled" in message and "1 s" in message, message
    only_request(upstream)


def test_an_in_stream_error_fails_the_response_with_the_upstream_message(
    faulty: GatewayProcess, upstream: ChatUpstream
) -> None:
    body = {"error": {"message": "CUDA out of memory on the backend", "type": "InternalServerError", "code": 500}}
    upstream.enqueue(StreamError(after_chunks=4, error_body=body), Text("a retry would get this"))
    message = failure_message(stream(faulty, BODY))
    assert "CUDA out of memory" in message
    only_request(upstream)


RAW_FAULTS: dict[str, tuple[list[bytes], str]] = {
    "unparseable data": ([chunk(role="assistant", content="Hel"), b'data: {"choices": [{"delta": \n\n', DONE], "unparseable"),
    "data that is not an object": ([chunk(role="assistant", content="Hel"), b"data: [1, 2, 3]\n\n", DONE], "not an object"),
    "unparseable first event": ([b"data: <html>oops</html>\n\n"], "unparseable"),
    "an HTML page with status 200": ([b"<html><body>Gateway login required</body></html>"], 'an HTML page ("Gateway login required")'),
    "nothing at all": ([], ""),
    "only [DONE]": ([DONE], ""),
}


@pytest.mark.parametrize("fault", list(RAW_FAULTS))
def test_a_broken_stream_ends_in_one_response_failed(faulty: GatewayProcess, upstream: ChatUpstream, fault: str) -> None:
    lines, says = RAW_FAULTS[fault]
    upstream.enqueue(Raw(lines), Text("a retry would get this"))
    message = failure_message(stream(faulty, BODY))
    assert says in message, message
    only_request(upstream)


STOPPED: dict[str, list[bytes]] = {
    "text": [chunk(role="assistant", content=""), chunk(content="The answer is "), chunk(content="forty")],
    "a tool call": [
        chunk(role="assistant", content=None),
        chunk(tool_calls=[{"index": 0, "id": "call_1", "type": "function", "function": {"name": "exec_command", "arguments": ""}}]),
        chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"cmd": "rm -rf /tmp/build'}}]),
    ],
}


@pytest.mark.parametrize("what", list(STOPPED))
def test_a_stream_that_stops_without_finishing_fails(faulty: GatewayProcess, upstream: ChatUpstream, what: str) -> None:
    """The body ends cleanly, but with neither a ``finish_reason`` nor ``[DONE]``: the
    answer was cut short. Completing it would hand the client a truncated answer (or a
    truncated command, repaired into valid JSON) as if it were whole."""
    upstream.enqueue(Raw(STOPPED[what]))
    tools = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]
    message = failure_message(stream(faulty, {**BODY, "tools": tools}))
    assert "upstream" in message.lower(), message
    only_request(upstream)


def test_a_finished_stream_without_done_still_completes(faulty: GatewayProcess, upstream: ChatUpstream) -> None:
    """The control for the test above: a finish_reason was sent, only ``[DONE]`` is missing."""
    upstream.enqueue(Raw([chunk(role="assistant", content="All "), chunk(content="done."), finish_chunk("stop")]))
    end = terminal(stream(faulty, BODY))
    assert end["type"] == "response.completed"
    assert output_text(end["response"]) == "All done."


def test_the_answer_ends_at_done_even_if_the_upstream_keeps_the_body_open(
    faulty: GatewayProcess, upstream: ChatUpstream
) -> None:
    """``[DONE]`` ends the answer: its terminal event goes out at once, not when the
    upstream gets round to ending the body (the rest is drained afterwards, for the
    connection pool; the drain gives up after a second)."""
    lines = [chunk(role="assistant", content="All "), chunk(content="done."), finish_chunk("stop"), DONE]
    upstream.enqueue(Raw(lines, linger=600), Text("the next request is answered"))
    end = terminal(stream(faulty, BODY, timeout=60))  # long before the body would end
    assert end["type"] == "response.completed"
    assert output_text(end["response"]) == "All done."
    assert upstream.ended == []  # the upstream's body was still open
    assert wait_until(lambda: upstream.disconnects != [], timeout=60), "the drain never gave up"
    assert output_text(terminal(stream(faulty, BODY))["response"]) == "the next request is answered"


def test_the_rest_of_a_finished_body_is_read_not_cut(faulty: GatewayProcess, upstream: ChatUpstream) -> None:
    """After the answer is out, the gateway still reads the upstream body to its end
    (so the connection goes back to the pool) instead of closing the connection on it."""
    lines = [chunk(role="assistant", content="All "), chunk(content="done."), finish_chunk("stop"), DONE]
    upstream.enqueue(Raw(lines, linger=0.3))
    assert terminal(stream(faulty, BODY))["type"] == "response.completed"
    assert wait_until(lambda: upstream.ended or upstream.disconnects, timeout=30)
    assert (upstream.ended, upstream.disconnects) == ([0], [])


def test_a_garbage_non_streaming_answer_is_502_and_not_retried(faulty: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Raw([b"not json at all"], content_type="application/json"), Text("a retry would get this"))
    response = post(faulty, BODY)
    error = assert_openai_error(response, 502)
    assert "not JSON" in error["message"], error
    only_request(upstream)


def test_a_non_streaming_answer_cut_before_its_first_byte_is_retried(
    faulty: GatewayProcess, upstream: ChatUpstream
) -> None:
    """The connection closes before the status line (nothing reached the client): like a
    failed connect, it is retried, and after the last attempt it is a 502."""
    upstream.enqueue(*[Cut(after_chunks=0)] * ATTEMPTS)
    response = post(faulty, BODY)
    error = assert_openai_error(response, 502)
    assert "upstream" in error["message"].lower(), error
    assert len(upstream.chat_requests) == ATTEMPTS


def test_the_gateway_is_healthy_after_every_fault(faulty: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("fine again"))
    assert output_text(terminal(stream(faulty, BODY))["response"]) == "fine again"
    assert httpx.get(faulty.url + "/readyz", timeout=30).status_code == 200
