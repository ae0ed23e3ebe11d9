"""One exchange through the pipeline over HTTP + SSE, the gateway served in this process
(tests/support/served.py) in front of the scripted Chat upstream: the answers, the
errors, the history, the log line, and a client that leaves."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from starlette.exceptions import HTTPException

from tests.store.redis_server import RedisServer
from tests.support.chat_upstream import (
    Call,
    ChatUpstream,
    Cut,
    HttpError,
    Raw,
    ReplyContext,
    Stall,
    StreamError,
    Text,
    ToolCalls,
    stream_payloads,
)
from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV
from tests.support.responses_upstream import ResponsesUpstream, answer, message
from tests.support.served import chat_config, gateway_app, gateway_client, serving, sse_events
from tests.support.waiting import until
from toolwire.config import GatewayConfig, ServerConfig, UpstreamConfig
from toolwire.server import GatewaySettings, build_router, create_app
from toolwire.server import _answer as answer_module
from toolwire.server import _pipeline as pipeline
from toolwire.server._app import allow_header
from toolwire.store import (
    MemoryResponseStore,
    SQLiteResponseStore,
    StoredResponse,
    StoreUnavailable,
    open_store,
    stored_items,
)
from toolwire.translate._conversation import ConversationWalker
from toolwire.upstream import _sse_batches

JSON = dict[str, Any]
CUSTOM_PATCH = {"type": "custom", "name": "apply_patch", "description": "edit files"}


@pytest.fixture(autouse=True)
def upstream_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UPSTREAM_KEY_ENV, UPSTREAM_KEY)


@pytest.fixture
def exchange_log(caplog: pytest.LogCaptureFixture) -> Iterator[list[JSON]]:
    """The exchange log's lines (``toolwire.exchange``), decoded, as they are written."""
    caplog.set_level(logging.INFO, logger="toolwire.exchange")

    class Lines(list[JSON]):
        """Read again at each look: iterated, or asked its length (``bool`` asks that)."""

        def _read(self) -> None:
            self[:] = [orjson.loads(r.getMessage()) for r in caplog.records if r.name == "toolwire.exchange"]

        def __iter__(self) -> Iterator[JSON]:
            self._read()
            return super().__iter__()

        def __len__(self) -> int:
            self._read()
            return super().__len__()

    yield Lines()


def only(lines: list[JSON]) -> JSON:
    [line] = list(lines)
    return line


async def test_a_whole_answer(upstream: ChatUpstream, exchange_log: list[JSON]) -> None:
    upstream.enqueue(Text("Hello there."))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        asked_at = int(time.time())
        response = await client.post("/v1/responses", json={"model": "qwen3", "input": "Say hello", "instructions": "Be brief."})
        answered_at = int(time.time())
    assert response.status_code == 200, response.text
    assert asked_at <= response.json()["created_at"] <= answered_at  # when the gateway received it
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["content-length"]) == len(response.content)
    assert "transfer-encoding" not in response.headers, "a whole answer says its length, and is not chunked"
    body = response.json()
    assert re.fullmatch(r"resp_[0-9a-f]{32}", body["id"])
    assert (body["object"], body["status"], body["model"]) == ("response", "completed", "qwen3")
    assert body["output"][0]["content"][0]["text"] == "Hello there."
    [sent] = upstream.requests
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert sent.json["messages"][0] == {"role": "system", "content": "Be brief."}
    line = only(exchange_log)
    assert (line["request_id"], line["model"], line["upstream"], line["upstream_model"]) == (body["id"], "qwen3", "local", "qwen3")
    assert (line["stream"], line["status"], line["outcome"]) == (False, 200, "completed")
    assert line["input_tokens"] == body["usage"]["input_tokens"] and line["ttft_ms"] >= 0


async def test_a_streamed_answer_is_framed_as_sse(upstream: ChatUpstream, exchange_log: list[JSON]) -> None:
    upstream.enqueue(ToolCalls([Call("apply_patch", '{"input": "*** Begin Patch\\n*** End Patch\\n"}')], text="Patching."))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        response = await client.post("/v1/responses", json={"model": "m", "input": "go", "stream": True, "tools": [CUSTOM_PATCH]})
    assert response.status_code == 200
    assert (response.headers["content-type"], response.headers["cache-control"], response.headers["x-accel-buffering"]) == (
        "text/event-stream; charset=utf-8", "no-cache", "no",
    )  # fmt: skip
    assert "content-length" not in response.headers
    assert response.content.startswith(b"event: response.created\ndata: {")
    events = sse_events(response.content)
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert events[-1]["type"] == "response.completed"
    call = events[-1]["response"]["output"][-1]
    assert (call["type"], call["name"], call["input"]) == ("custom_tool_call", "apply_patch", "*** Begin Patch\n*** End Patch\n")
    line = only(exchange_log)
    assert (line["stream"], line["outcome"]) == (True, "completed")
    assert line["tool_calls"] == [{"name": "apply_patch", "namespace": None, "type": "custom_tool_call"}]
    assert "custom apply_patch restored" in line["conversions"]


def pinging_then(reply: Text, *, pings: int, every: float) -> Raw:
    """A model server that reads a long prompt, pinging (``: ping`` comments), then answers."""
    return Raw([*(piece for _ in range(pings) for piece in (b": ping\n\n", every)), *answer_frames(reply)])


def answer_frames(reply: Text) -> list[bytes]:
    frames = [b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in stream_payloads(reply, ReplyContext())]
    return [*frames, b"data: [DONE]\n\n"]


