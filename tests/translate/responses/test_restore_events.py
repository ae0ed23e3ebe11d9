"""``ResponsesStreamRestorer``, event by event: a V1 backend's stream written out, and every
event the client reads from it (``tests.translate.streams.readable``), in order; the
failures the restorer writes itself; a whole answer.
"""

from __future__ import annotations

from typing import Any

import orjson

from tests.translate.streams import item_added, item_done, lifecycle, readable
from toolwire.protocol import parse_request
from toolwire.translate import ResponsesCapabilities, ResponsesStreamRestorer, downgrade_request

JSON = dict[str, Any]
MCP = {
    "type": "namespace",
    "name": "mcp",
    "description": "An MCP server.",
    "tools": [
        {"type": "function", "name": "read", "parameters": {"type": "object", "properties": {}}},
        {"type": "custom", "name": "run", "description": "Run code."},
    ],
}
SEARCH = {"type": "tool_search", "execution": "client", "description": "Find."}
REQUEST = parse_request(
    orjson.dumps({"model": "client-model", "input": "hi", "tools": [MCP, SEARCH], "tool_choice": "auto", "previous_response_id": "resp_prev"})
)


def restorer(model: str | None = "client-model") -> ResponsesStreamRestorer:
    downgraded = downgrade_request(REQUEST, ResponsesCapabilities())
    return ResponsesStreamRestorer(downgraded, response_id="resp_gw", created_at=7, model=model)


def backend_response(status: str, output: list[Any] | None = None, **fields: Any) -> JSON:
    """A Response object as the backend sends it: its own id, model, tools and choice."""
    return {
        "id": "resp_up",
        "object": "response",
        "created_at": 100,
        "status": status,
        "model": "served",
        "output": output or [],
        "tools": [{"type": "function", "name": "mcp__run"}],
        "tool_choice": "required",
        "previous_response_id": None,
        **fields,
    }


RUN_ADDED = {"id": "fc_u2", "type": "function_call", "status": "in_progress", "call_id": "call_2", "name": "mcp__run", "arguments": ""}
RUN_DONE = {**RUN_ADDED, "status": "completed", "arguments": '{"input":"print(1)"}'}
READ = {"id": "fc_u3", "type": "function_call", "status": "completed", "call_id": "call_3", "name": "mcp__read", "arguments": "{}"}
FIND = {"id": "fc_u4", "type": "function_call", "status": "completed", "call_id": "call_4", "name": "tool_search", "arguments": "[1]"}

