"""``ResponsesEventWriter``: the one writer of Responses stream events.

A stream written through it (as a translator of a new wire would write one) is checked
the way clients read it: each event valid for the official SDK in strict mode and
accepted by its stream accumulator, sequence numbers 0, 1, 2, ..., the terminal Response
carrying the output. Then each of its duties alone: ids, the stream's state, the three
ends, failures, relayed events and the Response object's echo of the request.
"""

from __future__ import annotations

from typing import Any

import pytest
from openai import omit
from openai._models import validate_type
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response

from toolwire.protocol import parse_request
from toolwire.translate import (
    ResponsesEventWriter,
    StreamEnd,
    StreamOutcome,
    StreamState,
    decide_stream_end,
)

from .sdk import sdk_event, strict_checkable, without_parsed

JSON = dict[str, Any]
BODY: JSON = {
    "model": "client-model",
    "input": "hi",
    "instructions": "Be brief.",
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    "metadata": {"run": "1"},
    "store": False,
}


def writer(response_id: str = "resp_w", body: JSON = BODY) -> ResponsesEventWriter:
    return ResponsesEventWriter(
        parse_request(body), response_id=response_id, created_at=1_750_000_000, model="served-as"
    )


def write_a_whole_answer(w: ResponsesEventWriter) -> list[JSON]:
    """Text, reasoning, a function call and a custom call, each item opened and closed,
    the way a translator of any wire writes them."""
    w.begin()
    output: list[JSON] = []

    index, item_id = w.new_output_index(), w.new_id("rs")
    w.item_added(index, {"id": item_id, "type": "reasoning", "status": "in_progress", "summary": [], "content": []})
    w.part_added(item_id, index, 0, {"type": "reasoning_text", "text": ""})
    w.reasoning_delta(item_id, index, "Think")
    w.reasoning_done(item_id, index, "Think")
    part = {"type": "reasoning_text", "text": "Think"}
    w.part_done(item_id, index, 0, part)
    output.append({"id": item_id, "type": "reasoning", "status": "completed", "summary": [], "content": [part]})
    w.item_done(index, output[-1])

    index, item_id = w.new_output_index(), w.new_id("msg")
    w.item_added(index, {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []})
    empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    w.part_added(item_id, index, 0, empty)
    w.text_delta(item_id, index, 0, "Hel")
    w.text_delta(item_id, index, 0, "lo")
    w.text_done(item_id, index, 0, "Hello")
    text = {"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}
    w.part_done(item_id, index, 0, text)
    w.part_added(item_id, index, 1, {"type": "refusal", "refusal": ""})
    w.refusal_delta(item_id, index, 1, "No.")
    w.refusal_done(item_id, index, 1, "No.")
    refusal = {"type": "refusal", "refusal": "No."}
    w.part_done(item_id, index, 1, refusal)
    output.append({"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": [text, refusal]})
    w.item_done(index, output[-1])

    index, item_id = w.new_output_index(), w.new_id("fc")
    call = {"id": item_id, "type": "function_call", "status": "in_progress", "call_id": "call_1", "name": "get_weather"}
    w.item_added(index, {**call, "arguments": ""})
    w.arguments_delta(item_id, index, '{"city":')
    w.arguments_delta(item_id, index, '"Paris"}')
    w.arguments_done(item_id, index, '{"city":"Paris"}', "get_weather")
    output.append({**call, "status": "completed", "arguments": '{"city":"Paris"}'})
    w.item_done(index, output[-1])

    index, item_id = w.new_output_index(), w.new_id("ctc")
    custom = {"id": item_id, "type": "custom_tool_call", "status": "in_progress", "call_id": "call_2", "name": "apply_patch"}
    w.item_added(index, {**custom, "input": ""})
    w.custom_input_delta(item_id, index, "*** Begin Patch\n")
    w.custom_input_done(item_id, index, "*** Begin Patch\n")
    output.append({**custom, "status": "completed", "input": "*** Begin Patch\n"})
    w.item_done(index, output[-1])

    w.end(decide_stream_end("stop", produced=True, ended_cleanly=True), output=output, usage=None)
    return [dict(event) for event in w.take()]


def test_a_stream_written_through_it_is_what_the_sdk_reads() -> None:
    w = writer()
    events = write_a_whole_answer(w)
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert [event["type"] for event in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1]["type"] == "response.completed"
    state: ResponseStreamState[None] = ResponseStreamState(input_tools=BODY["tools"], text_format=omit)
    for event in events:
        state.handle_event(sdk_event(event))
    final = state._completed_response
    assert final is not None
    assert without_parsed(final.to_dict()["output"]) == events[-1]["response"]["output"]
    assert all(type(event) is dict for event in events)  # the event is the dict, nothing more


def test_the_state_moves_once_each_way() -> None:
    w = writer()
    assert (w.state, w.final) == (StreamState.NOT_STARTED, None)
    w.begin()
    w.begin()
    assert w.state is StreamState.IN_PROGRESS
    assert [event["type"] for event in w.take()] == ["response.created", "response.in_progress"]
    assert w.take() == []
    final = w.end(StreamEnd(StreamOutcome.COMPLETED), output=[])
    assert w.state is StreamState.ENDED and w.final is final
    assert final["status"] == "completed" and final["completed_at"] == 1_750_000_000


def test_ids_are_fresh_reproducible_and_differ_between_responses() -> None:
    first, again, other = writer("resp_a"), writer("resp_a"), writer("resp_b")
    ids = [first.new_id("msg") for _ in range(3)]
    assert len(set(ids)) == 3 and all(i.startswith("msg_") and len(i) == 36 for i in ids)
    assert [again.new_id("msg") for _ in range(3)] == ids
    assert other.new_id("msg") not in ids
    assert len(first.new_id("call", length=24)) == len("call_") + 24
    assert [first.new_output_index() for _ in range(3)] == [0, 1, 2] and first.items_added == 3


@pytest.mark.parametrize(
    ("end", "terminal", "details"),
    [
        (StreamEnd(StreamOutcome.INCOMPLETE, incomplete_reason="max_output_tokens"), "response.incomplete", {"reason": "max_output_tokens"}),
        (StreamEnd(StreamOutcome.COMPLETED), "response.completed", None),
    ],
)
def test_completed_and_incomplete_ends(end: StreamEnd, terminal: str, details: JSON | None) -> None:
    w = writer()
    w.begin()
    w.take()
    usage = {
        "input_tokens": 1,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 2,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 3,
    }
    final = w.end(end, output=[], usage=usage, completed_at=1_750_000_009)
    (event,) = w.take()
    assert event["type"] == terminal and event["response"] is final
    assert (final["status"], final["usage"], final["incomplete_details"], final["error"]) == (
        end.outcome.value,
        usage,
        details,
        None,
    )
    assert final["completed_at"] == (1_750_000_009 if terminal == "response.completed" else None)
    validate_type(type_=Response, value=final)


@pytest.mark.parametrize(
    ("code", "error_type"),
    [("server_error", "server_error"), ("context_length_exceeded", "invalid_request_error")],
)
def test_a_failed_end_is_an_error_then_response_failed(code: str, error_type: str) -> None:
    w = writer()
    w.begin()
    w.take()
    w.end(StreamEnd(StreamOutcome.FAILED, code=code, message="It broke."), output=[])
    error, failed = (dict(event) for event in w.take())
    assert error == {
        "type": "error",
        "sequence_number": 2,
        "code": code,
        "message": "It broke.",
        "param": None,
        "error": {"type": error_type, "code": code, "message": "It broke.", "param": None},
    }
    assert failed["type"] == "response.failed" and failed["sequence_number"] == 3
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"] == {"code": code, "message": "It broke."}
    sdk_event(strict_checkable(failed))
    assert w.state is StreamState.ENDED


def test_fail_marks_the_response_it_is_given() -> None:
    w = writer()
    snapshot = {**w.response("in_progress", output=[]), "usage": {"total_tokens": 7}}
    final = w.fail(snapshot, "cut")
    assert final is snapshot and w.final is snapshot
    assert (snapshot["status"], snapshot["error"], snapshot["usage"]) == (
        "failed",
        {"code": "server_error", "message": "cut"},
        {"total_tokens": 7},
    )


def test_relayed_events_are_renumbered_and_move_the_state() -> None:
    w = writer()
    w.relay({"type": "response.created", "sequence_number": 17, "response": {"id": "up"}})
    assert w.state is StreamState.IN_PROGRESS
    w.relay({"type": "response.output_text.delta", "sequence_number": 40, "delta": "x", "extra": 1})
    w.relay({"type": "response.completed", "sequence_number": 41, "response": {"id": "up", "status": "completed"}})
    events = w.take()
    assert [event["sequence_number"] for event in events] == [0, 1, 2]
    assert dict(events[1]) == {"type": "response.output_text.delta", "sequence_number": 1, "delta": "x", "extra": 1}
    assert w.state is StreamState.ENDED and w.final == {"id": "up", "status": "completed"}


def test_the_response_object_repeats_the_request() -> None:
    response = writer().response("in_progress", output=[])
    assert (response["id"], response["object"], response["model"], response["status"]) == (
        "resp_w",
        "response",
        "served-as",
        "in_progress",
    )
    assert response["instructions"] == "Be brief." and response["metadata"] == {"run": "1"}
    # An echoed function tool has the fields the specification requires of it.
    assert response["tools"] == [{**BODY["tools"][0], "description": None, "strict": True}]
    assert response["store"] is False
    assert response["tool_choice"] == "auto" and response["parallel_tool_calls"] is True
    validate_type(type_=Response, value=response)