@pytest.mark.parametrize("waiting", ["pinging", "silent"])
async def test_while_the_upstream_says_nothing_of_its_answer_the_client_hears_it_is_in_progress(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch, waiting: str
) -> None:
    """Codex's idle timer counts events, not SSE comments: while the upstream only pings, or
    says nothing at all, the client is told ``response.in_progress`` (at most every
    ``KEEP_ALIVE_EVERY``), as each ping comes or each ``QUIET_EVERY`` of silence passes,
    within the stream's numbering. Pings keep the stream past the read timeout (the
    keep-alive bound is the longer one)."""
    monkeypatch.setattr(answer_module, "KEEP_ALIVE_EVERY", 0.2)
    monkeypatch.setattr(_sse_batches, "QUIET_EVERY", 0.3)
    if waiting == "pinging":
        upstream.enqueue(pinging_then(Text("Hi there."), pings=5, every=0.3))
    else:
        upstream.enqueue(Raw([1.5, *answer_frames(Text("Hi there."))]))
    arrived: list[tuple[float, JSON]] = []
    timeout = 0.5 if waiting == "pinging" else 5.0
    async with gateway_client(chat_config(upstream.base_url, upstream_timeout=timeout)) as client:
        started = time.monotonic()
        async with client.stream("POST", "/v1/responses", json={"model": "m", "input": "go", "stream": True}) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    arrived.append((time.monotonic() - started, orjson.loads(line[6:])))
    events = [event for _, event in arrived]
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    kinds = [event["type"] for event in events]
    first_item = kinds.index("response.output_item.added")
    assert kinds[:2] == ["response.created", "response.in_progress"]
    beats = kinds[2:first_item]
    assert 2 <= len(beats) <= 5 and set(beats) == {"response.in_progress"}, kinds
    created = events[0]["response"]
    for beat in events[2:first_item]:
        assert beat["response"] == {**created, "output": [], "status": "in_progress"}
    # each told as it came, long before the answer (1.5 s on)
    assert arrived[first_item][0] - arrived[2][0] >= 0.5
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "Hi there."


