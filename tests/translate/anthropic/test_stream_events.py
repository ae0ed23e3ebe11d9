"""``MessagesStreamTranslator``, event by event: Messages streams written out, and every
Responses event a client reads from them (``tests.translate.streams.readable``), in order.

Each stream is also read by the openai SDK's strict accumulator, whose final Response
must be the terminal event's.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.messages_upstream import Answer, Said, Use, answer_events, whole_message
from tests.translate.streams import (
    BEGUN,
    custom_call,
    custom_call_events,
    error_event,
    function_call,
    function_call_events,
    item_added,
    item_done,
    lifecycle,
    message,
    message_events,
    readable,
    readable_response,
    reasoning_events,
    reasoning_text,
)

from .test_stream import STRICT_TOOL, machine, run, sdk_final_response

JSON = dict[str, Any]


def start(index: int, block: JSON) -> JSON:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, value: JSON) -> JSON:
    return {"type": "content_block_delta", "index": index, "delta": value}


def stop(index: int) -> JSON:
    return {"type": "content_block_stop", "index": index}


def stop_reason(reason: str | None, **usage: int) -> JSON:
    return {"type": "message_delta", "delta": {"stop_reason": reason}, "usage": usage}


def usage(input_tokens: int, output_tokens: int, cached: int = 0, written: int = 0) -> JSON:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def search_call(item_id: str, status: str, **action: Any) -> JSON:
    return {"id": item_id, "type": "web_search_call", "status": status, "action": {"type": "search", **action}}


def search_events(index: int, done: JSON) -> list[JSON]:
    return [item_added(index, search_call(done["id"], "in_progress")), item_done(index, done)]


# ---------------------------------------------------------------- a whole answer

EVERY_KIND = [
    {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1}}},
    {"type": "ping"},
    start(0, {"type": "thinking", "thinking": "", "signature": ""}),
    delta(0, {"type": "thinking_delta", "thinking": "Plan"}),
    delta(0, {"type": "thinking_delta", "thinking": ""}),
    delta(0, {"type": "thinking_delta", "thinking": " it."}),
    delta(0, {"type": "signature_delta", "signature": "sig"}),
    delta(0, {"type": "signature_delta", "signature": "ned"}),
    stop(0),
    start(1, {"type": "text", "text": "Hi "}),
    delta(1, {"type": "text_delta", "text": "there."}),
    stop(1),
    start(2, {"type": "tool_use", "id": "toolu_1", "name": "exec_command", "input": {}}),
    delta(2, {"type": "input_json_delta", "partial_json": ""}),
    delta(2, {"type": "input_json_delta", "partial_json": '{"cmd":'}),
    delta(2, {"type": "input_json_delta", "partial_json": '"ls"}'}),
    stop(2),
    start(3, {"type": "tool_use", "id": "toolu_2", "name": "apply_patch", "input": {}}),
    delta(3, {"type": "input_json_delta", "partial_json": '{"input":"*** Begin Patch\\n"}'}),
    stop(3),
    # Whole inputs at the start and no deltas, as some compatible backends send them.
    start(4, {"type": "tool_use", "id": "toolu_3", "name": "tool_search", "input": {"query": "agents"}}),
    stop(4),
    start(5, {"type": "tool_use", "id": "toolu_4", "name": "exec_command", "input": {"cmd": "pwd"}}),
    stop(5),
    start(6, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "sse"}}),
    stop(6),
    start(7, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{"type": "web_search_result", "url": "https://a.example", "title": "A"}, {"type": "web_search_result"}, "junk"]}),
    stop(7),
    start(8, {"type": "text", "text": ""}),
    delta(8, {"type": "text_delta", "text": "Done."}),
    stop(8),
    stop_reason("tool_use", output_tokens=42),
    {"type": "message_stop"},
]
THOUGHT = {
    "id": "rs#1",
    "type": "reasoning",
    "status": "completed",
    "summary": [],
    "content": [reasoning_text("Plan it.")],
    "encrypted_content": {"sealed": [{"type": "thinking", "thinking": "Plan it.", "signature": "signed"}]},
}
EVERY_KIND_OUTPUT = [
    THOUGHT,
    message("msg#1", "Hi there."),
    function_call("fc#1", "toolu_1", "exec_command", '{"cmd":"ls"}'),
    custom_call("ctc#1", "toolu_2", "apply_patch", "*** Begin Patch\n"),
    {"id": "tsc#1", "type": "tool_search_call", "status": "completed", "call_id": "toolu_3", "execution": "client", "arguments": {"query": "agents"}},
    function_call("fc#2", "toolu_4", "exec_command", '{"cmd":"pwd"}'),
    search_call("ws#1", "completed", query="sse", sources=[{"type": "url", "url": "https://a.example"}]),
    message("msg#2", "Done."),
]


def test_every_kind_of_block_in_one_answer() -> None:
    out, response = run(EVERY_KIND)
    assert readable(out) == [
        *BEGUN,
        *reasoning_events(THOUGHT, 0, ["Plan", " it."]),
        *message_events("msg#1", 1, ["Hi ", "there."]),
        *function_call_events(EVERY_KIND_OUTPUT[2], 2, ['{"cmd":', '"ls"}']),
        *custom_call_events(EVERY_KIND_OUTPUT[3], 3, ["*** Begin Patch\n"]),
        item_added(4, {**EVERY_KIND_OUTPUT[4], "status": "in_progress", "arguments": {}}),
        item_done(4, EVERY_KIND_OUTPUT[4]),
        *function_call_events(EVERY_KIND_OUTPUT[5], 5, ['{"cmd":"pwd"}']),
        *search_events(6, EVERY_KIND_OUTPUT[6]),
        *message_events("msg#2", 7, ["Done."]),
        lifecycle("completed", "completed", EVERY_KIND_OUTPUT, usage=usage(15, 42, cached=5)),
    ]
    assert readable_response(response)["output"] == EVERY_KIND_OUTPUT
    sdk_final_response(out)


def test_redacted_thinking_a_failed_search_and_blocks_without_an_equivalent() -> None:
    translator = machine()
    out = translator.start()
    for event in [
        start(0, {"type": "redacted_thinking", "data": "RD"}),
        stop(0),
        start(1, {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}),
        delta(1, {"type": "input_json_delta", "partial_json": '{"query": "q"}'}),
        stop(1),
        start(2, {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": {"type": "web_search_tool_result_error", "error_code": "unavailable"}}),
        stop(2),
        start(3, {"type": "web_search_tool_result", "tool_use_id": "srv_9", "content": []}),
        stop(3),
        start(4, {"type": "mcp_tool_use", "id": "m1"}),
        stop(4),
        start(5, {"type": "server_tool_use", "id": "srv_2", "name": "code_execution", "input": {}}),
        stop(5),
        stop_reason("end_turn", output_tokens=3),
    ]:
        out += translator.feed(event)
    out += translator.finish()
    redacted = {
        "id": "rs#1",
        "type": "reasoning",
        "status": "completed",
        "summary": [],
        "content": [],
        "encrypted_content": {"sealed": [{"type": "redacted_thinking", "data": "RD"}]},
    }
    failed_search = search_call("ws#1", "failed", query="q")
    assert readable(out) == [
        *BEGUN,
        item_added(0, {"id": "rs#1", "type": "reasoning", "status": "in_progress", "summary": [], "content": []}),
        item_done(0, redacted),
        *search_events(1, failed_search),
        lifecycle("completed", "completed", [redacted, failed_search], usage=usage(0, 3)),
    ]
    assert translator.conversions == [
        "web_search_tool_result without its search dropped",
        "mcp_tool_use block dropped",
        "server_tool_use block dropped",
    ]
    sdk_final_response(out)


def test_a_search_and_its_result_without_ids_are_matched_as_they_come() -> None:
    """A server that leaves out the search's id leaves out the result's ``tool_use_id``
    too: the result is the live search's, as it would be with both ids given."""
    translator = machine()
    out = translator.start()
    for event in [
        start(0, {"type": "server_tool_use", "name": "web_search", "input": {"query": "q"}}),
        stop(0),
        start(1, {"type": "web_search_tool_result", "content": {"type": "web_search_tool_result_error", "error_code": "unavailable"}}),
        stop(1),
        stop_reason("end_turn", output_tokens=3),
    ]:
        out += translator.feed(event)
    out += translator.finish()
    failed_search = search_call("ws#1", "failed", query="q")
    assert readable(out) == [
        *BEGUN,
        *search_events(0, failed_search),
        lifecycle("completed", "completed", [failed_search], usage=usage(0, 3)),
    ]
    assert translator.conversions == []


