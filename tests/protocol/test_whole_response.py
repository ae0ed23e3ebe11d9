"""``response_as_events``: a whole Response (or an error object in its place) as the events a
stream would have carried it in, event for event."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.protocol import response_as_events

JSON = dict[str, Any]

MESSAGE: JSON = {
    "id": "msg_1",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
}
FUNCTION_CALL: JSON = {
    "id": "fc_1",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_1",
    "name": "exec_command",
    "arguments": '{"cmd": "ls"}',
}
CUSTOM_CALL: JSON = {
    "id": "ctc_1",
    "type": "custom_tool_call",
    "status": "completed",
    "call_id": "call_2",
    "name": "apply_patch",
    "input": "*** Begin Patch\n*** End Patch\n",
}
USAGE: JSON = {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}


def response(**fields: Any) -> JSON:
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "m",
        "output": [MESSAGE],
        "usage": USAGE,
        "error": None,
        "incomplete_details": None,
        **fields,
    }


def opening(answer: JSON) -> JSON:
    """What ``response.created`` carries: the Response before any of its output."""
    return {**answer, "status": "in_progress", "output": [], "usage": None, "error": None, "incomplete_details": None}


def test_each_item_is_added_and_done_and_calls_carry_their_payload_once() -> None:
    answer = response(output=[MESSAGE, "not an item", FUNCTION_CALL, CUSTOM_CALL], incomplete_details={"x": 1})
    call_at = {"output_index": 1, "item_id": "fc_1"}
    custom_at = {"output_index": 2, "item_id": "ctc_1"}
    assert response_as_events(answer) == [
        {"type": "response.created", "response": opening(answer)},
        {"type": "response.output_item.added", "output_index": 0, "item": MESSAGE},
        {"type": "response.output_item.done", "output_index": 0, "item": MESSAGE},
        {"type": "response.output_item.added", "output_index": 1, "item": {**FUNCTION_CALL, "status": "in_progress", "arguments": ""}},
        {"type": "response.function_call_arguments.delta", **call_at, "delta": '{"cmd": "ls"}'},
        {"type": "response.function_call_arguments.done", **call_at, "arguments": '{"cmd": "ls"}', "name": "exec_command"},
        {"type": "response.output_item.done", "output_index": 1, "item": FUNCTION_CALL},
        {"type": "response.output_item.added", "output_index": 2, "item": {**CUSTOM_CALL, "status": "in_progress", "input": ""}},
        {"type": "response.custom_tool_call_input.delta", **custom_at, "delta": CUSTOM_CALL["input"]},
        {"type": "response.custom_tool_call_input.done", **custom_at, "input": CUSTOM_CALL["input"]},
        {"type": "response.output_item.done", "output_index": 2, "item": CUSTOM_CALL},
        {"type": "response.completed", "response": {**answer, "output": [MESSAGE, FUNCTION_CALL, CUSTOM_CALL]}},
    ]


def test_a_call_whose_payload_is_not_text_is_added_and_done_as_it_is() -> None:
    odd_call = {**FUNCTION_CALL, "arguments": {"cmd": "ls"}}
    odd_custom = {**CUSTOM_CALL, "input": None}
    events = response_as_events(response(output=[odd_call, odd_custom]))
    assert [(event["type"], event.get("item")) for event in events[1:-1]] == [
        ("response.output_item.added", odd_call),
        ("response.output_item.done", odd_call),
        ("response.output_item.added", odd_custom),
        ("response.output_item.done", odd_custom),
    ]


@pytest.mark.parametrize(
    ("status", "terminal", "ended"),
    [
        ("completed", "response.completed", "completed"),
        ("incomplete", "response.incomplete", "incomplete"),
        ("failed", "response.failed", "failed"),
        ("cancelled", "response.failed", "failed"),
        ("queued", "response.completed", "completed"),
        (None, "response.completed", "completed"),
        (5, "response.completed", "completed"),
        (["failed"], "response.completed", "completed"),  # not a status, nor looked up as one (a list is unhashable)
        ({"failed": True}, "response.completed", "completed"),
    ],
)
def test_the_terminal_event_is_the_one_the_status_says(status: Any, terminal: str, ended: str) -> None:
    answer = response(status=status)
    *_, last = response_as_events(answer)
    assert last == {"type": terminal, "response": {**answer, "status": ended, "output": [MESSAGE]}}


@pytest.mark.parametrize("output", [None, "text", {"0": MESSAGE}])
def test_an_output_that_is_not_a_list_has_no_items(output: Any) -> None:
    answer = response(output=output)
    assert response_as_events(answer) == [
        {"type": "response.created", "response": opening(answer)},
        {"type": "response.completed", "response": {**answer, "output": []}},
    ]


@pytest.mark.parametrize(
    ("error", "failure"),
    [
        ({"code": "model_not_found", "message": "no such model", "type": "x"}, {"code": "model_not_found", "message": "no such model"}),
        ({"code": "", "message": ""}, {"code": "server_error", "message": "The upstream reported an error."}),
        ({"code": 404, "message": ["no"]}, {"code": "server_error", "message": "The upstream reported an error."}),
        ("overloaded", {"code": "server_error", "message": "overloaded"}),
    ],
    ids=["fields", "empty", "not text", "a string"],
)
def test_an_error_object_in_place_of_a_response_is_created_then_failed(error: Any, failure: JSON) -> None:
    answer = {"id": "resp_9", "error": error}
    assert response_as_events(answer) == [
        {"type": "response.created", "response": opening(answer)},
        {"type": "response.failed", "response": {"id": "resp_9", "status": "failed", "output": [], "error": failure}},
    ]


def test_a_response_with_output_is_read_as_one_even_with_an_error_field() -> None:
    answer = response(error={"code": "x", "message": "partial"}, status="incomplete")
    *_, last = response_as_events(answer)
    assert last["type"] == "response.incomplete" and last["response"]["output"] == [MESSAGE]