RUN_RESTORED = {"id": "ctc_u2", "type": "custom_tool_call", "status": "completed", "call_id": "call_2", "name": "run", "namespace": "mcp", "input": "print(1)"}
READ_RESTORED = {"id": "fc_u3", "type": "function_call", "status": "completed", "call_id": "call_3", "name": "read", "namespace": "mcp", "arguments": "{}"}
FIND_RESTORED = {"id": "tsc_u4", "type": "tool_search_call", "status": "completed", "call_id": "call_4", "execution": "client", "arguments": {}}
USAGE = {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3, "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}


def test_every_call_comes_back_as_the_client_declared_it() -> None:
    translator = restorer()
    out: list[Any] = []
    for event in [
        {"type": "response.created", "response": backend_response("in_progress")},
        {"type": "response.in_progress", "response": backend_response("in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": RUN_ADDED},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc_u2", "delta": '{"input":'},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc_u2", "delta": '"print(1)"}'},
        {"type": "response.function_call_arguments.done", "output_index": 0, "item_id": "fc_u2", "arguments": '{"input":"print(1)"}'},
        {"type": "response.output_item.done", "output_index": 0, "item": RUN_DONE},
        {"type": "response.output_item.added", "output_index": 1, "item": {**READ, "status": "in_progress", "arguments": ""}},
        {"type": "response.function_call_arguments.done", "output_index": 1, "item_id": "fc_u3", "arguments": "{}", "name": "mcp__read"},
        {"type": "response.output_item.done", "output_index": 1, "item": READ},
        {"type": "response.output_item.added", "output_index": 2, "item": {**FIND, "status": "in_progress", "arguments": ""}},
        {"type": "response.output_item.done", "output_index": 2, "item": FIND},
        {"type": "response.output_item.added", "output_index": "x", "item": {"type": "message"}},
        {"type": "response.some_future_event", "output_index": 3},
    ]:
        out += translator.feed(event)
    in_progress = translator.response
    assert (in_progress["id"], in_progress["status"], in_progress["model"]) == ("resp_gw", "in_progress", "client-model")
    assert in_progress["output"] == [RUN_RESTORED, READ_RESTORED, FIND_RESTORED]
    out += translator.feed({"type": "response.completed", "response": backend_response("completed", [RUN_DONE, READ, FIND, "junk"], usage=USAGE)})
    where = {"item_id": "ctc_u2", "output_index": 0}
    assert readable(out) == [
        lifecycle("created", "in_progress"),
        lifecycle("in_progress", "in_progress"),
        item_added(0, {**RUN_RESTORED, "status": "in_progress", "input": ""}),
        {"type": "response.custom_tool_call_input.delta", **where, "delta": "print(1)"},
        {"type": "response.custom_tool_call_input.done", **where, "input": "print(1)"},
        item_done(0, RUN_RESTORED),
        item_added(1, {**READ_RESTORED, "status": "in_progress", "arguments": ""}),
        {"type": "response.function_call_arguments.done", "output_index": 1, "item_id": "fc_u3", "arguments": "{}", "name": "read"},
        item_done(1, READ_RESTORED),
        item_added(2, {**FIND_RESTORED, "status": "in_progress"}),
        item_done(2, FIND_RESTORED),
        {"type": "response.output_item.added", "output_index": "x", "item": {"type": "message"}},
        {"type": "response.some_future_event", "output_index": 3},
        lifecycle("completed", "completed", [RUN_RESTORED, READ_RESTORED, FIND_RESTORED, "junk"], usage=USAGE),
    ]
    final = out[-1]["response"]
    assert (final["id"], final["model"], final["created_at"], final["tool_choice"], final["previous_response_id"]) == (
        "resp_gw",
        "client-model",
        100,
        "auto",
        "resp_prev",
    )
    assert final["tools"] == [MCP, SEARCH]
    assert translator.conversions == [
        "custom run restored",
        "namespace mcp restored",
        "namespace mcp restored",
        "tool_search call restored",
        "tool arguments replaced with {}",
    ]
    assert translator.finish() == [] and translator.feed({"type": "response.in_progress"}) == []


def test_a_custom_call_without_an_arguments_done_gets_its_input_from_the_deltas() -> None:
    translator = restorer()
    out: list[Any] = []
    for event in [
        {"type": "response.created", "response": backend_response("in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": RUN_ADDED},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"input":"a"'},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": None},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "}"},
        {"type": "response.function_call_arguments.done", "output_index": 0},
        {"type": "response.output_item.done", "output_index": 0, "item": {**RUN_DONE, "arguments": '{"input":"a"}'}},
    ]:
        out += translator.feed(event)
    assert [(event["type"], event.get("delta", event.get("input"))) for event in readable(out)[2:]] == [
        ("response.custom_tool_call_input.delta", "a"),
        ("response.custom_tool_call_input.done", "a"),
        ("response.output_item.done", None),
    ]


def test_errors_then_an_end_without_a_terminal_event() -> None:
    translator = restorer()
    out: list[Any] = []
    for event in [
        {"type": "response.created", "response": backend_response("in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": READ},
        {"type": "response.output_item.done", "output_index": 0, "item": READ},
        {"type": "response.output_item.added", "output_index": 1, "item": RUN_ADDED},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_u2", "delta": '{"input":"a"}'},
        {"type": "error", "code": "context_length_exceeded", "message": "too long", "param": "input"},
        {"type": "error", "code": 5, "message": None, "param": 3},
        {"type": "error", "error": {"type": "x", "code": "c", "message": "m"}},
    ]:
        out += translator.feed(event)
    out += translator.finish()
    closed = "The upstream stream closed before a terminal event (response.completed)."
    assert readable(out) == [
        lifecycle("created", "in_progress"),
        item_added(0, READ_RESTORED),
        item_done(0, READ_RESTORED),
        item_added(1, {**RUN_RESTORED, "status": "in_progress", "input": ""}),
        {
            "type": "error",
            "code": "context_length_exceeded",
            "message": "too long",
            "param": "input",
            "error": {"type": "invalid_request_error", "code": "context_length_exceeded", "message": "too long", "param": "input"},
        },
        {
            "type": "error",
            "code": 5,
            "message": None,
            "param": 3,
            "error": {"type": "server_error", "code": None, "message": "The upstream reported an error.", "param": None},
        },
        {"type": "error", "error": {"type": "x", "code": "c", "message": "m"}},
        {"type": "error", "code": "server_error", "message": closed, "param": None, "error": {"type": "server_error", "code": "server_error", "message": closed, "param": None}},
        lifecycle("failed", "failed", [READ_RESTORED], error={"code": "server_error", "message": closed}),
    ]
    assert translator.finish() == [] and translator.fail("again") == []


def test_a_failure_before_the_backend_said_anything() -> None:
    failed = readable(restorer().fail("boom", code="timeout"))
    assert failed == [
        lifecycle("created", "in_progress"),
        {"type": "error", "code": "timeout", "message": "boom", "param": None, "error": {"type": "server_error", "code": "timeout", "message": "boom", "param": None}},
        lifecycle("failed", "failed", error={"code": "timeout", "message": "boom"}),
    ]
    assert readable(restorer().fail("boom"))[-1] == lifecycle("failed", "failed", error={"code": "server_error", "message": "boom"})


def test_a_whole_answer_is_restored_under_the_clients_model() -> None:
    for model in ("client-model", None):
        translator = restorer(model)
        whole = translator.translate_whole(backend_response("completed", [RUN_DONE, 7]))
        assert (whole["id"], whole["model"], whole["created_at"], whole["output"]) == ("resp_gw", "client-model", 100, [RUN_RESTORED, 7])
        assert (whole["tools"], whole["tool_choice"], whole["previous_response_id"]) == ([MCP, SEARCH], "auto", "resp_prev")
        assert translator.conversions == ["custom run restored", "namespace mcp restored"]
    assert restorer(None).fail("boom")[-1]["response"]["model"] == "client-model"