def test_a_result_naming_another_search_is_not_the_live_search_s() -> None:
    """Only the result whose ``tool_use_id`` is the live search's id ends it: another
    search's result is dropped, and the live search waits for its own."""
    translator = machine()
    out = translator.start()
    for event in [
        start(0, {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "q"}}),
        stop(0),
        start(1, {"type": "web_search_tool_result", "tool_use_id": "srv_2", "content": [{"url": "https://b.example"}]}),
        stop(1),
        start(2, {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": [{"url": "https://a.example"}]}),
        stop(2),
        stop_reason("end_turn", output_tokens=3),
    ]:
        out += translator.feed(event)
    out += translator.finish()
    searched = search_call("ws#1", "completed", query="q", sources=[{"type": "url", "url": "https://a.example"}])
    assert readable(out) == [
        *BEGUN,
        *search_events(0, searched),
        lifecycle("completed", "completed", [searched], usage=usage(0, 3)),
    ]
    assert translator.conversions == ["web_search_tool_result without its search dropped"]


def test_a_search_whose_query_is_not_an_object_has_none() -> None:
    _, response = run(
        [
            start(0, {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}),
            delta(0, {"type": "input_json_delta", "partial_json": '["q"]'}),
            start(1, {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []}),
            start(2, {"type": "server_tool_use", "id": "srv_2", "name": "web_search", "input": {}}),
            delta(2, {"type": "input_json_delta", "partial_json": '{"query": '}),
            start(3, {"type": "web_search_tool_result", "tool_use_id": "srv_2", "content": []}),
            start(4, {"type": "server_tool_use", "id": "srv_3", "name": "web_search", "input": {}}),
            start(5, {"type": "web_search_tool_result", "tool_use_id": "srv_3", "content": []}),
            stop_reason("end_turn"),
        ]
    )
    assert readable_response(response)["output"] == [
        search_call("ws#1", "completed"),
        search_call("ws#2", "completed"),
        search_call("ws#3", "completed"),
    ]


# ---------------------------------------------------------------- how it ends


def test_max_tokens_ends_the_open_message_incomplete() -> None:
    out, _ = run(
        [
            {"type": "message_start", "message": {"usage": {"input_tokens": 4}}},
            start(0, {"type": "text", "text": ""}),
            delta(0, {"type": "text_delta", "text": "Long"}),
            delta(0, {"type": "text_delta", "text": ""}),
            delta(0, {"type": "text_delta"}),
            stop_reason("max_tokens", output_tokens=9),
            stop_reason(None, output_tokens=10),  # a later delta without a reason keeps the reason
        ]
    )
    cut = message("msg#1", "Long", "incomplete")
    assert readable(out) == [
        *BEGUN,
        *message_events("msg#1", 0, ["Long"], "incomplete"),
        lifecycle("incomplete", "incomplete", [cut], usage=usage(4, 10), incomplete_details={"reason": "max_output_tokens"}),
    ]


def test_an_error_event_keeps_the_items_done_and_drops_the_open_one() -> None:
    call = function_call("fc#1", "toolu_1", "exec_command", "{}")
    translator = machine()
    out = translator.start()
    for event in [
        {"type": "message_start", "message": {"usage": {"input_tokens": 7, "output_tokens": 1}}},
        start(0, {"type": "tool_use", "id": "toolu_1", "name": "exec_command", "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": "{}"}),
        stop(0),
        start(1, {"type": "text", "text": "par"}),
    ]:
        out += translator.feed(event)
    out += translator.feed({"type": "error"})
    assert translator.feed(start(2, {"type": "text", "text": "late"})) == []
    assert translator.fail("again") == [] and translator.finish() == []
    failure = "The upstream reported an error."
    assert readable(out) == [
        *BEGUN,
        *function_call_events(call, 0, ["{}"]),
        item_added(1, {"id": "msg#1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}),
        {"type": "response.content_part.added", "item_id": "msg#1", "output_index": 1, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}},
        {"type": "response.output_text.delta", "item_id": "msg#1", "output_index": 1, "content_index": 0, "delta": "par", "logprobs": []},
        error_event(failure),
        lifecycle("failed", "failed", [call], usage=usage(7, 1), error={"code": "server_error", "message": failure}),
    ]


def test_a_call_whose_stop_never_came_is_left_out_when_the_stream_fails() -> None:
    out, response = run(
        [
            start(0, {"type": "tool_use", "id": "toolu_1", "name": "exec_command", "input": {"cmd": "ls"}}),
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ]
    )
    assert response["output"] == [] and response["error"] == {"code": "server_error", "message": "Overloaded"}
    assert [event["type"] for event in out][2:] == ["response.output_item.added", "error", "response.failed"]


def test_fail_after_start_writes_the_error_and_the_failed_response() -> None:
    translator = machine()
    translator.start()
    before = translator.response
    assert (before["status"], before["output"], before["id"]) == ("in_progress", [], "resp_1")
    translator.feed(start(0, {"type": "text", "text": "x"}))
    failed = translator.fail("cut", code="timeout")
    assert readable(failed) == [
        error_event("cut", "timeout"),
        lifecycle("failed", "failed", [], error={"code": "timeout", "message": "cut"}),
    ]
    assert translator.fail("again") == []
    default = machine()
    assert readable(default.fail("boom"))[-2:] == [
        error_event("boom"),
        lifecycle("failed", "failed", [], error={"code": "server_error", "message": "boom"}),
    ]


# ---------------------------------------------------------------- whole messages


def test_a_whole_message_with_every_kind_of_block() -> None:
    whole = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Plan it.", "signature": "signed"},
            {"type": "text", "text": "Hi there."},
            {"type": "text"},
            {"type": "tool_use", "id": "toolu_1", "name": "exec_command", "input": {"cmd": "ls"}},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "sse"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{"type": "web_search_result", "url": "https://a.example"}]},
            {"type": "thinking", "signature": ""},
            "not a block",
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 42},
    }
    response = readable_response(machine().translate_whole(whole))
    assert response["status"] == "completed"
    assert response["usage"] == usage(15, 42, cached=5)
    assert response["output"] == [
        THOUGHT,
        message("msg#1", "Hi there."),
        function_call("fc#1", "toolu_1", "exec_command", '{"cmd":"ls"}'),
        search_call("ws#1", "completed", query="sse", sources=[{"type": "url", "url": "https://a.example"}]),
        {
            "id": "rs#2",
            "type": "reasoning",
            "status": "completed",
            "summary": [],
            "content": [reasoning_text("")],
            "encrypted_content": {"sealed": [{"type": "thinking", "thinking": ""}]},
        },
    ]


