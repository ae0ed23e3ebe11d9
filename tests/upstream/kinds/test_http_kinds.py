"""The HTTP kinds (``chat``, ``responses``, ``anthropic``) built through the registry, as
routing builds them, against their scripted servers: where each sends what, with which
key and settings, and how each one's answer comes back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest

from tests.support.chat_upstream import ChatUpstream, HttpError, Text
from tests.support.messages_upstream import Answer, MessagesUpstream, Said
from tests.support.responses_upstream import ResponsesUpstream, Whole, answer, message
from toolwire.config import ServerConfig, UpstreamConfig
from toolwire.errors import UpstreamError
from toolwire.protocol import parse_request
from toolwire.upstream import Backend, BackendSetup, UpstreamLimits, backend_kind

JSON = dict[str, Any]
KEY_ENV = "TW_KINDS_TEST_KEY"


@asynccontextmanager
async def built(
    kind: str, base_url: str, *, environ: Mapping[str, str] | None = None, server: ServerConfig | None = None,
    limits: UpstreamLimits | None = None, **settings: Any,
) -> AsyncIterator[Backend]:  # fmt: skip
    upstream = UpstreamConfig(name="u", kind=kind, base_url=base_url, api_key_env=KEY_ENV, **settings)
    setup = BackendSetup(server or ServerConfig(), environ if environ is not None else {KEY_ENV: "sk-kinds"})
    if limits is not None:
        setup = BackendSetup(setup.server, setup.environ, limits)
    backend = backend_kind(kind).build(upstream, setup)
    try:
        yield backend
    finally:
        await backend.aclose()


async def streamed(backend: Backend, body: JSON) -> JSON:
    """The final Response of ``body`` streamed through ``backend``."""
    call = backend.prepare(parse_request(orjson.dumps({**body, "stream": True})), upstream_model="up-model", response_id="resp_1", created_at=1)
    machine = call.machine
    machine.start()
    async with backend.stream(call.body) as batches:
        async for batch in batches:
            for item in batch:
                machine.feed(item)
        ended_cleanly = batches.ended_cleanly
    machine.finish(completed_at=2, ended_cleanly=ended_cleanly)
    return machine.response


async def fetched(backend: Backend, body: JSON) -> JSON:
    call = backend.prepare(parse_request(orjson.dumps(body)), upstream_model="up-model", response_id="resp_1", created_at=1)
    return call.machine.translate_whole(await backend.fetch(call.body))


def text_of(response: JSON) -> str:
    return "".join(part["text"] for item in response["output"] if item["type"] == "message" for part in item["content"])


# ---------------------------------------------------------------- chat


async def test_chat_sends_the_translated_request_with_the_key(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("streamed"), Text("whole"))
    async with built("chat", upstream.base_url, preset="deepseek") as chat:
        assert text_of(await streamed(chat, {"model": "m", "input": "hi"})) == "streamed"
        assert text_of(await fetched(chat, {"model": "m", "input": "hi"})) == "whole"
        await chat.check()
        assert chat.native_compaction is None
    first, second, check = upstream.requests
    assert (first.path, first.json["model"], first.json["stream"]) == ("/v1/chat/completions", "up-model", True)
    assert second.json.get("stream") in (None, False)
    assert {r.headers["authorization"] for r in (first, second, check)} == {"Bearer sk-kinds"}
    assert (check.method, check.path) == ("GET", "/v1/models")


async def test_chat_takes_retries_and_timeout_from_the_server_settings(upstream: ChatUpstream) -> None:
    upstream.enqueue(*[HttpError(500, {"error": {"message": "down"}})] * 3)
    async with built("chat", upstream.base_url, server=ServerConfig(upstream_retries=2, upstream_timeout=0.5)) as chat:
        with pytest.raises(UpstreamError, match="down"):
            await fetched(chat, {"model": "m", "input": "hi"})
    assert len(upstream.requests) == 2


async def test_chat_without_the_key_in_the_environment_sends_none(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("ok"))
    async with built("chat", upstream.base_url, environ={}) as chat:
        await fetched(chat, {"model": "m", "input": "hi"})
    assert "authorization" not in upstream.requests[0].headers


async def test_chat_reads_each_answer_within_the_limits_it_was_built_with(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("x" * 4000))
    async with built("chat", upstream.base_url, limits=UpstreamLimits(max_body_bytes=2048)) as chat:
        with pytest.raises(UpstreamError, match="upstream_max_body_bytes"):
            await fetched(chat, {"model": "m", "input": "hi"})


CALL_IN_TEXT = '<tool_call>\n{"name": "ls", "arguments": {"path": "."}}\n</tool_call>'
LS = {"type": "function", "name": "ls", "parameters": {"type": "object"}}


@pytest.mark.parametrize(("setting", "calls"), [("auto", ["ls"]), ("off", [])])
async def test_chat_recovers_calls_written_as_text_unless_told_not_to(
    upstream: ChatUpstream, setting: str, calls: list[str]
) -> None:
    upstream.enqueue(Text(CALL_IN_TEXT))
    async with built("chat", upstream.base_url, tool_call_text=setting) as chat:
        response = await fetched(chat, {"model": "m", "input": "list", "tools": [LS]})
    assert [item["name"] for item in response["output"] if item["type"] == "function_call"] == calls


# ---------------------------------------------------------------- responses


@pytest.fixture(scope="module")
def responses_server() -> Any:
    with ResponsesUpstream() as server:
        yield server


@pytest.fixture
def responses(responses_server: ResponsesUpstream) -> Any:
    responses_server.reset()
    yield responses_server
    responses_server.reset()


CUSTOM = {"type": "custom", "name": "apply_patch", "description": "edit"}


async def test_responses_passes_the_request_through_downgraded_without_the_previous_id(
    responses: ResponsesUpstream,
) -> None:
    responses.enqueue(answer([message("streamed")]), answer([message("whole")]))
    body = {"model": "m", "input": "hi", "tools": [CUSTOM], "previous_response_id": "resp_old"}
    async with built("responses", responses.base_url) as backend:
        assert text_of(await streamed(backend, body)) == "streamed"
        assert text_of(await fetched(backend, body)) == "whole"
        assert backend.native_compaction is None
    first, second = responses.bodies
    assert first["model"] == "up-model" and "previous_response_id" not in first and "previous_response_id" not in second
    assert first["tools"][0]["type"] == "function"  # no custom tools on this server: wrapped
    assert responses.requests[0].headers["authorization"] == "Bearer sk-kinds"


async def test_responses_with_custom_tools_sends_them_as_they_are(responses: ResponsesUpstream) -> None:
    responses.enqueue(answer([message("ok")]))
    async with built("responses", responses.base_url, supports_custom_tools=True) as backend:
        await streamed(backend, {"model": "m", "input": "hi", "tools": [CUSTOM]})
    assert responses.bodies[0]["tools"][0]["type"] == "custom"


async def test_responses_stops_reading_at_the_terminal_event(responses: ResponsesUpstream) -> None:
    events = answer([message("done")]).events
    tail = {"type": "response.output_text.delta", "sequence_number": 99, "item_id": "x", "output_index": 5,
            "content_index": 0, "delta": "never read"}  # fmt: skip
    from tests.support.responses_upstream import Events

    responses.enqueue(Events([*events, tail]))
    async with built("responses", responses.base_url) as backend:
        response = await streamed(backend, {"model": "m", "input": "hi"})
    assert response["status"] == "completed" and text_of(response) == "done"


async def test_responses_that_compacts_by_itself(responses: ResponsesUpstream) -> None:
    compacted = {"id": "cmp_1", "object": "response.compaction", "output": [], "created_at": 5}
    responses.enqueue(Whole(compacted))
    async with built("responses", responses.base_url, supports_compaction=True) as backend:
        native = backend.native_compaction
        assert native is not None
        sent = {"model": "up-model", "input": [], "instructions": "x", "stream": True, "store": False,
                "tools": [], "prompt_cache_key": "k", "temperature": 1}  # fmt: skip
        assert await native.compact(sent) == compacted
    [body] = responses.compact_bodies
    assert body == {"model": "up-model", "input": [], "instructions": "x", "tools": [], "prompt_cache_key": "k"}
    assert responses.requests[0].path == "/v1/responses/compact"


# ---------------------------------------------------------------- anthropic


@pytest.fixture
def messages(messages_upstream: MessagesUpstream) -> MessagesUpstream:
    return messages_upstream


async def test_anthropic_sends_the_key_and_version_to_v1_messages(messages: MessagesUpstream) -> None:
    messages.enqueue(Answer([Said("streamed")]), Answer([Said("whole")]))
    async with built("anthropic", messages.base_url.removesuffix("/v1"), preset="anthropic") as backend:
        assert text_of(await streamed(backend, {"model": "m", "input": "hi"})) == "streamed"
        assert text_of(await fetched(backend, {"model": "m", "input": "hi"})) == "whole"
        await backend.check()
    request = messages.requests[0]
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "sk-kinds" and "authorization" not in request.headers
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert messages.message_requests[0]["model"] == "up-model"
