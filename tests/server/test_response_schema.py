"""Every Response object, streamed event and compaction object the gateway produces is
valid against the Open Responses specification's schemas (2026-04-24,
``tests/fixtures/open_responses/openapi.json``): through the real gateway, in front of
the scripted Chat and Responses upstreams, streamed and not, completed, incomplete,
failed, compacted, created without the model (``generate: false`` over a WebSocket),
and read back with ``GET /v1/responses/{id}``.

The specification knows function tools only, so the requests here declare function
tools (a ``custom`` or ``namespace`` tool, Codex's, is outside it). Two event types the
gateway sends are outside its union too: ``response.reasoning_text.delta`` / ``.done``,
the names the openai SDK and Codex read for what the specification calls
``response.reasoning.delta`` / ``.done``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from jsonschema import Draft202012Validator
from websockets.sync.client import connect as ws_connect

from tests.support.chat_upstream import Call, ChatUpstream, Cut, Raw, Text, ToolCalls
from tests.support.gateway import GatewayProcess
from tests.support.responses_upstream import Cut as ResponsesCut
from tests.support.responses_upstream import (
    Events,
    ResponsesUpstream,
    answer,
    function_call,
    message,
)
from toolwire.protocol import SSEDecoder

JSON = dict[str, Any]
SPEC: JSON = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "open_responses" / "openapi.json").read_text())
EVENT_UNION = SPEC["paths"]["/responses"]["post"]["responses"]["200"]["content"]["text/event-stream"]["schema"]["oneOf"]
OUTSIDE_THE_SPEC = frozenset({"response.reasoning_text.delta", "response.reasoning_text.done"})


def validator(schema_name: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"#/components/schemas/{schema_name}", "components": SPEC["components"]})


RESPONSE = validator("ResponseResource")
COMPACTION = validator("CompactResource")
EVENTS = {
    SPEC["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]["properties"]["type"]["enum"][0]: validator(
        ref["$ref"].rsplit("/", 1)[1]
    )
    for ref in EVENT_UNION
}


def problems(schema: Draft202012Validator, value: JSON) -> list[str]:
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in schema.iter_errors(value)]


def assert_valid_events(events: list[JSON]) -> None:
    for event in events:
        kind = event["type"]
        if kind in OUTSIDE_THE_SPEC:
            continue
        assert kind in EVENTS, f"{kind} is no event of the specification"
        assert problems(EVENTS[kind], event) == [], event


def assert_valid_response(response: JSON) -> None:
    assert problems(RESPONSE, response) == [], response


def stream(gateway: GatewayProcess, body: JSON) -> list[JSON]:
    decoder = SSEDecoder()
    with httpx.stream("POST", gateway.base_url + "/responses", json={**body, "stream": True}, timeout=30) as reply:
        assert reply.status_code == 200, reply.read()
        events = [orjson.loads(event.data) for chunk in reply.iter_raw() for event in decoder.feed(chunk)]
    assert_valid_events(events)
    return events


def whole(gateway: GatewayProcess, body: JSON) -> JSON:
    reply = httpx.post(gateway.base_url + "/responses", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    response: JSON = reply.json()
    assert_valid_response(response)
    return response


WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
EXEC = {"type": "function", "name": "exec_command", "description": "Runs a command.", "strict": False,
        "parameters": {"type": "object"}}  # fmt: skip
EVERY_FIELD: JSON = {
    "instructions": "Be brief.",
    "tools": [WEATHER, EXEC],
    "tool_choice": {"type": "function", "name": "get_weather"},
    "parallel_tool_calls": False,
    "temperature": 0.2,
    "top_p": 0.9,
    "presence_penalty": 0.5,
    "max_output_tokens": 256,
    "reasoning": {"effort": "low"},
    "text": {"verbosity": "low"},
    "metadata": {"run": "7"},
    "prompt_cache_key": "cache-7",
    "safety_identifier": "user-7",
    "service_tier": "auto",
    "truncation": "auto",
    "store": True,
}


def refusal_stream() -> Raw:
    def data(delta: JSON, finish: str | None = None) -> bytes:
        chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    return Raw([data({"role": "assistant", "refusal": "I can't "}), data({"refusal": "help."}), data({}, "stop"), b"data: [DONE]\n\n"])


def refusal_whole() -> Raw:
    message = {"role": "assistant", "content": None, "refusal": "I can't help."}
    completion = {"id": "c", "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    return Raw([orjson.dumps(completion)], content_type="application/json")


# ---------------------------------------------------------------- in front of Chat Completions


@pytest.mark.parametrize(
    ("body", "replies"),
    [
        pytest.param({"input": "hi"}, [Text("Hello.")] * 2, id="minimal"),
        pytest.param({"input": "weather?", **EVERY_FIELD}, [Text("Sunny.", reasoning="Look it up.")] * 2, id="every-field"),
        pytest.param({"input": "weather?", "tools": [WEATHER, EXEC]}, [ToolCalls([Call("get_weather", '{"city":"Oslo"}')], text="Checking.")] * 2, id="function-call"),
        pytest.param({"input": "bad idea"}, [refusal_stream(), refusal_whole()], id="refusal"),
        pytest.param({"input": "long", "max_output_tokens": 16}, [Text("Once upon", finish_reason="length")] * 2, id="incomplete"),
    ],
)
def test_chat_answers_streamed_and_whole(gateway: GatewayProcess, upstream: ChatUpstream, body: JSON, replies: list[Any]) -> None:
    upstream.enqueue(*replies)
    events = stream(gateway, {"model": "m", **body})
    assert events[-1]["type"] in ("response.completed", "response.incomplete")
    response = whole(gateway, {"model": "m", **body})
    assert [item["type"] for item in response["output"]] == [item["type"] for item in events[-1]["response"]["output"]]
    stored = httpx.get(f"{gateway.base_url}/responses/{response['id']}", timeout=30).json()
    assert_valid_response(stored)


def test_the_request_is_echoed_with_the_specified_defaults(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("Sunny."), Text("Hi."))
    echoed = whole(gateway, {"model": "m", "input": "weather?", **EVERY_FIELD})
    for field in ("instructions", "tool_choice", "parallel_tool_calls", "temperature", "top_p", "presence_penalty",
                  "max_output_tokens", "metadata", "prompt_cache_key", "safety_identifier", "service_tier", "truncation"):
        assert echoed[field] == EVERY_FIELD[field], field  # fmt: skip
    assert echoed["reasoning"] == {"effort": "low", "summary": None}
    assert echoed["text"] == {"verbosity": "low", "format": {"type": "text"}}
    assert echoed["tools"] == [{**WEATHER, "description": None, "strict": True}, EXEC]  # strict as sent, else true
    defaults = whole(gateway, {"model": "m", "input": "hi", "store": False})
    assert {field: defaults[field] for field in ("temperature", "top_p", "presence_penalty", "frequency_penalty",
            "top_logprobs", "background", "service_tier", "truncation", "max_tool_calls", "reasoning")} == {
        "temperature": 1.0, "top_p": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "top_logprobs": 0,
        "background": False, "service_tier": "default", "truncation": "disabled", "max_tool_calls": None, "reasoning": None,
    }  # fmt: skip


def test_a_failed_stream(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Cut(after_chunks=3))
    events = stream(gateway, {"model": "m", "input": "hi", "tools": [WEATHER]})
    assert [e["type"] for e in events][-2:] == ["error", "response.failed"]


def test_compactions(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    conversation = [{"role": "user", "content": "Plan it."}, {"type": "compaction_trigger"}]
    upstream.enqueue(Text("A summary.", usage={"prompt_tokens": 10, "completion_tokens": 3}), Text("Another summary."))
    events = stream(gateway, {"model": "m", "input": conversation, "tools": [WEATHER]})
    assert [item["type"] for item in events[-1]["response"]["output"]] == ["compaction"]
    reply = httpx.post(gateway.base_url + "/responses/compact", json={"model": "m", "input": conversation[:1]}, timeout=30)
    assert reply.status_code == 200, reply.text
    assert problems(COMPACTION, reply.json()) == []


def prewarm(gateway: GatewayProcess, body: JSON) -> list[JSON]:
    """A ``generate: false`` response over a WebSocket: its events, checked against the schemas."""
    with ws_connect(f"ws://127.0.0.1:{gateway.port}/v1/responses", open_timeout=20) as ws:
        ws.send(orjson.dumps({"type": "response.create", "generate": False, **body}).decode())
        events = [orjson.loads(ws.recv(timeout=30))]
        while events[-1]["type"] not in ("response.completed", "response.failed", "error"):
            events.append(orjson.loads(ws.recv(timeout=30)))
    assert_valid_events(events)
    return events


def assert_a_prewarm(events: list[JSON], body: JSON) -> None:
    """Created, in progress, then completed at once: numbered in order, one Response,
    echoing the request, with no output and no usage."""
    assert [e["type"] for e in events] == ["response.created", "response.in_progress", "response.completed"]
    assert [e["sequence_number"] for e in events] == [0, 1, 2]
    final = events[-1]["response"]
    assert_valid_response(final)
    assert len({e["response"]["id"] for e in events}) == 1
    assert [e["response"]["status"] for e in events] == ["in_progress", "in_progress", "completed"]
    assert (final["output"], final["usage"], final["model"]) == ([], None, body["model"])
    assert isinstance(final["completed_at"], int) and final["completed_at"] >= final["created_at"]
    assert [tool["name"] for tool in final["tools"]] == [tool["name"] for tool in body["tools"]]
    assert final["instructions"] == body["instructions"] and final["store"] is False


PREWARM: JSON = {"model": "m", "input": "warm up", "instructions": "Be brief.", "tools": [WEATHER, EXEC], "store": False}


def test_a_prewarm(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    events = prewarm(gateway, PREWARM)
    assert_a_prewarm(events, PREWARM)
    assert upstream.requests == []  # nothing was asked upstream


def test_the_schema_catches_what_is_missing() -> None:
    """The schema is no formality: a Response without a required field, or with a null
    where a number is required, is invalid."""
    complete = {
        "id": "resp_1", "object": "response", "created_at": 1, "completed_at": 2, "status": "completed",
        "incomplete_details": None, "model": "m", "previous_response_id": None, "instructions": None,
        "output": [], "error": None, "tools": [], "tool_choice": "auto", "truncation": "disabled",
        "parallel_tool_calls": True, "text": {"format": {"type": "text"}}, "top_p": 1.0, "presence_penalty": 0.0,
        "frequency_penalty": 0.0, "top_logprobs": 0, "temperature": 1.0, "reasoning": None, "usage": None,
        "max_output_tokens": None, "max_tool_calls": None, "store": True, "background": False,
        "service_tier": "default", "metadata": {}, "safety_identifier": None, "prompt_cache_key": None,
    }  # fmt: skip
    assert problems(RESPONSE, complete) == []
    assert problems(RESPONSE, {key: value for key, value in complete.items() if key != "background"}) != []
    assert problems(RESPONSE, {**complete, "temperature": None}) != []
    assert problems(RESPONSE, {**complete, "tools": [{"type": "function", "name": "f"}]}) != []


# ---------------------------------------------------------------- in front of a Responses server


@pytest.fixture(scope="module")
def responses_upstream() -> Iterator[ResponsesUpstream]:
    with ResponsesUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def responses_gateway(responses_upstream: ResponsesUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("schema-responses")
    config = folder / "toolwire.toml"
    config.write_text(
        f'[server]\nstore = "memory://"\nupstream_retries = 1\n\n'
        f'[[upstreams]]\nname = "r"\nkind = "responses"\nbase_url = "{responses_upstream.base_url}"\ndefault = true\n'
    )
    process = GatewayProcess("unused", folder / "gateway.log")
    process.args = [sys.executable, "-m", "toolwire", "serve", "--config", str(config),
                    "--host", "127.0.0.1", "--port", str(process.port)]  # fmt: skip
    with process:
        yield process


def test_a_responses_backends_answers_made_whole(responses_gateway: GatewayProcess, responses_upstream: ResponsesUpstream) -> None:
    """The scripted server's Response objects leave most of the fields out (as vLLM's do):
    the client gets them all."""
    responses_upstream.reset()
    items = [message("Checking."), function_call("get_weather", '{"city":"Oslo"}', "call_1")]
    responses_upstream.enqueue(answer(items), answer(items), ResponsesCut(answer(items).events, after=6))
    body = {"model": "m", "input": "weather?", **EVERY_FIELD}
    events = stream(responses_gateway, body)
    final = events[-1]["response"]
    assert final["temperature"] == 1.0  # what the backend says it used
    assert final["safety_identifier"] == "user-7" and final["presence_penalty"] == 0.5  # left out: the request's
    assert final["background"] is False and final["top_logprobs"] == 0  # the specified defaults
    whole(responses_gateway, body)
    events = stream(responses_gateway, body)
    assert events[-1]["type"] == "response.failed"


def test_a_prewarm_in_front_of_a_responses_backend(
    responses_gateway: GatewayProcess, responses_upstream: ResponsesUpstream
) -> None:
    responses_upstream.reset()
    events = prewarm(responses_gateway, {**PREWARM, **EVERY_FIELD, "store": False})
    assert_a_prewarm(events, {**PREWARM, **EVERY_FIELD, "store": False})
    assert events[-1]["response"]["safety_identifier"] == "user-7"  # the request, echoed
    assert responses_upstream.requests == []


def test_a_responses_backends_error_event_made_whole(responses_gateway: GatewayProcess, responses_upstream: ResponsesUpstream) -> None:
    """OpenAI's servers send ``error`` events flat (``code``, ``message``): the client gets the
    ``error`` object the specification requires too."""
    responses_upstream.reset()
    created = answer([message("x")]).events[0]
    failed = {"type": "response.failed", "sequence_number": 2,
              "response": {**created["response"], "status": "failed", "error": {"code": "server_error", "message": "overloaded"}}}
    flat = {"type": "error", "sequence_number": 1, "code": "server_error", "message": "overloaded", "param": None}
    responses_upstream.enqueue(Events([created, flat, failed]))
    events = stream(responses_gateway, {"model": "m", "input": "hi"})
    [error] = [event for event in events if event["type"] == "error"]
    assert error["error"] == {"type": "server_error", "code": "server_error", "message": "overloaded", "param": None}
    assert events[-1]["type"] == "response.failed"