def test_a_whole_message_without_a_stop_reason_keeps_what_it_says() -> None:
    whole = {"type": "message", "content": [{"type": "text", "text": "x"}], "usage": {"input_tokens": 3, "output_tokens": 1}}
    response = machine().translate_whole(whole)
    assert (response["status"], response["usage"]) == ("completed", usage(3, 1))
    empty = machine().translate_whole({"type": "message", "content": "none", "usage": {"input_tokens": 3}})
    assert (empty["status"], empty["usage"], empty["error"]["message"]) == (
        "failed",
        usage(3, 0),
        "upstream stream ended without a finish reason",
    )


def test_a_whole_error_body_is_a_failed_response_with_its_message() -> None:
    response = machine().translate_whole({"type": "error", "error": {"type": "api_error", "message": "Boom"}})
    assert (response["status"], response["output"], response["error"]) == ("failed", [], {"code": "server_error", "message": "Boom"})


@pytest.mark.parametrize(
    ("reason", "status"),
    [("model_context_window_exceeded", "incomplete"), ("refusal", "incomplete"), ("a_future_reason", "completed")],
)
def test_stop_reasons_unknown_to_responses(reason: str, status: str) -> None:
    response = machine().translate_whole({"type": "message", "content": [{"type": "text", "text": "x"}], "stop_reason": reason})
    assert response["status"] == status


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ({"input_tokens": 1, "output_tokens": 1, "cache_read_input_tokens": 1, "cache_creation_input_tokens": 1}, usage(3, 1, cached=1, written=1)),
        ({"input_tokens": True, "output_tokens": -5, "cache_read_input_tokens": 2.5, "cache_creation_input_tokens": "7"}, usage(2, 0, cached=2)),
        # orjson reads 2**64 - 1 as an integer, 2**64 as a float: each count is clamped, so the sums can be written
        ({"input_tokens": 2**64 - 1, "output_tokens": 1.8446744073709552e19, "cache_read_input_tokens": 2**64 - 1,
          "cache_creation_input_tokens": 2**64 - 1}, usage(3 * 10**12, 10**12, cached=10**12, written=10**12)),
    ],
)
def test_usage_counts_are_bounded_whole_numbers(counts: JSON, expected: JSON) -> None:
    response = machine().translate_whole({"type": "message", "content": [{"type": "text", "text": "x"}], "stop_reason": "end_turn", "usage": counts})
    assert response["usage"] == expected