async def test_the_sdk_in_strict_mode_takes_a_stream_told_alive(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    """The openai SDK's stream helper checks each lifecycle event's identity and output:
    repeated ``response.in_progress`` events, output empty, pass it."""
    monkeypatch.setattr(answer_module, "KEEP_ALIVE_EVERY", 0.0)
    upstream.enqueue(pinging_then(Text("Still here."), pings=3, every=0.2))
    async with serving(gateway_app(chat_config(upstream.base_url))) as url:
        sdk = openai.AsyncOpenAI(base_url=url + "/v1", api_key="test", _strict_response_validation=True, max_retries=0)
        async with sdk.responses.stream(model="m", input="go") as stream:
            kinds = [event.type async for event in stream]
            final = await stream.get_final_response()
        await sdk.close()
    assert kinds.count("response.in_progress") >= 3
    assert final.output_text == "Still here." and final.status == "completed"


async def test_configured_models_and_the_default_upstream(upstream: ChatUpstream) -> None:
    models = [{"name": "fast", "upstream": "local", "upstream_model": "qwen3:8b"}, {"name": "same", "upstream": "local"}]
    upstream.enqueue(Text("a"), Text("b"), Text("c"))
    async with gateway_client(chat_config(upstream.base_url, models=models), model_override="forced") as client:
        for model in ("fast", "same", "anything"):
            assert (await client.post("/v1/responses", json={"model": model, "input": "hi"})).status_code == 200
    assert [request["model"] for request in upstream.chat_requests] == ["qwen3:8b", "same", "forced"]


async def test_an_unknown_model_without_a_default_upstream(upstream: ChatUpstream) -> None:
    config = chat_config(upstream.base_url, models=[{"name": "b", "upstream": "local"}, {"name": "a", "upstream": "local"}])
    config = config.model_copy(update={"upstreams": [config.upstreams[0].model_copy(update={"default": False})]})
    async with gateway_client(config) as client:
        response = await client.post("/v1/responses", json={"model": "gpt-9", "input": "hi"})
    assert response.status_code == 404
    assert response.json() == {
        "error": {
            "message": "The model 'gpt-9' does not exist on this gateway. Known models: b, a.",
            "type": "not_found_error",
            "param": "model",
            "code": "model_not_found",
        }
    }
    assert upstream.requests == []


async def test_an_upstream_error_keeps_its_status_and_retry_after_and_hides_the_key(upstream: ChatUpstream) -> None:
    echoed = f"Invalid key {UPSTREAM_KEY} for this model"
    upstream.enqueue(HttpError(429, {"error": {"message": echoed, "type": "rate_limit"}}, {"Retry-After": "7"}))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        response = await client.post("/v1/responses", json={"model": "m", "input": "hi", "stream": True})
    assert (response.status_code, response.headers["retry-after"]) == (429, "7")
    assert response.json()["error"] == {
        "message": "Invalid key [redacted] for this model", "type": "rate_limit", "param": None, "code": None,
    }  # fmt: skip


async def test_a_stream_cut_by_the_upstream_ends_in_one_failure(upstream: ChatUpstream, exchange_log: list[JSON]) -> None:
    upstream.enqueue(Cut(after_chunks=3))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        response = await client.post("/v1/responses", json={"model": "m", "input": "hi", "stream": True})
    events = sse_events(response.content)
    assert [e["type"] for e in events if e["type"] in ("response.completed", "response.failed")] == ["response.failed"]
    assert events[-1]["response"]["error"] == {
        "code": "server_error", "message": "The upstream closed the connection before the stream was complete.",
    }  # fmt: skip
    line = only(exchange_log)
    assert (line["outcome"], line["error"], line["error_kind"]) == (
        "failed", "The upstream closed the connection before the stream was complete.", "server_error",
    )  # fmt: skip


EXEC_TOOL = {"type": "custom", "name": "exec", "description": "Run JavaScript.", "format": {"type": "text"}}


async def test_a_streamed_request_answered_whole_is_streamed_with_its_calls_restored(
    upstream: ChatUpstream, exchange_log: list[JSON]
) -> None:
    """A Chat server that ignores ``stream`` and answers with a whole completion: the client
    still gets its stream, the call to its custom tool restored as a ``custom_tool_call``,
    and the log says the answer came whole."""
    call = {"id": "call_1", "type": "function", "function": {"name": "exec", "arguments": '{"input": "1 + 1"}'}}
    completion = {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Let me run it.", "tool_calls": [call]},
                     "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
    }  # fmt: skip
    whole = orjson.dumps(completion)
    upstream.enqueue(Raw([b"\n" + whole[:9], whole[9:]], content_type="application/json"))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        body = {"model": "m", "input": "1 + 1?", "tools": [EXEC_TOOL], "stream": True}
        response = await client.post("/v1/responses", json=body)
    events = sse_events(response.content)
    assert events[-1]["type"] == "response.completed", events[-1]
    output = events[-1]["response"]["output"]
    assert [item["type"] for item in output] == ["message", "custom_tool_call"]
    assert (output[1]["name"], output[1]["input"], output[1]["call_id"]) == ("exec", "1 + 1", "call_1")
    assert events[-1]["response"]["usage"]["total_tokens"] == 12
    assert "streamed request answered whole, sent as a stream" in only(exchange_log)["conversions"]


async def test_a_streamed_request_answered_with_a_whole_error_fails_with_the_upstream_s_message(
    upstream: ChatUpstream, exchange_log: list[JSON]
) -> None:
    error = orjson.dumps({"error": {"message": "model 'm' is not loaded", "type": "invalid_request_error"}})
    upstream.enqueue(Raw([error], content_type="application/json"))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        response = await client.post("/v1/responses", json={"model": "m", "input": "hi", "stream": True})
    events = sse_events(response.content)
    assert events[-1]["type"] == "response.failed"
    assert "model 'm' is not loaded" in events[-1]["response"]["error"]["message"]
    assert only(exchange_log)["outcome"] == "failed"


async def test_what_the_upstream_could_not_be_sent_is_logged_as_a_warning(
    upstream: ChatUpstream, exchange_log: list[JSON]
) -> None:
    upstream.enqueue(Text("no search here"))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        response = await client.post("/v1/responses", json={"model": "m", "input": "hi", "tools": [{"type": "web_search"}]})
    assert response.status_code == 200, response.text
    [warning] = only(exchange_log)["warnings"]
    assert "web_search" in warning
    assert "tools" not in upstream.chat_requests[0]


async def test_what_the_answer_s_translation_repaired_is_logged_for_a_whole_answer_too(
    upstream: ChatUpstream, exchange_log: list[JSON]
) -> None:
    upstream.enqueue(Text("<think>Short question.</think>Hello."))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        response = await client.post("/v1/responses", json={"model": "m", "input": "hi"})
    assert [item["type"] for item in response.json()["output"]] == ["reasoning", "message"]
    assert "think tags split into reasoning" in only(exchange_log)["conversions"]


async def test_malformed_requests(upstream: ChatUpstream) -> None:
    async with gateway_client(chat_config(upstream.base_url)) as client:
        not_json = await client.post("/v1/responses", content=b"{nope")
        no_model = await client.post("/v1/responses", json={"input": "hi"})
        clash = [CUSTOM_PATCH, {"type": "function", "name": "apply_patch", "parameters": {"type": "object"}}]
        bad_tools = await client.post("/v1/responses", json={"model": "m", "input": "hi", "tools": clash})
    assert not_json.status_code == 400 and "not valid JSON" in not_json.json()["error"]["message"]
    assert not_json.headers["content-type"] == "application/json"  # what the SDK reads an error from
    assert (no_model.status_code, no_model.json()["error"]["param"]) == (400, "model")
    assert (bad_tools.status_code, bad_tools.json()["error"]) == (400, {
        "message": "Two different tools are named apply_patch: at tools[0] and at tools[1].",
        "type": "invalid_request_error", "param": "tools", "code": "invalid_request",
    })  # fmt: skip
    assert upstream.requests == []


@pytest.mark.parametrize("stream", [False, True])
async def test_a_stored_response_is_continued(upstream: ChatUpstream, stream: bool) -> None:
    upstream.enqueue(Text("Paris."), Text("About two million."))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        first = await client.post("/v1/responses", json={"model": "m", "input": "Capital of France?", "stream": stream})
        first_id = (sse_events(first.content)[-1]["response"] if stream else first.json())["id"]
        second = await client.post(
            "/v1/responses", json={"model": "m", "input": "How many people?", "previous_response_id": first_id}
        )
        assert second.json()["previous_response_id"] == first_id
        stored = await client.get(f"/v1/responses/{first_id}")
    assert stored.status_code == 200 and stored.json()["output"][0]["content"][0]["text"] == "Paris."
    assert [(m["role"], m["content"]) for m in upstream.chat_requests[1]["messages"]] == [
        ("user", "Capital of France?"), ("assistant", "Paris."), ("user", "How many people?"),
    ]  # fmt: skip


def stored_conversations(metrics: str) -> dict[str, float]:
    """A gateway's ``toolwire_stored_conversations_*`` figures, from its ``/metrics``."""
    return {
        match[1]: float(match[2])
        for match in re.finditer(r"^toolwire_stored_conversations_(\w+) (\S+)$", metrics, re.M)
    }


CONVERSATION_TOOLS = [
    {"type": "function", "name": "lookup", "description": "look up", "parameters": {"type": "object"}}, CUSTOM_PATCH,
]


async def converse(
    upstream: ChatUpstream,
    answering: Callable[[int], httpx.AsyncClient],
    readers: list[httpx.AsyncClient],
    *,
    turns: int = 5,
) -> None:
    """A conversation of text, a function call, a custom tool call and their outputs,
    continued by ``previous_response_id`` for ``turns`` turns (at most 6): each turn goes to
    ``answering(turn)``, whose answer the next turn continues, and then to each of
    ``readers``; the upstream must be sent the same Chat request by all of them."""
    inputs: list[Any] = [
        "Find the capital.",
        [{"type": "function_call_output", "call_id": "call_lookup", "output": "Paris"}],
        [{"role": "user", "content": [{"type": "input_text", "text": "And patch the notes."}]}],
        [{"type": "custom_tool_call_output", "call_id": "call_patch", "output": "done"}],
        "Thanks.",
        "Bye.",
    ]
    replies = [
        ToolCalls([Call("lookup", '{"q": "capital"}', id="call_lookup")], text="Looking."),
        Text("Paris."),
        ToolCalls([Call("apply_patch", '{"input": "*** Begin Patch\\n*** End Patch\\n"}', id="call_patch")]),
        Text("Patched."),
        Text("You are welcome."),
        Text("Goodbye."),
    ]
    previous: str | None = None
    for turn, (turn_input, reply) in enumerate(zip(inputs[:turns], replies, strict=False)):
        body = {"model": "m", "input": turn_input, "tools": CONVERSATION_TOOLS, "instructions": "Be brief.",
                "stream": True}  # fmt: skip
        if previous is not None:
            body["previous_response_id"] = previous
        clients = [answering(turn), *readers]
        upstream.enqueue(*[reply] * len(clients))
        answers = []
        for client in clients:
            response = await client.post("/v1/responses", json=body)
            assert response.status_code == 200, response.text
            answers.append(sse_events(response.content)[-1]["response"])
        assert {answer["status"] for answer in answers} == {"completed"}, turn
        sent = upstream.chat_requests[-len(clients) :]
        assert all(other == sent[0] for other in sent[1:]), turn
        previous = answers[0]["id"]  # the answering gateway's own: the readers read it from the store


async def test_a_conversation_continued_turn_by_turn_goes_upstream_as_read_from_the_store(
    upstream: ChatUpstream, tmp_path: Any
) -> None:
    # One gateway continues its own responses (kept parsed, with their translation); a
    # second, sharing the store, reads the same conversation from it: the upstream must
    # be sent the same messages by both, turn after turn.
    config = chat_config(upstream.base_url, store=f"sqlite:///{tmp_path}/responses.db")
    async with gateway_client(config) as first, gateway_client(config) as second:
        await converse(upstream, lambda turn: first, [second])
        kept = [stored_conversations((await client.get("/metrics")).text) for client in (first, second)]
    assert kept[0]["continued_total"] == 4 and kept[0]["read_total"] == 0
    assert kept[1]["continued_total"] == 0 and kept[1]["read_total"] == 4
    assert kept[0]["entries"] == 1 and kept[0]["bytes"] > 0  # one conversation, whatever its length
    assert kept[1]["entries"] == 5  # each of its answers continues the first gateway's response, not its own
    sent = upstream.chat_requests[-1]["messages"]
    assert [(m["role"], m.get("content")) for m in sent] == [
        ("system", "Be brief."), ("user", "Find the capital."), ("assistant", "Looking."), ("tool", "Paris"),
        ("assistant", "Paris."), ("user", "And patch the notes."), ("assistant", ""), ("tool", "done"),
        ("assistant", "Patched."), ("user", "Thanks."),
    ]  # fmt: skip


async def test_gateways_taking_turns_at_a_conversation_catch_up_on_the_turns_they_did_not_answer(
    upstream: ChatUpstream, tmp_path: Any
) -> None:
    # Three gateways behind one load balancer, sharing the store, answer a conversation's
    # turns in turn: each holds it as it was two responses before, reads only those two,
    # and sends the upstream what a gateway reading the whole chain (the fourth) sends.
    config = chat_config(upstream.base_url, store=f"sqlite:///{tmp_path}/responses.db")
    async with contextlib.AsyncExitStack() as stack:
        gateways = [await stack.enter_async_context(gateway_client(config)) for _ in range(4)]
        await converse(upstream, lambda turn: gateways[turn % 3], [gateways[3]], turns=6)
        kept = [stored_conversations((await client.get("/metrics")).text) for client in gateways]
    assert [(k["continued_total"], k["caught_up_total"], k["read_total"]) for k in kept] == [
        (0, 1, 0),  # turn 4 caught up on the responses to turns 2 and 3
        (0, 1, 1),  # turn 2 read the first response (nothing kept yet); turn 5 caught up
        (0, 1, 1),  # turn 3 read; turn 6 caught up
        (0, 0, 5),  # its answers are branches of their own: each turn reads the whole chain
    ]
    assert [k["entries"] for k in kept[:3]] == [1, 1, 1]  # one conversation each, caught up or not
    sent = upstream.chat_requests[-1]["messages"]
    assert [(m["role"], m.get("content")) for m in sent][-4:] == [
        ("assistant", "Patched."), ("user", "Thanks."), ("assistant", "You are welcome."), ("user", "Bye."),
    ]  # fmt: skip


async def test_a_conversation_continued_on_a_responses_backend_sends_its_items_with_the_ids_the_store_lists(
    responses_upstream: ResponsesUpstream, tmp_path: Any
) -> None:
    # A Responses backend is sent the items themselves, ids and all, and an item that came
    # without an id is given the one its response's input_items lists. One gateway
    # continues its own kept conversation, a second reads it from the store they share:
    # turn after turn both send the same history, each request's own items with the ids
    # of its own response.
    upstream = UpstreamConfig(
        name="full", kind="responses", base_url=responses_upstream.base_url, api_key_env=UPSTREAM_KEY_ENV, default=True
    )
    config = GatewayConfig.model_validate({
        "server": ServerConfig(store=f"sqlite:///{tmp_path}/responses.db").model_dump(),
        "upstreams": [upstream.model_dump()],
    })  # fmt: skip
    turns = ["Find the capital.", [{"role": "user", "content": "And its size?"}], "Thanks."]
    async with gateway_client(config) as first, gateway_client(config) as second:
        previous: str | None = None
        for turn, turn_input in enumerate(turns):
            body: JSON = {"model": "m", "input": turn_input, "stream": True}
            if previous is not None:
                body["previous_response_id"] = previous
            for client in (first, second):
                responses_upstream.enqueue(answer([message(f"Reply {turn}.", item_id=f"msg_up_{turn}")]))
                response = await client.post("/v1/responses", json=body)
                assert response.status_code == 200, response.text
                answered = sse_events(response.content)[-1]["response"]
                sent = responses_upstream.bodies[-1]["input"]
                if turn:
                    listed = (await client.get(f"/v1/responses/{answered['id']}/input_items")).json()["data"]
                    assert [item["id"] for item in listed] == [sent[-1]["id"]], turn
                    assert sent[-1]["id"] != sent[-3]["id"]
                before = sent[:-1] if turn else sent  # (the first turn goes as sent: a string)
                if client is first:
                    previous, history = answered["id"], before
                else:
                    assert before == history, turn
    assert [(item["role"], item["content"][0]["text"]) for item in sent] == [
        ("user", "Find the capital."), ("assistant", "Reply 0."), ("user", "And its size?"),
        ("assistant", "Reply 1."), ("user", "Thanks."),
    ]  # fmt: skip


async def test_a_conversation_continued_turn_by_turn_translates_only_what_each_turn_adds(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kept conversation carries what the last turn's translation derived from its
    # items: each turn walks only the last answer and its own input. (The second turn
    # walks the first whole: a first turn's own items were not sent in the form its record
    # keeps them.)
    walked: list[tuple[int, int]] = []
    walk = ConversationWalker.walk

    def counted(walker: ConversationWalker[Any, Any, Any]) -> None:
        start = walker._walked
        walk(walker)
        walked.append((start, walker._walked))

    monkeypatch.setattr(ConversationWalker, "walk", counted)
    async with gateway_client(chat_config(upstream.base_url)) as client:
        previous: str | None = None
        for turn in range(5):
            upstream.enqueue(Text(f"Reply {turn}."))
            body: JSON = {"model": "m", "input": f"Turn {turn}.", "stream": True}
            if previous is not None:
                body["previous_response_id"] = previous
            response = await client.post("/v1/responses", json=body)
            previous = sse_events(response.content)[-1]["response"]["id"]
    assert walked == [(0, 1), (0, 3), (3, 5), (5, 7), (7, 9)]
    assert len(upstream.chat_requests[-1]["messages"]) == 9


async def test_a_client_resending_its_history_has_each_response_stored_but_no_conversation_parsed_again(
    upstream: ChatUpstream,
) -> None:
    # A client that continues by resending its whole history, with store left true: every
    # response is stored as the API stores it, but the conversation it makes is not parsed
    # again from its record (a cost as long as the history, every turn). Continued by id
    # after all, it is read from the store, and goes upstream as the resent history did.
    items: list[JSON] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "One."}]}]
    headers = {"content-type": "application/json"}
    async with gateway_client(chat_config(upstream.base_url)) as client:
        kept = []
        for turn in range(3):
            upstream.enqueue(Text(f"Reply {turn}."))
            body = orjson.dumps({"model": "m", "input": items, "tools": CONVERSATION_TOOLS})  # as orjson writes it
            answered = (await client.post("/v1/responses", content=body, headers=headers)).json()
            kept.append(stored_conversations((await client.get("/metrics")).text)["entries"])
            listed = (await client.get(f"/v1/responses/{answered['id']}/input_items")).json()["data"]
            assert len(listed) == len(items)
            resent = upstream.chat_requests[-1]["messages"]
            items = [*items, *answered["output"], {"role": "user", "content": f"Turn {turn + 2}."}]
        upstream.enqueue(Text("By id."))
        body = orjson.dumps({"model": "m", "input": "Last.", "previous_response_id": answered["id"],
                             "tools": CONVERSATION_TOOLS})  # fmt: skip
        assert (await client.post("/v1/responses", content=body, headers=headers)).status_code == 200
        counts = stored_conversations((await client.get("/metrics")).text)
    assert kept == [1, 1, 1]  # the first turn's, which resent nothing
    assert (counts["read_total"], counts["continued_total"]) == (1, 0)
    assert upstream.chat_requests[-1]["messages"] == [
        *resent, {"role": "assistant", "content": "Reply 2."}, {"role": "user", "content": "Last."}
    ]


