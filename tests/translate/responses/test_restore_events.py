"""``ResponsesStreamRestorer``, event by event: a V1 backend's stream written out, and every
event the client reads from it (``tests.translate.streams.readable``), in order; the
failures the restorer writes itself; a whole answer.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState

from tests.translate.sdk import sdk_event, without_parsed
from tests.translate.streams import item_added, item_done, lifecycle, readable
from toolwire.protocol import WholeAnswer, parse_request
from toolwire.translate import (
    WHOLE_ANSWER_STREAMED,
    ResponsesCapabilities,
    ResponsesStreamRestorer,
    downgrade_request,
)

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
USAGE_MADE_WHOLE = {**USAGE, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}}
"""``USAGE`` with the count the specification requires and the backend left out (strict clients refuse it without)."""


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
        {"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_u3", "delta": "{}", "name": "mcp__read"},
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
        {"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_u3", "delta": "{}", "name": "read"},
        {"type": "response.function_call_arguments.done", "output_index": 1, "item_id": "fc_u3", "arguments": "{}", "name": "read"},
        item_done(1, READ_RESTORED),
        item_added(2, {**FIND_RESTORED, "status": "in_progress"}),
        item_done(2, FIND_RESTORED),
        {"type": "response.output_item.added", "output_index": "x", "item": {"type": "message"}},
        {"type": "response.some_future_event", "output_index": 3},
        lifecycle("completed", "completed", [RUN_RESTORED, READ_RESTORED, FIND_RESTORED, "junk"], usage=USAGE_MADE_WHOLE),
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


def restorer_for(body: JSON, caps: ResponsesCapabilities, model: str | None = None) -> ResponsesStreamRestorer:
    downgraded = downgrade_request(parse_request(orjson.dumps(body)), caps)
    return ResponsesStreamRestorer(downgraded, response_id="resp_gw", created_at=7, model=model)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def test_a_restored_calls_id_comes_from_the_backends_or_from_its_call_id() -> None:
    run = {key: value for key, value in RUN_DONE.items() if key != "id"}
    output = [
        {**run, "id": "fc_", "call_id": "c1"},
        {**run, "id": "abcd", "call_id": "c2"},
        {**run, "id": "fc u/2", "call_id": "c3"},
        {**run, "call_id": "c4"},
        {**run, "id": "", "call_id": "c5"},
        {key: value for key, value in FIND.items() if key != "id"},
    ]
    whole = restorer().translate_whole(backend_response("completed", output))
    assert [(item["id"], item["call_id"]) for item in whole["output"]] == [
        ("ctc_fc_", "c1"),
        ("ctc_abcd", "c2"),
        (f"ctc_{sha('fc u/2')}", "c3"),
        (f"ctc_{sha('c4')}", "c4"),
        (f"ctc_{sha('c5')}", "c5"),
        (f"tsc_{sha('call_4')}", "call_4"),
    ]


def test_a_backend_with_namespaces_gets_each_namespaces_custom_tool_back() -> None:
    body = {
        "model": "client-model",
        "input": "hi",
        "tools": [
            {"type": "namespace", "name": ns, "description": "", "tools": [{"type": "custom", "name": "run"}]}
            for ns in ("mcp", "fs")
        ],
    }
    translator = restorer_for(body, ResponsesCapabilities(supports_namespaces=True))
    calls = [
        {"id": f"fc_{ns}", "type": "function_call", "status": "completed", "call_id": f"call_{ns}", "namespace": ns, "name": "run", "arguments": f'{{"input":"{ns}"}}'}
        for ns in ("mcp", "fs")
    ]
    whole = translator.translate_whole(backend_response("completed", calls))
    assert whole["output"] == [
        {"id": f"ctc_{ns}", "type": "custom_tool_call", "status": "completed", "call_id": f"call_{ns}", "name": "run", "namespace": ns, "input": ns}
        for ns in ("mcp", "fs")
    ]
    assert translator.conversions == ["custom run restored", "custom run restored"]


def test_items_that_are_no_calls_or_need_no_restoring_pass_untouched() -> None:
    mcp_call = {"id": "mcp_1", "type": "mcp_call", "server_label": "s", "name": "read", "arguments": "{}", "output": "x"}
    search_without_arguments = {key: value for key, value in FIND.items() if key != "arguments"}
    read_with_null_namespace = {**READ, "namespace": None}
    run_with_odd_arguments = {**RUN_DONE, "arguments": 5}
    translator = restorer()
    whole = translator.translate_whole(
        backend_response("completed", [mcp_call, search_without_arguments, read_with_null_namespace, run_with_odd_arguments])
    )
    assert whole["output"] == [
        mcp_call,
        FIND_RESTORED,
        READ_RESTORED,
        {**RUN_RESTORED, "input": ""},
    ]
    assert translator.conversions == [
        "tool_search call restored",
        "namespace mcp restored",
        "custom run restored",
        "namespace mcp restored",
    ]


def test_the_response_before_and_after_the_backends_lifecycle_events() -> None:
    translator = restorer()
    before = translator.response
    assert (before["id"], before["status"], before["output"], before["created_at"]) == ("resp_gw", "in_progress", [], 7)
    translator.feed({"type": "response.created", "response": backend_response("in_progress")})
    assert (translator.response["created_at"], translator.response["status"]) == (100, "in_progress")
    translator.feed({"type": "response.output_item.added", "output_index": 0, "item": READ})
    translator.feed({"type": "response.output_item.done", "output_index": 0, "item": READ})
    translator.feed({"type": "response.output_item.done", "output_index": "x", "item": {"type": "message"}})
    assert translator.response["output"] == [READ_RESTORED]
    completed = {key: value for key, value in backend_response("completed").items() if key != "output"}
    final = translator.feed({"type": "response.completed", "response": completed})[-1]["response"]
    assert (final["status"], final["created_at"], final["output"]) == ("completed", 100, [READ_RESTORED])


def test_custom_call_input_comes_from_the_arguments_done_the_deltas_or_the_done_item() -> None:
    translator = restorer()
    out: list[Any] = []
    for event in [
        {"type": "response.created", "response": backend_response("in_progress")},
        # the whole arguments only in .done (no deltas), an unrelated event before the item's end
        {"type": "response.output_item.added", "output_index": 0, "item": RUN_ADDED},
        {"type": "response.function_call_arguments.done", "output_index": 0, "arguments": '{"input":"print(1)"}'},
        {"type": "response.some_future_event", "output_index": 0},
        {"type": "response.output_item.done", "output_index": 0, "item": RUN_DONE},
        # deltas split inside the string, a .done without its arguments
        {"type": "response.output_item.added", "output_index": 1, "item": {**RUN_ADDED, "id": "fc_b"}},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"input":"pri'},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": 'nt(2)"}'},
        {"type": "response.function_call_arguments.done", "output_index": 1},
        {"type": "response.output_item.done", "output_index": 1, "item": {**RUN_DONE, "id": "fc_b", "arguments": '{"input":"print(2)"}'}},
        # no arguments events at all: the input comes from the done item
        {"type": "response.output_item.added", "output_index": 2, "item": {**RUN_ADDED, "id": "fc_c"}},
        {"type": "response.output_item.done", "output_index": 2, "item": {**RUN_DONE, "id": "fc_c", "arguments": '{"input":"print(3)"}'}},
        # a tool search's arguments events are the restored call's business: none reach the client
        {"type": "response.output_item.added", "output_index": 3, "item": {**FIND, "status": "in_progress", "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "output_index": 3, "delta": "{}"},
        {"type": "response.function_call_arguments.done", "output_index": 3, "arguments": "{}"},
        {"type": "response.output_item.done", "output_index": 3, "item": {**FIND, "arguments": "{}"}},
    ]:
        out += translator.feed(event)
    assert [(event["type"], event.get("output_index"), event.get("delta", event.get("input"))) for event in readable(out)[1:]] == [
        ("response.output_item.added", 0, None),
        ("response.custom_tool_call_input.delta", 0, "print(1)"),
        ("response.custom_tool_call_input.done", 0, "print(1)"),
        ("response.some_future_event", 0, None),
        ("response.output_item.done", 0, None),
        ("response.output_item.added", 1, None),
        ("response.custom_tool_call_input.delta", 1, "print(2)"),
        ("response.custom_tool_call_input.done", 1, "print(2)"),
        ("response.output_item.done", 1, None),
        ("response.output_item.added", 2, None),
        ("response.custom_tool_call_input.delta", 2, "print(3)"),
        ("response.custom_tool_call_input.done", 2, "print(3)"),
        ("response.output_item.done", 2, None),
        ("response.output_item.added", 3, None),
        ("response.output_item.done", 3, None),
    ]


def test_a_raw_custom_input_is_noted_once_and_odd_arguments_events_pass() -> None:
    translator = restorer()
    out: list[Any] = []
    whole = {**RUN_DONE, "arguments": "print(4)"}
    for event in [
        {"type": "response.created", "response": backend_response("in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": {**whole, "status": "in_progress"}},
        {"type": "response.function_call_arguments.done", "output_index": 0, "arguments": "print(4)"},
        {"type": "response.output_item.done", "output_index": 0, "item": whole},
        # a plain function's .done without a name, one naming a custom tool at an unknown
        # index, and one whose index is no number: all relayed as they are
        {"type": "response.function_call_arguments.done", "output_index": 5, "item_id": "fc_u3", "arguments": "{}"},
        {"type": "response.function_call_arguments.done", "output_index": 6, "item_id": "fc_u9", "arguments": "{}", "name": "mcp__run"},
        {"type": "response.function_call_arguments.delta", "output_index": [0], "item_id": "fc_u9", "delta": "{"},
    ]:
        out += translator.feed(event)
    assert [event.get("delta", event.get("input")) for event in out if event["type"].startswith("response.custom_tool_call_input")] == ["print(4)", "print(4)"]
    assert readable(out)[-3:] == [
        {"type": "response.function_call_arguments.done", "output_index": 5, "item_id": "fc_u3", "arguments": "{}"},
        {"type": "response.function_call_arguments.done", "output_index": 6, "item_id": "fc_u9", "arguments": "{}", "name": "mcp__run"},
        {"type": "response.function_call_arguments.delta", "output_index": [0], "item_id": "fc_u9", "delta": "{"},
    ]
    assert translator.conversions == ["custom run restored", "namespace mcp restored", "custom input was raw text"]


def test_the_restored_response_repeats_the_clients_request_and_model() -> None:
    body = {"model": "client-model", "input": "hi", "temperature": 0.3, "top_p": 0.5, "tools": [MCP]}
    translator = restorer_for(body, ResponsesCapabilities(), model="gateway-alias")
    whole = translator.translate_whole(backend_response("completed", [READ]))
    assert (whole["model"], whole["temperature"], whole["top_p"], whole["output"]) == ("gateway-alias", 0.3, 0.5, [READ_RESTORED])


def test_a_streamed_request_answered_with_a_whole_response_streams_it_restored() -> None:
    """A server that ignored ``stream`` and answered with a Response: read as a
    ``WholeAnswer``, it streams as created, each item added and done, and its terminal
    event, every call restored as the client declared it, the final Response the one
    ``translate_whole`` gives; an incomplete one ends ``response.incomplete``."""
    translator = restorer()
    said = {"id": "msg_u1", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": "Running it.", "annotations": []}]}
    answer = backend_response("completed", [said, RUN_DONE, READ], usage=USAGE)
    out = translator.feed(WholeAnswer(answer))
    run_at, read_at = {"item_id": "ctc_u2", "output_index": 1}, {"item_id": "fc_u3", "output_index": 2}
    assert readable(out) == [
        lifecycle("created", "in_progress"),
        item_added(0, said),
        item_done(0, said),
        item_added(1, {**RUN_RESTORED, "status": "in_progress", "input": ""}),
        {"type": "response.custom_tool_call_input.delta", **run_at, "delta": "print(1)"},
        {"type": "response.custom_tool_call_input.done", **run_at, "input": "print(1)"},
        item_done(1, RUN_RESTORED),
        item_added(2, {**READ_RESTORED, "status": "in_progress", "arguments": ""}),
        {"type": "response.function_call_arguments.delta", **read_at, "delta": "{}"},
        {"type": "response.function_call_arguments.done", **read_at, "arguments": "{}", "name": "read"},
        item_done(2, READ_RESTORED),
        lifecycle("completed", "completed", [said, RUN_RESTORED, READ_RESTORED], usage=USAGE_MADE_WHOLE),
    ]
    assert out[-1]["response"] == restorer().translate_whole(answer)
    state: ResponseStreamState[None] = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in out:  # what a strict client of the SDK makes of it
        state.handle_event(sdk_event(event))
    final = state._completed_response
    assert final is not None and without_parsed(final.to_dict()["output"]) == out[-1]["response"]["output"]
    assert WHOLE_ANSWER_STREAMED in translator.conversions and translator.finished
    cut_short = restorer().feed(WholeAnswer(backend_response("incomplete", [READ], incomplete_details={"reason": "max_output_tokens"})))
    assert readable(cut_short)[-1] == lifecycle("incomplete", "incomplete", [READ_RESTORED], incomplete_details={"reason": "max_output_tokens"})


def test_a_streamed_request_answered_with_a_whole_error_fails_with_its_message() -> None:
    failed = readable(restorer().feed(WholeAnswer({"error": {"message": "no such model", "code": "model_not_found"}})))
    assert failed[-1] == lifecycle("failed", "failed", error={"code": "model_not_found", "message": "no such model"})
    assert failed[0] == lifecycle("created", "in_progress")


def test_keep_alive_waits_for_the_backend_s_own_created() -> None:
    """Before the backend's ``response.created`` the restorer has begun nothing: a keep-alive
    says nothing (a ``response.in_progress`` first would break the stream's order); after
    it, ``response.in_progress`` under the gateway's id; after the end, nothing."""
    restoring = restorer()
    assert restoring.keep_alive() == []
    [created] = restoring.feed({"type": "response.created", "sequence_number": 0, "response": backend_response("in_progress")})
    done = restoring.feed({"type": "response.output_item.done", "output_index": 0, "item": READ})
    assert restoring.response["output"] == [READ_RESTORED]  # the items so far are not repeated in it:
    [beat] = restoring.keep_alive()
    assert (beat["type"], beat["sequence_number"]) == ("response.in_progress", 1 + len(done))
    assert beat["response"] == {**created["response"], "output": []}
    restoring.feed({"type": "response.completed", "sequence_number": 1, "response": backend_response("completed")})
    assert restoring.keep_alive() == []
