"""``HttpResponsesClient`` against the scripted Responses server: where it sends, how long it
waits, how often it retries, which proxy it goes through, and what its errors say."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.support.forward_proxy import ForwardProxy
from tests.support.hanging import hanging_port
from tests.support.responses_upstream import HttpError, ResponsesUpstream
from toolwire.agent import HttpResponsesClient, ScriptedResponse, assistant_message
from toolwire.errors import UpstreamError
from toolwire.upstream import RetryPolicy

BODY = {"model": "m", "input": "hi", "stream": True}


async def read(client: HttpResponsesClient) -> bytes:
    async with client.stream(BODY) as chunks:
        return b"".join([chunk async for chunk in chunks])


async def test_it_posts_to_responses_under_the_base_url(server: ResponsesUpstream) -> None:
    server.enqueue(ScriptedResponse([assistant_message("hello")]))
    async with HttpResponsesClient(server.base_url + "/", api_key="sk-agent") as client:
        assert client.base_url == server.base_url
        received = await read(client)
    assert b'"text":"hello"' in received
    [request] = server.requests
    assert (request.path, request.headers["authorization"], request.json) == ("/v1/responses", "Bearer sk-agent", BODY)


async def test_an_error_status_names_the_endpoint_without_its_credentials(server: ResponsesUpstream) -> None:
    server.enqueue(HttpError(400, {"error": {"message": "bad input", "type": "invalid_request_error", "code": "bad"}}))
    with_credentials = server.base_url.replace("http://", "http://user:pw@")
    async with HttpResponsesClient(with_credentials) as client:
        with pytest.raises(UpstreamError) as failed:
            await read(client)
    error = failed.value
    assert error.message == f"{server.base_url}/responses answered 400: bad input"
    assert (error.status, error.upstream_status, error.code) == (400, 400, "bad")
    assert "pw" not in error.message


async def test_a_failure_without_an_answer_is_passed_on_as_it_is() -> None:
    async with HttpResponsesClient("http://127.0.0.1:1/v1", retry=RetryPolicy(attempts=1)) as client:
        with pytest.raises(UpstreamError) as failed:
            await read(client)
    assert failed.value.message.startswith("Cannot reach the upstream at http://127.0.0.1:1/v1: ")
    assert failed.value.upstream_status is None


async def test_retries_follow_the_policy_given(server: ResponsesUpstream) -> None:
    server.enqueue(*[HttpError(500, {"error": {"message": "down"}})] * 3)
    async with HttpResponsesClient(server.base_url, retry=RetryPolicy(attempts=1)) as client:
        with pytest.raises(UpstreamError, match="answered 500: down"):
            await read(client)
    assert len(server.requests) == 1
    server.reset()
    server.enqueue(HttpError(500, {"error": {"message": "down"}}), ScriptedResponse([assistant_message("up")]))
    async with HttpResponsesClient(server.base_url, retry=RetryPolicy(attempts=2, backoff_seconds=0.0)) as client:
        assert b'"text":"up"' in await read(client)


async def test_a_stream_that_stalls_past_the_read_timeout(server: ResponsesUpstream) -> None:
    server.enqueue(ScriptedResponse([assistant_message("...")], stall_after=2))
    async with HttpResponsesClient(server.base_url, read_timeout=0.3) as client:
        with pytest.raises(UpstreamError) as stalled:
            await read(client)
    assert stalled.value.message == "The upstream stream stalled for more than 0.3 s."


@pytest.fixture
def proxy(server: ResponsesUpstream) -> Iterator[ForwardProxy]:
    with ForwardProxy(server.port) as running:
        yield running


def remote(server: ResponsesUpstream) -> str:
    """The server under a name that resolves nowhere: reached only through the proxy."""
    return f"http://upstream.invalid:{server.port}/v1"


async def test_the_proxy_comes_from_the_environment_given(server: ResponsesUpstream, proxy: ForwardProxy) -> None:
    server.enqueue(ScriptedResponse([assistant_message("proxied")]))
    async with HttpResponsesClient(remote(server), environ={"HTTP_PROXY": proxy.url}) as client:
        assert b'"text":"proxied"' in await read(client)
    assert [r.url for r in proxy.requests] == [f"{remote(server)}/responses"]


async def test_the_proxy_comes_from_the_process_environment_by_default(
    server: ResponsesUpstream, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.delenv("http_proxy", raising=False)
    server.enqueue(ScriptedResponse([assistant_message("proxied")]))
    async with HttpResponsesClient(remote(server)) as client:
        assert b'"text":"proxied"' in await read(client)
    async with HttpResponsesClient(remote(server), environ={}, retry=RetryPolicy(attempts=1)) as client:
        with pytest.raises(UpstreamError, match="Cannot reach the upstream"):  # told: no proxy
            await read(client)
    assert len(proxy.requests) == 1


async def test_a_connect_that_hangs_gives_up_after_the_connect_timeout_given() -> None:
    """A listening socket that accepts nothing: once its queue is full, a new connection
    hangs in the handshake, as an unreachable host does. The endpoint's own default (10 s)
    would outlast the bound."""
    with hanging_port() as port:
        url = f"http://127.0.0.1:{port}/v1"
        async with HttpResponsesClient(url, connect_timeout=0.3, retry=RetryPolicy(attempts=1)) as client:
            with pytest.raises(UpstreamError) as failed:
                await asyncio.wait_for(read(client), 5)
    assert failed.value.message == f"Cannot reach the upstream at {url}: no connection within 0.3 s."