async def resend_session(
    client: httpx.AsyncClient,
    upstream: ChatUpstream,
    turns: int,
    *,
    key: str | None = None,
    start: list[JSON] | None = None,
) -> list[tuple[dict[str, Any], list[JSON]]]:
    """``turns`` requests of a client that resends its whole history with ``store`` left
    true, the first sending ``start``: each response, with the input its request sent."""
    headers = {"content-type": "application/json", **({"authorization": f"Bearer {key}"} if key else {})}
    first: JSON = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "One."}]}
    items: list[JSON] = start or [first]
    sent = []
    for turn in range(turns):
        upstream.enqueue(Text(f"Reply {turn}."))
        body = orjson.dumps({"model": "m", "input": items, "tools": CONVERSATION_TOOLS})  # as orjson writes it
        answered = (await client.post("/v1/responses", content=body, headers=headers)).json()
        sent.append((answered, items))
        items = [*items, *answered["output"], {"role": "user", "content": f"Turn {turn + 2}."}]
    return sent


def without_ids(items: list[JSON]) -> list[JSON]:
    """Items as sent and as listed compare alike: in full form, without the ids a record gives."""
    return [{k: v for k, v in item.items() if k != "id"} for item in stored_items(items, "resp_x")]


async def listed_input(client: httpx.AsyncClient, response_id: str, key: str | None = None) -> list[JSON]:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    page = await client.get(f"/v1/responses/{response_id}/input_items", params={"order": "asc", "limit": 100}, headers=headers)
    assert page.status_code == 200, page.text
    data: list[JSON] = page.json()["data"]
    # Its last item, the turn's own prompt, has the id storing the whole input gives it there.
    assert data[-1]["id"] == stored_items([{**item, "id": None} for item in data], response_id)[-1]["id"]
    return data


