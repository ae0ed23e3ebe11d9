"""``HttpEndpoint`` against the scripted Chat upstream: what it sends, the answers it reads,
and every way an answer fails (the error each one becomes, and what is retried).

Only this process runs: the endpoint is driven directly, as every HTTP backend drives it.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
import pytest
from aiohttp.client_reqrep import ConnectionKey

from tests.support.chat_upstream import ChatUpstream, Cut, HttpError, Raw, Stall, StreamError, Text
from toolwire.errors import UpstreamError, UpstreamLimitError, UpstreamProtocolError
from toolwire.upstream import HttpEndpoint, Proxy, RetryPolicy, UpstreamLimits
from toolwire.upstream._failures import connect_error, describe, without_credentials

NO_WAIT = RetryPolicy(attempts=3, backoff_seconds=0.0)
BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
STREAMED = orjson.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]})


@pytest.fixture
async def endpoint(upstream: ChatUpstream) -> AsyncIterator[HttpEndpoint]:
    made = HttpEndpoint(upstream.base_url, "/chat/completions", api_key="sk-test-key", retry=NO_WAIT, timeout=5)
    yield made
    await made.aclose()


def refused_url() -> str:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


async def failure(call: Any) -> UpstreamError:
    with pytest.raises(UpstreamError) as raised:
        await call
    return raised.value


# ---------------------------------------------------------------- what is sent


async def test_a_whole_answer_and_the_headers_it_was_asked_with(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("hello"))
    answer = await endpoint.post_for_json(BODY)
    assert answer["choices"][0]["message"]["content"] == "hello"
    [request] = upstream.requests
    assert (request.method, request.path, request.body) == ("POST", "/v1/chat/completions", BODY)
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream, application/json"
    assert request.headers["authorization"] == "Bearer sk-test-key"
    assert "x-api-key" not in request.headers


async def test_the_key_in_x_api_key_with_the_wires_own_headers(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("hello"))
    endpoint = HttpEndpoint(
        upstream.base_url + "/", "/chat/completions", api_key="sk-ant", key_header="x-api-key",
        headers={"anthropic-version": "2023-06-01"},
    )  # fmt: skip
    try:
        await endpoint.post_for_json(BODY)
    finally:
        await endpoint.aclose()
    [request] = upstream.requests
    assert request.path == "/v1/chat/completions"  # the base URL's trailing slash is not doubled
    assert (request.headers["x-api-key"], request.headers["anthropic-version"]) == ("sk-ant", "2023-06-01")
    assert "authorization" not in request.headers


async def test_no_key_no_credential_header(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("hello"), Text("again"))
    endpoint = HttpEndpoint(upstream.base_url, "/chat/completions")
    try:
        await endpoint.post_for_json(BODY)
        await endpoint.aclose()  # a closed endpoint opens a new session when used again
        assert (await endpoint.post_for_json(BODY))["choices"][0]["message"]["content"] == "again"
    finally:
        await endpoint.aclose()
    assert all("authorization" not in r.headers and "x-api-key" not in r.headers for r in upstream.requests)


async def test_a_cookie_one_answer_sets_never_goes_out_with_the_next(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(HttpError(400, {"error": {"message": "no"}}, headers={"Set-Cookie": "session=alice"}), Text("ok"))
    await failure(endpoint.post_for_json(BODY))
    await endpoint.post_for_json(BODY)
    assert "cookie" not in upstream.requests[1].headers


# ---------------------------------------------------------------- error answers


async def test_an_error_status_keeps_the_upstreams_message_and_fields(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    body = {"error": {"message": "model 'x' not found", "type": "invalid_request_error", "code": "model_not_found", "param": "model"}}
    upstream.enqueue(HttpError(404, body))
    error = await failure(endpoint.post_for_json(BODY))
    assert type(error) is UpstreamError
    assert (error.status, error.upstream_status, error.message) == (404, 404, "model 'x' not found")
    assert (error.error_type, error.code, error.param, error.retry_after) == (
        "invalid_request_error", "model_not_found", "model", None,
    )  # fmt: skip
    assert len(upstream.requests) == 1, "a 4xx is not retried"


async def test_a_429_keeps_retry_after_and_is_not_retried(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(HttpError(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "7"}))
    error = await failure(endpoint.post_for_json(BODY))
    assert (error.status, error.retry_after, error.error_type) == (429, "7", "invalid_request_error")
    assert len(upstream.requests) == 1


async def test_a_5xx_is_retried_up_to_the_attempts_then_passed_on(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(*[HttpError(500, {"error": {"message": "boom"}})] * 3)
    error = await failure(endpoint.post_for_json(BODY))
    assert len(upstream.requests) == 3
    assert (error.status, error.upstream_status, error.error_type) == (502, 500, "server_error")  # 500 -> 502
    upstream.enqueue(HttpError(503, "busy"), Text("recovered"))
    assert (await endpoint.post_for_json(BODY))["choices"][0]["message"]["content"] == "recovered"
    upstream.enqueue(*[HttpError(503, "busy")] * 3)
    assert (await failure(endpoint.post_for_json(BODY))).status == 503


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        ({"detail": "vLLM says no"}, None, "vLLM says no"),
        ({"error": "ollama says no"}, None, "ollama says no"),
        ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, None, "Overloaded"),
        ([{"message": "in a list"}], None, "[{'message': 'in a list'}]"),
        ("<html><body>Bad gateway</body></html>\n", "text/html", 'The upstream at {url} answered HTTP 418 I\'m a Teapot with an HTML page ("Bad gateway").'),
        ("", None, "The upstream answered HTTP 418 I'm a Teapot."),
        ({"error": {"message": ""}}, None, "The upstream answered HTTP 418 I'm a Teapot."),
        (17, None, "17"),
    ],
)
async def test_the_message_of_each_kind_of_error_body(
    endpoint: HttpEndpoint, upstream: ChatUpstream, body: Any, content_type: str | None, message: str
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    reply = HttpError(418, orjson.dumps(body).decode() if isinstance(body, int) else body, headers=headers)
    upstream.enqueue(reply)
    error = await failure(endpoint.post_for_json(BODY))
    assert (error.message, error.status, error.code, error.param) == (message.replace("{url}", upstream.base_url), 418, None, None)
    expected_type = "overloaded_error" if isinstance(body, dict) and body.get("type") == "error" else "invalid_request_error"
    assert error.error_type == expected_type


async def test_fields_of_the_wrong_type_are_left_out(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(HttpError(400, {"error": {"message": 5, "type": 1, "code": 400, "param": ["x"]}}))
    error = await failure(endpoint.post_for_json(BODY))
    assert (error.message, error.error_type, error.code, error.param) == ("5", "invalid_request_error", None, None)


async def test_a_long_error_body_is_cut(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(HttpError(400, "x" * 100_000), HttpError(400, [["y"] * 1000]))
    assert (await failure(endpoint.post_for_json(BODY))).message == "x" * 2000
    assert len((await failure(endpoint.post_for_json(BODY))).message) == 2000


# ---------------------------------------------------------------- unreachable, slow, unreadable


async def test_a_refused_connection_is_retried_then_502_naming_the_upstream() -> None:
    url = refused_url()
    endpoint = HttpEndpoint(url, "/chat/completions", retry=RetryPolicy(attempts=2, backoff_seconds=0.0))
    try:
        error = await failure(endpoint.post_for_json(BODY))
    finally:
        await endpoint.aclose()
    assert (error.status, error.code, error.upstream_status) == (502, "upstream_unreachable", None)
    assert error.message == f"Cannot reach the upstream at {url}: no connection to {urlsplit(url).netloc} (Connection refused)."
    assert error.__cause__ is not None


async def test_a_connection_closed_before_any_answer_is_retried(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(Cut(0), Text("second try"))
    assert (await endpoint.post_for_json(BODY))["choices"][0]["message"]["content"] == "second try"
    assert len(upstream.requests) == 2


async def test_no_first_byte_in_time_is_504_and_not_retried(upstream: ChatUpstream) -> None:
    upstream.enqueue(Stall(0, seconds=10))
    endpoint = HttpEndpoint(upstream.base_url, "/chat/completions", timeout=0.3, retry=NO_WAIT)
    try:
        error = await failure(endpoint.post_for_json(BODY))
    finally:
        await endpoint.aclose()
    assert (error.status, error.code) == (504, "upstream_timeout")
    assert error.message == f"The upstream at {upstream.base_url} sent no response within 0.3 s."
    assert error.__cause__ is not None
    assert len(upstream.requests) == 1


async def test_an_answer_that_is_not_json(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(Raw([b"not json"], content_type="application/json"), Raw([b"[1, 2]"], content_type="application/json"))
    error = await failure(endpoint.post_for_json(BODY))
    assert type(error) is UpstreamProtocolError and error.message == "The upstream answered with a body that is not JSON."
    error = await failure(endpoint.post_for_json(BODY))
    assert type(error) is UpstreamProtocolError
    assert error.message == "The upstream answered with JSON that is not an object."
    assert len(upstream.requests) == 2, "a 200 that cannot be read is not retried"


async def test_a_whole_answer_over_the_limit(upstream: ChatUpstream) -> None:
    tripped: list[str] = []
    limits = UpstreamLimits(max_body_bytes=2048, tripped=tripped.append)
    endpoint = HttpEndpoint(upstream.base_url, "/chat/completions", limits=limits)
    upstream.enqueue(Text("x" * 3000), Text("short"))
    try:
        error = await failure(endpoint.post_for_json(BODY))
        assert (await endpoint.post_for_json(BODY))["choices"][0]["message"]["content"] == "short"
    finally:
        await endpoint.aclose()
    assert type(error) is UpstreamLimitError and error.limit == "upstream_max_body_bytes"
    assert error.message == (
        "The upstream's answer is larger than the gateway's limit of 2 KiB (upstream_max_body_bytes); "
        "it was not read to the end."
    )
    assert (error.status, error.code) == (502, "upstream_response_too_large")
    assert tripped == ["upstream_max_body_bytes"]


# ---------------------------------------------------------------- readiness


async def test_check_gets_the_check_path_and_any_status_will_do(upstream: ChatUpstream) -> None:
    endpoint = HttpEndpoint(upstream.base_url, "/chat/completions", api_key="sk-k", check_path="/nowhere")
    try:
        await endpoint.check()  # a 404 is a server that is there
    finally:
        await endpoint.aclose()
    [request] = upstream.requests
    assert (request.method, request.path, request.headers["authorization"]) == ("GET", "/v1/nowhere", "Bearer sk-k")
    default = HttpEndpoint(upstream.base_url, "/chat/completions")
    try:
        await default.check()
    finally:
        await default.aclose()
    assert upstream.requests[-1].path == "/v1/models"


async def test_check_of_an_unreachable_upstream() -> None:
    url = refused_url()
    endpoint = HttpEndpoint(url, "/chat/completions")
    try:
        error = await failure(endpoint.check())
    finally:
        await endpoint.aclose()
    assert (error.status, error.code) == (502, "upstream_unreachable")
    assert error.message == f"Cannot reach the upstream at {url}: no connection to {urlsplit(url).netloc} (Connection refused)."
    assert isinstance(error.__cause__, aiohttp.ClientConnectorError)


def test_retry_delays_double_up_to_the_bound() -> None:
    policy = RetryPolicy()
    assert [policy.delay(attempt) for attempt in range(5)] == [0.25, 0.5, 1.0, 2.0, 2.0]
    assert (policy.attempts, RetryPolicy(backoff_seconds=1.0, max_backoff_seconds=3.0).delay(1)) == (3, 2.0)


async def test_an_in_stream_error_body_is_data_like_any_other(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    """The endpoint parses what arrives; judging an error chunk is the wire's machine's job."""
    upstream.enqueue(StreamError(1))
    async with endpoint.stream(STREAMED, lambda data: orjson.loads(data)) as batches:
        chunks = [chunk async for batch in batches for chunk in batch]
    assert chunks[-1]["error"]["message"] == "scripted in-stream failure" and batches.ended_cleanly


async def test_a_message_names_the_proxy_the_upstream_is_reached_through() -> None:
    proxy_url = refused_url().removesuffix("/v1")
    endpoint = HttpEndpoint(
        "http://api.example.test/v1", "/chat/completions", proxy=Proxy(proxy_url), retry=RetryPolicy(attempts=1)
    )
    try:
        error = await failure(endpoint.post_for_json(BODY))
    finally:
        await endpoint.aclose()
    proxy_address = urlsplit(proxy_url).netloc
    assert error.message == (
        f"Cannot reach the upstream at http://api.example.test/v1 (through the proxy {proxy_url}): "
        f"no connection to the proxy at {proxy_address} (Connection refused)."
    )


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://nohost.invalid/v1", "its host nohost.invalid cannot be looked up ("),  # RFC 6761: never resolves
        ("http://[::1]:PORT/v1", "no connection to [::1]:PORT (Connection refused)."),
    ],
)
async def test_a_connection_that_cannot_be_opened_is_said_in_words(url: str, words: str) -> None:
    """Not aiohttp's (``Cannot connect to host ::1:9 ssl:default [Connect call failed ...]``):
    an IPv6 host bracketed, no ``ssl:default`` of a plain connection, the address said once."""
    if "PORT" in url:
        try:
            with socket.socket(socket.AF_INET6) as sock:
                sock.bind(("::1", 0))
                port = str(sock.getsockname()[1])
        except OSError:
            pytest.skip("no IPv6 loopback on this machine")
        url, words = url.replace("PORT", port), words.replace("PORT", port)
    endpoint = HttpEndpoint(url, "/chat/completions", retry=RetryPolicy(attempts=1))
    try:
        error = await failure(endpoint.post_for_json(BODY))
    finally:
        await endpoint.aclose()
    assert error.message.startswith(f"Cannot reach the upstream at {url}: {words}")
    assert "ssl:" not in error.message and "Connect call failed" not in error.message and "[Errno" not in error.message


@pytest.mark.parametrize(
    ("cause", "words"),
    [
        (OSError(1, "Operation not permitted"), "no connection to h.test:9 (Operation not permitted)"),  # a firewall's
        (OSError("Multiple exceptions: a, b"), "no connection to h.test:9 (Multiple exceptions: a, b)"),  # no errno
    ],
)
def test_a_connection_refused_for_another_reason_says_it(cause: OSError, words: str) -> None:
    key = ConnectionKey("h.test", 9, False, True, None, None, None)
    assert describe(aiohttp.ClientConnectorError(key, cause)) == words


def test_credentials_never_show_in_messages() -> None:
    endpoint = HttpEndpoint("http://user:secret@127.0.0.1:9/v1/", "/x")
    assert endpoint.display_url == "http://127.0.0.1:9/v1"
    assert HttpEndpoint("http://user:p@ss@127.0.0.1:9/v1/", "/x").display_url == "http://127.0.0.1:9/v1"
    assert without_credentials("http://127.0.0.1:9/v1") == "http://127.0.0.1:9/v1"
    assert without_credentials("http://host/path@with-at") == "http://host/path@with-at"  # no userinfo: left alone
    assert without_credentials("no scheme@host") == "no scheme@host"


def test_an_address_aiohttp_cannot_use_is_never_repeated_in_a_message() -> None:
    """Its ``InvalidURL`` says the URL whole, credentials and all; the endpoint refuses such an
    address when made, and should a parser still disagree, the message keeps to words."""
    refused = connect_error("http://h/v1", aiohttp.InvalidURL("http://user:secret@h:x/v1"))
    assert refused.message == "Cannot reach the upstream at http://h/v1: its address is not a URL that can be used."
