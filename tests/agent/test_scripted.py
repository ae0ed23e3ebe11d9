"""The scripted Responses model, the fake beside ``HttpResponsesClient``: the exact events a
scripted reply streams (what test servers and the agent loop read), and the client that
serves them."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from toolwire.agent import (
    ScriptedResponse,
    ScriptedResponsesClient,
    assistant_message,
    custom_tool_call,
    function_call,
    response_events,
    response_stream,
)
from toolwire.errors import UpstreamError
from toolwire.protocol import SSEDecoder, parse_item

JSON = dict[str, Any]
USAGE = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 5,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 15,
}


def test_the_items_a_reply_is_made_of() -> None:
    assert assistant_message("hi") == {
        "id": "msg_1",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "hi", "annotations": [], "logprobs": []}],
    }
    assert assistant_message("hi", item_id="msg_9")["id"] == "msg_9"
    assert function_call("ls", "{}", "c1") == {
        "id": "fc_c1", "type": "function_call", "status": "completed", "call_id": "c1", "name": "ls", "arguments": "{}",
    }  # fmt: skip
    assert function_call("ls", "{}", "c1", namespace="fs")["namespace"] == "fs"
    assert custom_tool_call("apply_patch", "*** Begin Patch", "c2") == {
        "id": "ctc_c2", "type": "custom_tool_call", "status": "completed", "call_id": "c2", "name": "apply_patch",
        "input": "*** Begin Patch",
    }  # fmt: skip
    assert custom_tool_call("x", "", "c3", namespace="ns")["namespace"] == "ns"
    for item in (assistant_message("a"), function_call("f", "{}", "c"), custom_tool_call("g", "", "d")):
        parse_item(item)  # each is a valid output item


def response(status: str, output: list[JSON], usage: JSON | None) -> JSON:
    return {
        "id": "resp_x", "object": "response", "created_at": 1_750_000_000, "status": status, "error": None,
        "incomplete_details": None, "model": "scripted-model", "output": output, "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": [], "usage": usage,
    }  # fmt: skip


def test_the_events_of_a_completed_reply() -> None:
    message, call, custom = assistant_message("Hello."), function_call("ls", '{"a":1}', "c1"), custom_tool_call("p", "x", "c2")
    events = response_events(ScriptedResponse([message, call, custom]), response_id="resp_x", model="scripted-model")
    where = {"output_index": 0, "item_id": "msg_1"}
    assert events == [
        {"type": "response.created", "response": response("in_progress", [], None), "sequence_number": 0},
        {"type": "response.in_progress", "response": response("in_progress", [], None), "sequence_number": 1},
        {"type": "response.output_item.added", "output_index": 0, "item": {**message, "status": "in_progress", "content": []},
         "sequence_number": 2},
        {"type": "response.output_text.delta", **where, "content_index": 0, "delta": "Hello.", "logprobs": [],
         "sequence_number": 3},
        {"type": "response.output_item.done", "output_index": 0, "item": message, "sequence_number": 4},
        {"type": "response.output_item.added", "output_index": 1, "item": {**call, "status": "in_progress", "arguments": ""},
         "sequence_number": 5},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_c1", "output_index": 1, "delta": '{"a":1}',
         "sequence_number": 6},
        {"type": "response.output_item.done", "output_index": 1, "item": call, "sequence_number": 7},
        {"type": "response.output_item.added", "output_index": 2, "item": {**custom, "status": "in_progress", "input": ""},
         "sequence_number": 8},
        {"type": "response.custom_tool_call_input.delta", "item_id": "ctc_c2", "output_index": 2, "delta": "x",
         "sequence_number": 9},
        {"type": "response.output_item.done", "output_index": 2, "item": custom, "sequence_number": 10},
        {"type": "response.completed", "response": response("completed", [message, call, custom], USAGE),
         "sequence_number": 11},
    ]  # fmt: skip


def test_the_defaults_an_item_without_an_id_and_an_item_of_another_type() -> None:
    other = {"type": "reasoning", "summary": []}
    events = response_events(ScriptedResponse([other]))
    assert events[0]["response"]["id"] == "resp_scripted" and events[0]["response"]["model"] == "scripted"
    assert [e["type"] for e in events[2:4]] == ["response.output_item.added", "response.output_item.done"]
    assert events[2]["item"] == {**other, "status": "in_progress"}
    bare_call = {"type": "function_call", "call_id": "c", "name": "f"}
    [_, _, added, delta, _, _] = response_events(ScriptedResponse([bare_call]))
    assert (added["item"]["arguments"], delta["delta"], delta["item_id"]) == ("", "", "item_0")
    bare_custom = {"type": "custom_tool_call", "call_id": "c", "name": "g"}
    assert response_events(ScriptedResponse([bare_custom]))[3]["delta"] == ""
    odd_message = {"type": "message", "role": "assistant", "content": ["not a part", {"type": "refusal"}]}
    assert response_events(ScriptedResponse([odd_message]))[3]["delta"] == ""
    two_parts = assistant_message("Hello, ")
    two_parts["content"].append({**two_parts["content"][0], "text": "world."})
    assert response_events(ScriptedResponse([two_parts]))[3]["delta"] == "Hello, world."
    no_content = {"type": "message", "role": "assistant"}
    assert response_events(ScriptedResponse([no_content]))[3]["delta"] == ""


def test_a_failed_and_an_incomplete_reply() -> None:
    failed = response_events(ScriptedResponse(status="failed", error_message="it broke"))[-1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["error"] == {"code": "server_error", "message": "it broke"}
    assert failed["response"]["incomplete_details"] is None and failed["response"]["usage"] == USAGE
    assert response_events(ScriptedResponse(status="failed"))[-1]["response"]["error"]["message"] == "scripted failure"
    incomplete = response_events(ScriptedResponse(status="incomplete"))[-1]
    assert incomplete["type"] == "response.incomplete"
    assert incomplete["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert incomplete["response"]["error"] is None


def test_the_stream_is_one_sse_frame_per_event_and_stops_where_told() -> None:
    reply = ScriptedResponse([assistant_message("Hi.")])
    frames = response_stream(reply, response_id="resp_7")
    events = response_events(reply, response_id="resp_7")
    assert len(frames) == len(events)
    for frame, event in zip(frames, events, strict=True):
        [decoded] = SSEDecoder().feed(frame)
        assert (decoded.event, orjson.loads(decoded.data)) == (event["type"], event)
    assert response_stream(ScriptedResponse([assistant_message("Hi.")], stall_after=2)) == response_stream(reply)[:2]


async def test_the_client_serves_the_replies_in_order_and_records_each_request() -> None:
    client = ScriptedResponsesClient(ScriptedResponse([assistant_message("one")]))
    client.enqueue(ScriptedResponse([assistant_message("two")]))
    body: JSON = {"model": "m", "input": [{"role": "user", "content": "hi"}]}
    received = []
    for _ in range(2):
        async with client.stream(body) as chunks:
            received.append(b"".join([chunk async for chunk in chunks]))
    body["input"].append("changed later")
    assert client.requests == [{"model": "m", "input": [{"role": "user", "content": "hi"}]}] * 2  # copies
    assert client.closed == 2
    assert b'"id":"resp_0"' in received[0] and b'"id":"resp_1"' in received[1]
    assert b'"text":"two"' in received[1]
    with pytest.raises(UpstreamError) as ran_out:
        async with client.stream(body):
            pass
    assert ran_out.value.message == "The script ran out at request #2."


async def test_a_stalled_reply_sends_nothing_more_until_the_client_leaves() -> None:
    client = ScriptedResponsesClient(ScriptedResponse([assistant_message("...")], stall_after=2))
    received: list[bytes] = []

    async def read() -> None:
        async with client.stream({}) as chunks:
            async for chunk in chunks:
                received.append(chunk)

    reading = asyncio.ensure_future(read())
    for _ in range(100):
        if len(received) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(received) == 2 and not reading.done()
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert client.closed == 1