async def test_a_resending_clients_records_hold_only_what_each_turn_added(upstream: ChatUpstream, tmp_path: Path) -> None:
    # Each record builds on the one before (``input_base``): it holds the previous answer as
    # the client resent it and the new prompt, not the whole history again, and every
    # listing is the whole input all the same, before and after one of them is deleted.
    path = tmp_path / "responses.sqlite3"
    async with gateway_client(chat_config(upstream.base_url, store=f"sqlite://{path}")) as client:
        sent = await resend_session(client, upstream, 5)
        for answered, items in sent:
            assert without_ids(await listed_input(client, answered["id"])) == without_ids(items)
        assert (await client.delete(f"/v1/responses/{sent[2][0]['id']}")).status_code == 200
        assert without_ids(await listed_input(client, sent[4][0]["id"])) == without_ids(sent[4][1])
        assert without_ids(await listed_input(client, sent[3][0]["id"])) == without_ids(sent[3][1])
    records = await stored_records(path, sent)
    assert records[2] is None
    assert [(r.input_base, len(r.input_items)) if r else None for r in records] == [
        (None, 1), (sent[0][0]["id"], 2), None, (sent[1][0]["id"], 4), (sent[3][0]["id"], 2)
    ]  # the fourth took the deleted third's two items


async def stored_records(path: Path, sent: list[tuple[dict[str, Any], list[JSON]]]) -> list[StoredResponse | None]:
    """The records of ``sent``'s responses, read from the SQLite file at ``path``."""
    store = SQLiteResponseStore(path, ttl_seconds=None, max_entries=None)
    try:
        return [await store.get(answered["id"]) for answered, _ in sent]
    finally:
        await store.aclose()