def test_blocks_that_start_whole_and_never_stop() -> None:
    """Some compatible backends send a block's content at its start and no stops: each
    block's start closes the one before."""
    translator = machine()
    out = translator.start()
    for event in [
        start(0, {"type": "thinking", "thinking": "whole", "signature": "sig"}),
        start(1, {"type": "text", "text": "a"}),
        delta(1, {"type": "signature_delta", "signature": "x"}),
        delta(1, "junk"),
        start(2, {"type": "tool_use", "name": "exec_command"}),
        delta(2, {"type": "text_delta", "text": "t"}),
        start(3, {"type": "redacted_thinking"}),
        start(4, {"type": "tool_use", "id": 5, "input": {}}),
        start(5, {"type": "server_tool_use", "id": "s1", "name": "web_search"}),
        start(6, {"type": "text", "text": "b"}),
        stop_reason("end_turn"),
    ]:
        out += translator.feed(event)
    out += translator.finish(completed_at=5)
    thought = {
        "id": "rs#1",
        "type": "reasoning",
        "status": "completed",
        "summary": [],
        "content": [reasoning_text("whole")],
        "encrypted_content": {"sealed": [{"type": "thinking", "thinking": "whole", "signature": "sig"}]},
    }
    redacted = {
        "id": "rs#2",
        "type": "reasoning",
        "status": "completed",
        "summary": [],
        "content": [],
        "encrypted_content": {"sealed": [{"type": "redacted_thinking", "data": ""}]},
    }
    named = function_call("fc#1", "call#1", "exec_command", "{}")
    unnamed = function_call("fc#2", "call#2", "unnamed_tool", "{}")
    output = [thought, message("msg#1", "a"), named, redacted, unnamed, search_call("ws#1", "completed"), message("msg#2", "b")]
    assert readable(out) == [
        *BEGUN,
        *reasoning_events(thought, 0, ["whole"]),
        *message_events("msg#1", 1, ["a"]),
        *function_call_events(named, 2, ["{}"]),
        item_added(3, {"id": "rs#2", "type": "reasoning", "status": "in_progress", "summary": [], "content": []}),
        item_done(3, redacted),
        *function_call_events(unnamed, 4, ["{}"]),
        *search_events(5, output[5]),
        *message_events("msg#2", 6, ["b"]),
        lifecycle("completed", "completed", output),
    ]
    assert translator.response["completed_at"] == 5 and translator.conversions == []


