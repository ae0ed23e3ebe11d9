"""The HTTP kinds (``chat``, ``responses``, ``anthropic``) built through the registry, as
routing builds them, against their scripted servers: where each sends what, with which
key and settings, and how each one's answer comes back."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest

from tests.support.chat_upstream import ChatUpstream, HttpError, Stall, Text
from tests.support.messages_upstream import Answer, MessagesUpstream, Said
from tests.support.responses_upstream import ResponsesUpstream, Whole, answer, message
from tests.upstream.raw_upstream import raw_upstream
from toolwire.agent import ScriptedResponse, assistant_message
from toolwire.config import ServerConfig, UpstreamConfig
from toolwire.errors import UpstreamError, UpstreamProtocolError
from toolwire.protocol import PlainChunks, parse_request
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
    machine = call.translator()
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
    return call.translator().translate_whole(await backend.fetch(call.body))


def text_of(response: JSON) -> str:
    return "".join(part["text"] for item in response["output"] if item["type"] == "message" for part in item["content"])


async def test_an_open_stream_holds_nothing_of_the_request_it_sent(upstream: ChatUpstream) -> None:
    # Holding each open stream's request bytes (~130 kB with orjson's spare room) was most
    # of the gateway's memory under many open streams (bench: RSS with 500 open streams).
    upstream.enqueue(Text("a long answer, still streaming"))
    said = "x" * 600_000  # under aiohttp's 1 MiB warning for a raw body
    async with built("chat", upstream.base_url) as backend:
        request = parse_request(orjson.dumps({"model": "m", "input": said, "stream": True}))
        call = backend.prepare(request, upstream_model="up-model", response_id="resp_1", created_at=1)
        tracemalloc.start()
        try:
            opening = backend.stream(call.body)
            del call, request
            async with opening as batches:
                gc.collect()
                held = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, "*/toolwire/*")])
                assert sum(stat.size for stat in held.statistics("filename")) < len(said)
                read = [chunk async for batch in batches for chunk in batch]
        finally:
            tracemalloc.stop()
    assert batches.ended_cleanly and read
    assert upstream.requests[0].json["messages"] == [{"role": "user", "content": said}]  # it was sent whole


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


@pytest.fixture
def responses(responses_upstream: ResponsesUpstream) -> ResponsesUpstream:
    return responses_upstream


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


# ---------------------------------------------------------------- what every kind shares


HOSTED_TOOL = {"type": "web_search"}


@pytest.mark.parametrize("kind", ["chat", "responses", "anthropic"])
async def test_the_response_is_the_gateways_and_the_call_says_what_changed(
    kind: str, upstream: ChatUpstream, responses: ResponsesUpstream, messages_upstream: MessagesUpstream
) -> None:
    url = {"chat": upstream.base_url, "responses": responses.base_url, "anthropic": messages_upstream.base_url}[kind]
    upstream.enqueue(Text("hi"))
    responses.enqueue(answer([message("hi")]))
    messages_upstream.enqueue(Answer([Said("hi")]))
    request = parse_request(orjson.dumps({"model": "client-model", "input": "hi", "stream": True,
                                          "tools": [CUSTOM, HOSTED_TOOL]}))  # fmt: skip
    async with built(kind, url) as backend:
        assert backend.display_url == url.rstrip("/")  # type: ignore[attr-defined]
        call = backend.prepare(request, upstream_model="up-model", response_id="resp_77", created_at=1234)
        machine = call.translator()
        machine.start()
        async with backend.stream(call.body) as batches:
            async for batch in batches:
                for item in batch:
                    machine.feed(item)
        machine.finish(completed_at=2, ended_cleanly=True)
    response = machine.response
    assert (response["id"], response["model"]) == ("resp_77", "client-model")
    if kind != "responses":  # a Responses server's answer says when it was made
        assert response["created_at"] == 1234
    assert call.conversions[0].startswith(("custom tool apply_patch wrapped as ", "custom tools sent as functions"))
    assert call.warnings and all("web_search" in warning for warning in call.warnings)


def test_an_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(ValueError) as refused:
        backend_kind("grpc")
    assert str(refused.value) == "unknown kind 'grpc' (known: chat, responses, anthropic, mock)"


async def test_the_key_is_read_from_the_process_environment_only_when_named(upstream: ChatUpstream) -> None:
    import os

    upstream.enqueue(Text("ok"))
    upstream_config = UpstreamConfig(name="u", kind="chat", base_url=upstream.base_url)
    chat = backend_kind("chat").build(upstream_config, BackendSetup(ServerConfig(), os.environ))
    try:
        await fetched(chat, {"model": "m", "input": "hi"})
    finally:
        await chat.aclose()
    assert "authorization" not in upstream.requests[0].headers


async def test_the_upstream_timeout_comes_from_the_server_settings(upstream: ChatUpstream) -> None:
    upstream.enqueue(Stall(0, seconds=10))
    async with built("chat", upstream.base_url, server=ServerConfig(upstream_timeout=0.3, upstream_retries=1)) as chat:
        with pytest.raises(UpstreamError) as slow:
            await fetched(chat, {"model": "m", "input": "hi"})
    assert slow.value.message == f"The upstream at {upstream.base_url} sent no response within 0.3 s."


async def test_the_proxy_comes_from_the_environment_the_backend_is_built_with(upstream: ChatUpstream) -> None:
    from tests.support.forward_proxy import ForwardProxy

    upstream.enqueue(Text("proxied"))
    remote = f"http://upstream.invalid:{upstream.port}/v1"
    with ForwardProxy(upstream.port) as proxy:
        async with built("chat", remote, environ={"HTTP_PROXY": proxy.url, KEY_ENV: "sk-kinds"}) as chat:
            assert text_of(await fetched(chat, {"model": "m", "input": "hi"})) == "proxied"
    assert [r.url for r in proxy.requests] == [f"{remote}/chat/completions"]


async def test_a_preset_shapes_the_request(upstream: ChatUpstream, messages_upstream: MessagesUpstream) -> None:
    upstream.enqueue(Text("ok"))
    async with built("chat", upstream.base_url, preset="openai") as chat:
        await fetched(chat, {"model": "m", "input": "hi", "max_output_tokens": 100})
    assert upstream.chat_requests[0]["max_completion_tokens"] == 100 and "max_tokens" not in upstream.chat_requests[0]
    messages_upstream.enqueue(Answer([Said("ok")]))
    async with built("anthropic", messages_upstream.base_url, preset="kimi-anthropic") as kimi:
        await fetched(kimi, {"model": "m", "input": "hi"})
    assert messages_upstream.message_requests[0]["max_tokens"] == 32768


async def test_a_tool_call_comes_back_under_the_clients_name(messages_upstream: MessagesUpstream) -> None:
    from tests.support.messages_upstream import Use

    messages_upstream.enqueue(Answer([Use("collaboration__list_agents", {})]))
    agents = {"type": "namespace", "name": "collaboration", "description": "agents",
              "tools": [{"type": "function", "name": "list_agents", "parameters": {"type": "object"}}]}  # fmt: skip
    async with built("anthropic", messages_upstream.base_url, preset="anthropic") as backend:
        response = await streamed(backend, {"model": "m", "input": "who?", "tools": [agents]})
    [call] = response["output"]
    assert (call["type"], call["namespace"], call["name"]) == ("function_call", "collaboration", "list_agents")


async def test_anthropics_readiness_check_is_v1_models(upstream: ChatUpstream) -> None:
    root = upstream.base_url.removesuffix("/v1")
    async with built("anthropic", root, preset="anthropic") as backend:
        await backend.check()
    assert [(r.method, r.path) for r in upstream.requests] == [("GET", "/v1/models")]


@pytest.mark.parametrize("kind", ["responses", "anthropic"])
async def test_reading_stops_at_the_terminal_event_of_a_stream_held_open(
    kind: str, responses: ResponsesUpstream, messages_upstream: MessagesUpstream
) -> None:
    from tests.support.messages_upstream import Stall as MessagesStall

    responses.enqueue(ScriptedResponse([assistant_message("done")], stall_after=1000))
    messages_upstream.enqueue(MessagesStall(after_events=1000, seconds=30, reply=Answer([Said("done")])))
    url = responses.base_url if kind == "responses" else messages_upstream.base_url
    async with built(kind, url, server=ServerConfig(upstream_timeout=5)) as backend:
        response = await asyncio.wait_for(streamed(backend, {"model": "m", "input": "hi"}), 20)
    assert response["status"] == "completed" and text_of(response) == "done"


async def test_a_responses_stream_that_ends_before_its_first_event_fails_under_the_gateways_response() -> None:
    async with built("responses", "http://127.0.0.1:9/v1") as backend:
        request = parse_request(orjson.dumps({"model": "client-name", "input": "hi"}))
        call = backend.prepare(request, upstream_model="backend-name", response_id="resp_gw", created_at=1234)
    created, *_, failed = call.translator().finish(completed_at=1300, ended_cleanly=False)
    assert (created["type"], failed["type"]) == ("response.created", "response.failed")
    for event in (created, failed):
        response = event["response"]
        assert (response["id"], response["created_at"], response["model"]) == ("resp_gw", 1234, "client-name")


async def test_a_responses_event_without_a_type_is_refused() -> None:
    sse = b'data: {"response": {}}\n\n'
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(sse)
    async with raw_upstream([head + sse]) as url, built("responses", url, server=ServerConfig(upstream_retries=1)) as backend:
        with pytest.raises(UpstreamProtocolError) as refused:
            async with backend.stream({"model": "m", "input": "hi", "stream": True}) as batches:
                async for _ in batches:
                    pass
    assert refused.value.message == "Stream event is not a JSON object with a string 'type'."


async def test_anthropic_pings_are_keep_alives_bounded_by_the_event_timeout() -> None:
    """A Messages stream's ``ping`` events say nothing of the answer: they are not handed on
    (a read of nothing else is an empty batch, as a comment's is), and a stream of only
    pings ends after ``upstream_event_timeout``, not at the read timeout, not never."""
    ping = b'event: ping\ndata: {"type": "ping"}\n\n'
    start = b'event: message_start\ndata: {"type": "message_start", "message": {"id": "msg_1", "usage": {}}}\n\n'
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    pings = [piece for _ in range(30) for piece in (ping, 0.1)]
    server = ServerConfig(upstream_timeout=0.3, upstream_event_timeout=1.0, upstream_retries=1)
    read: list[list[Any]] = []
    async with raw_upstream([head, start, 0.1, *pings]) as url, built("anthropic", url, server=server) as backend:
        with pytest.raises(UpstreamError) as ended:
            async with backend.stream({"model": "m", "messages": [], "stream": True}) as batches:
                async for batch in batches:
                    read.append(batch)
    assert ended.value.message.startswith("The upstream stream brought no event for more than 1 s")
    assert [item["type"] for item in read[0]] == ["message_start"]
    assert len(read) >= 5 and not any(read[1:])


async def test_chat_reads_plain_text_chunks_from_their_bytes(upstream: ChatUpstream) -> None:
    """Once one text chunk has taught the stream's shape, the next ones come as ``PlainChunks``."""
    words = "one two three four five six seven eight"
    upstream.enqueue(Text(words))
    async with built("chat", upstream.base_url) as chat:
        call = chat.prepare(parse_request(b'{"model": "m", "input": "hi", "stream": true}'), upstream_model="up-model",
                            response_id="resp_1", created_at=1)  # fmt: skip
        async with chat.stream(call.body) as batches:
            items = [item async for batch in batches for item in batch]
    assert any(isinstance(item, PlainChunks) for item in items)
    texts = [item.text if isinstance(item, PlainChunks) else item["choices"][0]["delta"].get("content") or ""
             for item in items if isinstance(item, PlainChunks) or item.get("choices")]  # fmt: skip
    assert "".join(texts) == words