async def test_an_input_spread_over_the_most_records_allowed_is_stored_whole_again(
    upstream: ChatUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline, "MAX_INPUT_BASES", 3)  # (256: a listing walks at most that many records)
    path = tmp_path / "responses.sqlite3"
    async with gateway_client(chat_config(upstream.base_url, store=f"sqlite://{path}")) as client:
        sent = await resend_session(client, upstream, 6)
        assert without_ids(await listed_input(client, sent[5][0]["id"])) == without_ids(sent[5][1])
    ids = [answered["id"] for answered, _ in sent]
    bases = [r.input_base if r else "gone" for r in await stored_records(path, sent)]
    assert bases == [None, ids[0], ids[1], None, ids[3], ids[4]]


async def test_a_record_never_builds_on_another_keys(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TW_PIPELINE_TEST_KEYS", "key-a, key-b")
    path = tmp_path / "responses.sqlite3"
    config = chat_config(upstream.base_url, api_key_env="TW_PIPELINE_TEST_KEYS", store=f"sqlite://{path}")
    async with gateway_client(config) as client:
        mine = await resend_session(client, upstream, 2, key="key-a")
        # key-a's last body from another key: a history the gateway knows, stored as the
        # input of key-a's last response, which is not key-b's to build on.
        theirs = await resend_session(client, upstream, 3, key="key-b", start=mine[1][1])
        for answered, items in theirs:
            assert without_ids(await listed_input(client, answered["id"], "key-b")) == without_ids(items)
        assert (await client.get(f"/v1/responses/{mine[1][0]['id']}", headers={"authorization": "Bearer key-b"})).status_code == 404
    bases = [[r.input_base if r else "gone" for r in await stored_records(path, s)] for s in (mine, theirs)]
    assert bases == [[None, mine[0][0]["id"]], [None, theirs[0][0]["id"], theirs[1][0]["id"]]]


async def test_a_turn_whose_record_to_build_on_was_deleted_is_stored_whole(upstream: ChatUpstream, tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite3"
    async with gateway_client(chat_config(upstream.base_url, store=f"sqlite://{path}")) as client:
        first = await resend_session(client, upstream, 2)
        assert (await client.delete(f"/v1/responses/{first[1][0]['id']}")).status_code == 200
        (answered, items) = first[1]
        then = await resend_session(client, upstream, 2, start=[*items, *answered["output"], {"role": "user", "content": "Turn 3."}])
        for answered, items in then:
            assert without_ids(await listed_input(client, answered["id"])) == without_ids(items)
    records = await stored_records(path, then)
    assert [r.input_base if r else "gone" for r in records] == [None, then[0][0]["id"]]
    assert records[0] is not None and len(records[0].input_items) == 5  # whole


async def test_store_false_keeps_nothing_and_an_unknown_previous_id_is_404(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("not kept"))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        first = (await client.post("/v1/responses", json={"model": "m", "input": "hi", "store": False})).json()
        unknown = await client.get(f"/v1/responses/{first['id']}")
        assert (unknown.status_code, unknown.json()["error"]["message"]) == (404, f"Response with id '{first['id']}' not found.")
        assert unknown.headers["content-type"] == "application/json"
        assert (await client.put(f"/v1/responses/{first['id']}")).status_code == 405
        missing = await client.post("/v1/responses", json={"model": "m", "input": "hi", "previous_response_id": first["id"]})
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == f"Previous response with id '{first['id']}' not found."
    assert len(upstream.requests) == 1


async def test_without_a_store_previous_response_id_is_refused(upstream: ChatUpstream) -> None:
    async with gateway_client(chat_config(upstream.base_url, store="none")) as client:
        response = await client.post("/v1/responses", json={"model": "m", "input": "hi", "previous_response_id": "resp_x"})
        assert (await client.get("/v1/responses/resp_x")).status_code == 404  # no stored-response routes at all
    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": "previous_response_id needs a response store, and this gateway has none (--store).",
        "type": "invalid_request_error", "param": "previous_response_id", "code": "invalid_request",
    }  # fmt: skip


class FailingStore(MemoryResponseStore):
    """A store that answers reads but cannot keep anything (a full disk, a lost replica)."""

    async def put(self, record: StoredResponse) -> None:
        raise StoreUnavailable("The response store cannot write.")


async def test_a_store_that_cannot_keep_fails_a_whole_answer_but_not_a_stream(
    upstream: ChatUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    upstream.enqueue(Text("whole"), Text("streamed"))
    app = create_app(build_router(chat_config(upstream.base_url)), GatewaySettings(store=FailingStore(ttl_seconds=None, max_entries=None)))
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        whole = await client.post("/v1/responses", json={"model": "m", "input": "hi"})
        streamed = await client.post("/v1/responses", json={"model": "m", "input": "hi", "stream": True})
    assert (whole.status_code, whole.json()["error"]["message"]) == (503, "The response store cannot write.")
    final = sse_events(streamed.content)[-1]
    assert final["type"] == "response.completed"
    assert f"storing response {final['response']['id']} failed" in [
        r.getMessage() for r in caplog.records if r.levelno == logging.ERROR
    ]


@pytest.mark.parametrize("http", [None, "httptools"], ids=["toolwire's protocol", "uvicorn's"])
async def test_a_client_that_leaves_mid_stream_cancels_the_upstream_request(
    upstream: ChatUpstream, exchange_log: list[JSON], caplog: pytest.LogCaptureFixture, http: str | None
) -> None:
    """toolwire's HTTP protocol tells the exchange by a callback (its connection's
    ``Departures``); under a server that does not offer them, the exchange waits for
    ``http.disconnect`` itself. Either way the upstream request is cancelled."""
    caplog.set_level(logging.INFO, logger="toolwire.server")
    upstream.enqueue(Stall(after_chunks=3, seconds=30, reply=Text("a long answer that the client will not wait for")))
    config = chat_config(upstream.base_url)
    async with serving(gateway_app(config), config.server, http=http) as url, httpx.AsyncClient(base_url=url) as client:
        async with client.stream("POST", "/v1/responses", json={"model": "m", "input": "hi", "stream": True}) as response:
            async for chunk in response.aiter_raw():
                if b"response.output_text.delta" in chunk:
                    break
        await asyncio.to_thread(upstream.wait_for_disconnect, 10)
        assert await until(lambda: bool(exchange_log))  # the exchange is logged once it has wound down
    line = only(exchange_log)
    assert (line["outcome"], line["error"]) == ("disconnected", "The client went away before the response was complete.")
    assert line["stream"] is True
    said = [r.getMessage() for r in caplog.records if r.name == "toolwire.server"]
    assert f"client left {line['request_id']} before its response was complete; upstream request cancelled" in said


async def test_the_answers_of_a_full_gateway(upstream: ChatUpstream) -> None:
    upstream.enqueue(Stall(after_chunks=1, seconds=30))
    async with gateway_client(chat_config(upstream.base_url, max_streams=1)) as client:
        async with client.stream("POST", "/v1/responses", json={"model": "m", "input": "hi", "stream": True}) as held:
            assert held.status_code == 200, "one exchange takes one place: the one allowed"
            async for _ in held.aiter_raw():
                break
            refused = await client.post("/v1/responses", json={"model": "m", "input": "hi"})
            other = await client.get("/healthz")
        metrics = (await client.get("/metrics")).text
    assert (refused.status_code, refused.headers["retry-after"]) == (503, "1")
    assert int(refused.headers["content-length"]) == len(refused.content)
    assert refused.json() == {
        "error": {
            "message": "The gateway is serving as many responses as it allows at once (1, max_streams); retry in 1 s.",
            "type": "service_unavailable", "param": None, "code": "gateway_busy",
        }
    }  # fmt: skip
    assert other.status_code == 200, "only /v1/responses is capped"
    assert re.search(r'^toolwire_limits_tripped_total\{limit="max_streams"\} [1-9]', metrics, re.MULTILINE)


async def test_each_exchange_holds_one_place_under_max_streams_and_gives_it_back(upstream: ChatUpstream) -> None:
    """Two places: two streams held, a third request refused; once they end, their places
    come back, exactly two again."""
    body = {"model": "m", "input": "hi", "stream": True}
    async with gateway_client(chat_config(upstream.base_url, max_streams=2)) as client:
        for _ in range(2):
            upstream.enqueue(*[Stall(after_chunks=1, seconds=30)] * 2, Text("a place again"))
            async with client.stream("POST", "/v1/responses", json=body) as first, client.stream(
                "POST", "/v1/responses", json=body
            ) as second:
                assert (first.status_code, second.status_code) == (200, 200), "two places, two exchanges"
                third = await client.post("/v1/responses", json={"model": "m", "input": "hi"})
                assert third.status_code == 503
            for _ in range(200):  # until both left streams have ended and given their places back, bounded (10 s)
                again = await client.post("/v1/responses", json={"model": "m", "input": "hi"})
                if again.status_code != 503:
                    break
                await asyncio.sleep(0.05)
            assert again.status_code == 200 and again.json()["output"][0]["content"][0]["text"] == "a place again"


async def test_health_and_readiness(upstream: ChatUpstream) -> None:
    async with gateway_client(chat_config(upstream.base_url)) as client:
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        ready = await client.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    assert upstream.requests[-1].path == "/v1/models"


async def test_readiness_of_an_unreachable_upstream() -> None:
    async with gateway_client(chat_config("http://127.0.0.1:1/v1")) as client:
        ready = await client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["status"] == "unavailable"
    assert ready.json()["reason"].startswith("Cannot reach the upstream at http://127.0.0.1:1/v1: ")


async def test_readiness_follows_the_store_every_request_needs(upstream: ChatUpstream, redis_server: RedisServer) -> None:
    """While the store cannot answer, every request is refused (503: its key is looked up
    there), so the gateway is not ready; it is again once the store is back."""
    async with gateway_client(chat_config(upstream.base_url, store=redis_server.url)) as client:
        assert (await client.get("/readyz")).json() == {"status": "ready"}
        redis_server.stop()
        down = await client.get("/readyz")
        refused = await client.post("/v1/responses", json={"model": "m", "input": "hi", "store": False})
        redis_server.start()
        back = await client.get("/readyz")
    assert (down.status_code, down.json()["status"]) == (503, "unavailable")
    assert down.json()["reason"].startswith(f"The key store {redis_server.url} is unreachable (")
    assert refused.status_code == 503, "what readiness says is what a request meets"
    assert (back.status_code, back.json()) == (200, {"status": "ready"})


async def test_readiness_of_a_store_file_that_cannot_be_opened(upstream: ChatUpstream, tmp_path: Path) -> None:
    (tmp_path / "plain-file").write_bytes(b"")
    path = tmp_path / "plain-file" / "toolwire.sqlite3"  # under a file: no directory can be made there
    async with gateway_client(chat_config(upstream.base_url, store=f"sqlite://{path}")) as client:
        ready = await client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["reason"] == (
        f"The key store {path} failed: [Errno 20] Not a directory: '{tmp_path / 'plain-file'}'."
    )


async def test_readiness_asks_the_response_store_too(upstream: ChatUpstream) -> None:
    """A gateway without a key store (no gate) still needs its response store."""
    router = build_router(chat_config(upstream.base_url))
    app = create_app(router, GatewaySettings(store=open_store("redis://:hunter2@127.0.0.1:1/0")))
    async with serving(app, ServerConfig()) as url, httpx.AsyncClient(base_url=url) as client:
        ready = await client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["reason"].startswith("The response store redis://:***@127.0.0.1:1/0 is unreachable (")
    assert "hunter2" not in ready.text


async def test_unknown_routes_and_methods_get_openai_errors(upstream: ChatUpstream) -> None:
    async with gateway_client(chat_config(upstream.base_url)) as client:
        missing = await client.get("/v2/nothing")
        wrong = await client.get("/v1/responses")
        wrong_compact = await client.put("/v1/responses/compact")
        others = {path: await client.post(path) for path in ("/v1/models", "/healthz", "/readyz")}
    assert {path: (answer.status_code, answer.headers["allow"]) for path, answer in others.items()} == {
        "/v1/models": (405, "GET, HEAD"), "/healthz": (405, "GET, HEAD"), "/readyz": (405, "GET, HEAD"),
    }  # fmt: skip
    assert (missing.status_code, missing.json()) == (
        404,
        {"error": {"message": "No route for GET /v2/nothing.", "type": "not_found_error", "param": None, "code": None}},
    )
    assert (wrong.status_code, wrong.json()) == (
        405,
        {"error": {"message": "GET is not allowed on /v1/responses.", "type": "invalid_request_error", "param": None,
                   "code": "method_not_allowed"}},
    )  # fmt: skip
    assert (wrong.headers["allow"], wrong_compact.status_code, wrong_compact.headers["allow"]) == ("POST", 405, "POST")


def test_a_405_names_the_allowed_methods_in_a_stable_order() -> None:
    refusal = HTTPException(405, headers={"Allow": "POST, HEAD, GET"})
    assert allow_header(refusal) == {"allow": "GET, HEAD, POST"}


def test_it_all_needs_only_httpx() -> None:
    assert httpx.__version__


async def test_a_stream_that_fails_before_its_first_chunk_still_begins_properly(upstream: ChatUpstream) -> None:
    upstream.enqueue(StreamError(after_chunks=0))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        response = await client.post("/v1/responses", json={"model": "m", "input": "hi", "stream": True})
    events = sse_events(response.content)
    assert [event["type"] for event in events] == ["response.created", "response.in_progress", "error", "response.failed"]
    assert [event["sequence_number"] for event in events] == [0, 1, 2, 3]


class RacedStore(MemoryResponseStore):
    """A store whose every delete finds the response already gone (another client, or its
    TTL, took it between the lookup and the delete)."""

    async def delete(self, response_id: str) -> bool:
        await super().delete(response_id)
        return False


async def test_a_response_deleted_under_a_delete_is_not_found_by_its_id(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("soon gone"))
    app = create_app(build_router(chat_config(upstream.base_url)), GatewaySettings(store=RacedStore(ttl_seconds=None, max_entries=None)))
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        made = (await client.post("/v1/responses", json={"model": "m", "input": "hi"})).json()
        deleted = await client.delete(f"/v1/responses/{made['id']}")
    assert deleted.status_code == 404
    assert deleted.json()["error"]["message"] == f"Response with id '{made['id']}' not found."