def test_a_strict_call_cut_off_while_open_is_passed_as_written() -> None:
    _, response = run(
        [
            start(0, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}),
            delta(0, {"type": "input_json_delta", "partial_json": '{"city": "Par'}),
            stop_reason("max_tokens"),
        ],
        tools=[STRICT_TOOL],
    )
    assert readable_response(response)["output"] == [function_call("fc#1", "toolu_1", "get_weather", '{"city": "Par', "incomplete")]


def test_a_call_that_stopped_before_an_error_is_kept() -> None:
    _, response = run(
        [
            start(0, {"type": "tool_use", "id": "toolu_1", "name": "exec_command", "input": {}}),
            delta(0, {"type": "input_json_delta", "partial_json": "{}"}),
            stop(0),
            {"type": "error", "error": {"message": "Overloaded"}},
        ]
    )
    assert readable_response(response)["output"] == [function_call("fc#1", "toolu_1", "exec_command", "{}")]


def test_a_whole_message_that_says_nothing() -> None:
    unknown = machine().translate_whole({"type": "message", "content": [], "stop_reason": "a_future_reason"})
    assert unknown["error"] == {"code": "server_error", "message": "upstream stream ended with finish reason 'a_future_reason' and no output"}
    empty = machine().translate_whole({"type": "message", "content": None, "stop_reason": "end_turn"})
    assert (empty["status"], empty["output"]) == ("completed", [])


def test_a_whole_message_with_empty_inputs_reads_as_its_stream() -> None:
    answer = Answer([Use("apply_patch", {}), Use("exec_command", {}), Use("tool_search", {}), Said("done")])
    _, streamed = run(answer_events(answer, message_id="msg_0001", model="claude", usage={"input_tokens": 1}))
    whole = machine().translate_whole(whole_message(answer, message_id="msg_0001", model="claude", usage={"input_tokens": 1}))
    assert readable_response(whole)["output"] == readable_response(streamed)["output"]
