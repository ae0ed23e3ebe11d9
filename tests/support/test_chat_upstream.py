"""Tests for the scripted Chat Completions upstream, over real HTTP."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from tests.support import chat_upstream
from tests.support.chat_upstream import (
    Call,
    ChatUpstream,
    Cut,
    HttpError,
    Raw,
    ReplyContext,
    Stall,
    StreamError,
    Style,
    Text,
    ToolCalls,
    stream_payloads,
)

DONE = "[DONE]"
STYLES: list[Style] = ["openai", "ollama"]


@pytest.fixture
def upstream() -> Iterator[ChatUpstream]:
    with ChatUpstream() as server:
        yield server


def parse_sse(body: bytes) -> list[Any]:
    """Decode a whole SSE body into JSON payloads, with ``"[DONE]"`` kept as a string."""
    events = [event for event in body.split(b"\n\n") if event]
    assert all(event.startswith(b"data: ") for event in events), body
    return [
        DONE if event == b"data: [DONE]" else orjson.loads(event.removeprefix(b"data: "))
        for event in events
    ]


def chat(
    upstream: ChatUpstream, *, stream: bool = True, include_usage: bool = False, **extra: Any
) -> httpx.Response:
    body: dict[str, Any] = {
        "model": "echo-me",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
        **extra,
    }
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    return httpx.post(f"{upstream.base_url}/chat/completions", json=body, timeout=5)


def streamed(upstream: ChatUpstream, **kwargs: Any) -> list[Any]:
    response = chat(upstream, **kwargs)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_sse(response.content)


def deltas(events: list[Any]) -> list[dict[str, Any]]:
    return [e["choices"][0]["delta"] for e in events if e != DONE and e["choices"]]


def finish_reasons(events: list[Any]) -> list[str | None]:
    return [e["choices"][0]["finish_reason"] for e in events if e != DONE and e["choices"]]


def tool_call_deltas(events: list[Any]) -> list[dict[str, Any]]:
    return [call for delta in deltas(events) for call in delta.get("tool_calls", [])]


def joined(events: list[Any], key: str) -> str:
    return "".join(d[key] for d in deltas(events) if d.get(key))


# --------------------------------------------------------------------------- shared shape


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("include_usage", [False, True])
def test_every_chunk_has_the_envelope_and_done_comes_last(
    upstream: ChatUpstream, style: Style, include_usage: bool
) -> None:
    upstream.style = style
    upstream.enqueue(Text("Hello there, world", reasoning="think"))
    events = streamed(upstream, include_usage=include_usage)

    assert events[-1] == DONE
    assert DONE not in events[:-1]
    chunks = events[:-1]
    assert {c["id"] for c in chunks} == {"chatcmpl-0"}
    for chunk in chunks:
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["model"] == "echo-me"
        assert isinstance(chunk["created"], int)
        for choice in chunk["choices"]:
            assert choice["index"] == 0
            assert ("logprobs" in choice) == (style == "openai")
            if style == "openai":
                assert choice["logprobs"] is None
    usage_chunks = [c for c in chunks if c["choices"] == []]
    if include_usage:
        assert usage_chunks == [chunks[-1]]
        usage = chunks[-1]["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        normal = chunks[:-1]
        if style == "openai":
            assert all(c["usage"] is None for c in normal)
        else:  # Ollama's usage is `omitempty`
            assert all("usage" not in c for c in normal)
    else:
        assert usage_chunks == []
        assert all("usage" not in c for c in chunks)


# --------------------------------------------------------------------------- openai style


def test_openai_text_starts_with_role_and_finishes_on_its_own_chunk(
    upstream: ChatUpstream,
) -> None:
    upstream.enqueue(Text("Hello there, world", reasoning="Let me think"))
    events = streamed(upstream)

    assert deltas(events)[0] == {"role": "assistant", "content": "", "refusal": None}
    reasoning = [d["reasoning_content"] for d in deltas(events) if "reasoning_content" in d]
    content = [d["content"] for d in deltas(events)[1:] if "content" in d]
    assert "".join(reasoning) == "Let me think" and len(reasoning) > 1
    assert "".join(content) == "Hello there, world" and len(content) > 1
    first_content = next(i for i, d in enumerate(deltas(events)) if d.get("content"))
    last_reasoning = max(i for i, d in enumerate(deltas(events)) if "reasoning_content" in d)
    assert last_reasoning < first_content
    assert deltas(events)[-1] == {}
    assert finish_reasons(events) == [None] * (len(deltas(events)) - 1) + ["stop"]


def test_openai_tool_calls_name_once_then_argument_fragments(upstream: ChatUpstream) -> None:
    calls = [
        Call("get_weather", '{"city": "Paris", "unit": "celsius"}', id="call_abc"),
        Call("shell", '{"command": ["ls", "-la"]}'),
    ]
    upstream.enqueue(ToolCalls(calls, text="Checking.", reasoning="plan"))
    events = streamed(upstream)

    assert deltas(events)[0] == {"role": "assistant", "content": "", "refusal": None}
    assert joined(events, "reasoning_content") == "plan"
    assert joined(events, "content") == "Checking."
    pieces = tool_call_deltas(events)
    assert [p["index"] for p in pieces] == sorted(p["index"] for p in pieces)  # sequential
    for index, call in enumerate(calls):
        mine = [p for p in pieces if p["index"] == index]
        expected_id = call.id or f"call_0_{index}"
        assert mine[0] == {
            "index": index,
            "id": expected_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        rest = mine[1:]
        assert len(rest) > 1
        assert all(
            set(p) == {"index", "function"} and set(p["function"]) == {"arguments"} for p in rest
        )
        assert "".join(p["function"]["arguments"] for p in rest) == call.arguments
    first_call = next(i for i, d in enumerate(deltas(events)) if "tool_calls" in d)
    last_text = max(i for i, d in enumerate(deltas(events)) if d.get("content"))
    assert last_text < first_call
    assert deltas(events)[-1] == {}
    assert finish_reasons(events)[-1] == "tool_calls"


def test_openai_tool_calls_without_text_have_null_content_in_the_role_chunk(
    upstream: ChatUpstream,
) -> None:
    upstream.enqueue(ToolCalls([Call("f", "{}")]))
    assert deltas(streamed(upstream))[0] == {"role": "assistant", "content": None, "refusal": None}


def test_openai_interleaved_calls_alternate_by_index(upstream: ChatUpstream) -> None:
    calls = [Call("a", '{"x": "0123456789"}'), Call("b", '{"y": "abcdefghij"}')]
    upstream.enqueue(ToolCalls(calls, interleave=True))
    pieces = tool_call_deltas(streamed(upstream))

    assert [p["index"] for p in pieces[:6]] == [0, 1, 0, 1, 0, 1]
    for index, call in enumerate(calls):
        mine = [p for p in pieces if p["index"] == index]
        assert mine[0]["function"]["name"] == call.name
        assert "".join(p["function"]["arguments"] for p in mine) == call.arguments


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("finish_reason", [None, "stop"])
def test_wrong_finish_reasons_are_sent_as_scripted(
    upstream: ChatUpstream, style: Style, finish_reason: str | None
) -> None:
    upstream.style = style
    upstream.enqueue(ToolCalls([Call("f", "{}")], finish_reason=finish_reason))
    reasons = finish_reasons(streamed(upstream))

    expected = [] if finish_reason is None else [finish_reason]
    assert [r for r in reasons if r is not None] == expected


# --------------------------------------------------------------------------- ollama style


def test_ollama_sends_each_call_whole_in_one_chunk(upstream: ChatUpstream) -> None:
    upstream.style = "ollama"
    calls = [Call("get_weather", '{"city":"Paris"}'), Call("shell", '{"command":["ls"]}')]
    upstream.enqueue(ToolCalls(calls, text="On it.", reasoning="hmm, weather"))
    events = streamed(upstream, include_usage=True)

    assert all(c["system_fingerprint"] == "fp_ollama" for c in events[:-1])
    for delta in deltas(events):
        assert delta["role"] == "assistant" and isinstance(delta["content"], str)
    reasoning_chunks = [d for d in deltas(events) if "reasoning" in d]
    assert all(d["content"] == "" for d in reasoning_chunks)
    assert "".join(d["reasoning"] for d in reasoning_chunks) == "hmm, weather"
    assert joined(events, "content") == "On it."
    call_chunks = [d for d in deltas(events) if "tool_calls" in d]
    assert [d["tool_calls"] for d in call_chunks] == [
        [
            {
                "id": f"call_0_{index}",
                "index": index,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
        ]
        for index, call in enumerate(calls)
    ]
    assert deltas(events)[-1] == {"role": "assistant", "content": ""}
    assert finish_reasons(events)[-1] == "tool_calls"
    assert events[-2]["choices"] == [] and events[-1] == DONE


def test_ollama_text_finishes_with_stop(upstream: ChatUpstream) -> None:
    upstream.style = "ollama"
    upstream.enqueue(Text("Plain answer"))
    events = streamed(upstream)

    assert joined(events, "content") == "Plain answer"
    assert finish_reasons(events)[-1] == "stop"
    assert not any("tool_calls" in d for d in deltas(events))


# --------------------------------------------------------------------------- reasoning field


@pytest.mark.parametrize(
    ("style", "server_field", "reply_field", "expected"),
    [
        ("openai", None, None, "reasoning_content"),
        ("ollama", None, None, "reasoning"),
        ("openai", "reasoning", None, "reasoning"),
        ("ollama", "reasoning_content", None, "reasoning_content"),
        ("openai", "reasoning", "reasoning_content", "reasoning_content"),
    ],
)
def test_reasoning_field_name_is_configurable(
    upstream: ChatUpstream,
    style: Style,
    server_field: chat_upstream.ReasoningField | None,
    reply_field: chat_upstream.ReasoningField | None,
    expected: str,
) -> None:
    upstream.style = style
    upstream.reasoning_field = server_field
    upstream.enqueue(Text("ok", reasoning="because", reasoning_field=reply_field))
    upstream.enqueue(Text("ok", reasoning="because", reasoning_field=reply_field))
    events = streamed(upstream)
    other = "reasoning" if expected == "reasoning_content" else "reasoning_content"

    assert joined(events, expected) == "because"
    assert not any(other in d for d in deltas(events))
    message = chat(upstream, stream=False).json()["choices"][0]["message"]
    assert message[expected] == "because" and other not in message


# --------------------------------------------------------------------------- non-streaming


@pytest.mark.parametrize("style", STYLES)
def test_non_streaming_gets_a_chat_completion_object(upstream: ChatUpstream, style: Style) -> None:
    upstream.style = style
    upstream.enqueue(ToolCalls([Call("f", '{"a": 1}', id="call_1")], text="hi", reasoning="r"))
    response = chat(upstream, stream=False)

    assert response.headers["content-type"] == "application/json"
    completion = response.json()
    assert completion["object"] == "chat.completion"
    assert completion["model"] == "echo-me"
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["role"] == "assistant"
    assert message["content"] == "hi"
    assert message["reasoning_content" if style == "openai" else "reasoning"] == "r"
    assert [
        (c["id"], c["type"], c["function"]["name"], c["function"]["arguments"])
        for c in message["tool_calls"]
    ] == [("call_1", "function", "f", '{"a": 1}')]
    assert set(completion["usage"]) >= {"prompt_tokens", "completion_tokens", "total_tokens"}


def test_non_streaming_text_without_tool_calls(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("just text"))
    message = chat(upstream, stream=False).json()["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "just text", "refusal": None}


def test_usage_can_be_scripted(upstream: ChatUpstream) -> None:
    usage = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    upstream.enqueue(Text("x", usage=usage), Text("x", usage=usage))
    assert streamed(upstream, include_usage=True)[-2]["usage"] == usage
    assert chat(upstream, stream=False).json()["usage"] == usage


# --------------------------------------------------------------------------- recording & script


def test_requests_are_recorded(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("a"))
    chat(upstream, include_usage=True)
    models = httpx.get(f"{upstream.base_url}/models", headers={"Authorization": "Bearer k"})

    assert models.json()["data"][0]["id"] == chat_upstream.DEFAULT_MODEL
    first, second = upstream.requests
    assert (first.method, first.path) == ("POST", "/v1/chat/completions")
    assert first.headers["content-type"] == "application/json"
    assert first.json["stream_options"] == {"include_usage": True}
    assert orjson.loads(first.body) == first.json
    assert (second.method, second.path, second.json) == ("GET", "/v1/models", None)
    assert second.headers["authorization"] == "Bearer k"
    assert upstream.chat_requests == [first.json]


def test_unknown_route_is_recorded_and_404(upstream: ChatUpstream) -> None:
    response = httpx.post(f"{upstream.base_url}/responses", json={})
    assert response.status_code == 404
    assert "POST /v1/responses" in response.json()["error"]["message"]
    assert upstream.requests[0].path == "/v1/responses"


def test_replies_are_consumed_in_order(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("one"), Text("two"))
    assert upstream.pending == 2
    assert joined(streamed(upstream), "content") == "one"
    assert joined(streamed(upstream), "content") == "two"
    assert upstream.pending == 0


def test_running_out_of_script_answers_500(upstream: ChatUpstream) -> None:
    response = chat(upstream)
    assert response.status_code == 500
    assert "script ran out" in response.json()["error"]["message"]


def test_responder_answers_when_the_queue_is_empty(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("queued"))
    upstream.responder = lambda body: Text(f"{len(body['messages'])} messages")

    assert joined(streamed(upstream), "content") == "queued"
    assert joined(streamed(upstream), "content") == "1 messages"


def test_a_failing_responder_answers_500(upstream: ChatUpstream) -> None:
    def responder(body: Any) -> Text:
        raise KeyError("no such turn")

    upstream.responder = responder
    response = chat(upstream)
    assert response.status_code == 500
    assert "no such turn" in response.json()["error"]["message"]


def test_non_json_body_answers_400(upstream: ChatUpstream) -> None:
    response = httpx.post(f"{upstream.base_url}/chat/completions", content=b"{nope")
    assert response.status_code == 400
    assert upstream.requests[0].body == b"{nope" and upstream.requests[0].json is None


def test_reset_forgets_script_and_records(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("a"), Text("b"))
    chat(upstream)
    upstream.reset()
    assert (upstream.pending, upstream.requests, upstream.responder) == (0, [], None)


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize("stream", [True, False])
def test_http_error_is_answered_before_streaming(upstream: ChatUpstream, stream: bool) -> None:
    body = {"error": {"message": "Rate limit", "type": "rate_limit_error", "code": "rate_limit"}}
    upstream.enqueue(HttpError(429, body, headers={"retry-after": "2"}))
    response = chat(upstream, stream=stream)

    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    assert response.headers["content-type"] == "application/json"
    assert response.json() == body


def test_http_error_with_a_text_body(upstream: ChatUpstream) -> None:
    upstream.enqueue(HttpError(502, "Bad Gateway"))
    response = chat(upstream)
    assert (response.status_code, response.text) == (502, "Bad Gateway")


@pytest.mark.parametrize("style", STYLES)
def test_stream_error_after_some_chunks_then_done(upstream: ChatUpstream, style: Style) -> None:
    upstream.style = style
    error = {"error": {"message": "boom", "type": "BadRequestError", "param": None, "code": 400}}
    upstream.enqueue(StreamError(2, error))
    events = streamed(upstream, include_usage=True)

    assert len(events) == 4
    assert all("choices" in e for e in events[:2])
    assert events[2:] == [error, DONE]


def test_stream_error_on_a_non_streaming_request_is_a_500(upstream: ChatUpstream) -> None:
    upstream.enqueue(StreamError(2))
    response = chat(upstream, stream=False)
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "InternalServerError"


@pytest.mark.parametrize("style", STYLES)
def test_cut_closes_the_connection_mid_stream(upstream: ChatUpstream, style: Style) -> None:
    upstream.style = style
    upstream.enqueue(Cut(3, reply=ToolCalls([Call("f", '{"a": 1}')], text="Some text first.")))
    received: list[bytes] = []
    url = f"{upstream.base_url}/chat/completions"
    body = {"model": "m", "stream": True}
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("POST", url, json=body, timeout=5) as response,
    ):
        for line in response.iter_lines():
            if line:
                received.append(line.encode())
    assert len(received) == 3
    assert all(b'finish_reason":null' in line for line in received)
    assert upstream.disconnects == []  # the server hung up, not the client


def test_cut_on_a_non_streaming_request_sends_nothing(upstream: ChatUpstream) -> None:
    upstream.enqueue(Cut(0))
    with pytest.raises(httpx.RemoteProtocolError):
        chat(upstream, stream=False)


def test_stall_resumes_the_stream_after_the_pause(upstream: ChatUpstream) -> None:
    upstream.enqueue(Stall(2, seconds=0.3, reply=Text("resumed text")))
    started = time.monotonic()
    events = streamed(upstream)

    assert time.monotonic() - started >= 0.3
    assert joined(events, "content") == "resumed text"
    assert events[-1] == DONE


def test_a_released_stall_resumes_at_once(upstream: ChatUpstream) -> None:
    release = threading.Event()
    release.set()
    upstream.enqueue(Stall(2, seconds=600, release=release, reply=Text("resumed text")))
    events = streamed(upstream)  # its client gives up long before 600 s
    assert joined(events, "content") == "resumed text"
    assert events[-1] == DONE


async def test_client_leaving_a_stall_is_noticed(
    upstream: ChatUpstream,
) -> None:
    upstream.enqueue(Stall(2, seconds=600))
    url = f"{upstream.base_url}/chat/completions"
    async with (
        httpx.AsyncClient(timeout=5) as client,
        client.stream("POST", url, json={"model": "m", "stream": True}) as response,
    ):
        lines = response.aiter_lines()
        assert (await anext(lines)).startswith("data: ")
        await anext(lines)  # blank separator
        assert (await anext(lines)).startswith("data: ")
    closed_at = time.monotonic()  # leaving the block closed the connection

    disconnect = await asyncio.to_thread(upstream.wait_for_disconnect, 60)  # not the 600 s stall
    assert disconnect.request_index == 0
    assert disconnect.stream_started_at < closed_at


def test_raw_bytes_are_sent_verbatim(upstream: ChatUpstream) -> None:
    lines = [b"data: {not json\n\n", b": comment\n", b"\n", b"data: [DONE]\n\n"]
    upstream.enqueue(Raw(lines))
    response = chat(upstream)
    assert response.status_code == 200
    assert response.content == b"".join(lines)


# --------------------------------------------------------------------------- lifecycle & API


def test_stop_releases_the_port() -> None:
    server = ChatUpstream().start()
    port = server.port
    assert server.base_url == f"http://127.0.0.1:{port}/v1"
    server.stop()
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass
    with pytest.raises(RuntimeError):
        _ = server.base_url


def test_stop_does_not_wait_for_a_stalled_stream() -> None:
    server = ChatUpstream().start()
    server.enqueue(Stall(1, seconds=600))
    with httpx.stream(
        "POST", f"{server.base_url}/chat/completions", json={"stream": True}, timeout=60
    ) as response:
        lines = response.iter_lines()  # keep it: dropping it would close the connection
        next(lines)
        stopping = threading.Thread(target=server.stop)
        stopping.start()
        stopping.join(timeout=60)
        assert not stopping.is_alive(), "stop() waited for the stalled stream"
        with pytest.raises(httpx.RemoteProtocolError):
            list(lines)
    assert server.disconnects == []


async def test_usable_from_async_tests(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("async hello"))
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{upstream.base_url}/chat/completions", json={"model": "m", "stream": True}
        )
    assert joined(parse_sse(response.content), "content") == "async hello"


def test_payload_builder_is_usable_without_http() -> None:
    chunks = stream_payloads(Text("hi"), ReplyContext(style="ollama", include_usage=True))
    assert [c["choices"][0]["delta"] for c in chunks[:-1]] == [
        {"role": "assistant", "content": "hi"},
        {"role": "assistant", "content": ""},
    ]
    assert chunks[-1]["choices"] == []


def test_public_api() -> None:
    assert sorted(chat_upstream.__all__) == [
        "Call",
        "ChatUpstream",
        "Completion",
        "Cut",
        "DEFAULT_MODEL",
        "Disconnect",
        "HttpError",
        "Raw",
        "ReasoningField",
        "RecordedRequest",
        "Reply",
        "ReplyContext",
        "Responder",
        "Stall",
        "StreamError",
        "Style",
        "Text",
        "ToolCalls",
        "completion_payload",
        "stream_payloads",
    ]
