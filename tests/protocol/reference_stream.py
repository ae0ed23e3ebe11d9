"""A real Responses SSE stream to feed decoders: the reference stream of
``responses-and-chat-completions.md`` §9, built event by event.

It holds a reasoning item, a message whose text *looks* like a JSON tool call, a
``function_call`` and a namespaced ``custom_tool_call`` whose arguments and input arrive
as deltas before their ``response.output_item.done``, and a terminal ``response.completed``.
"""

from __future__ import annotations

from typing import Any

import orjson

from toolwire.protocol import encode_event

FUNCTION_ARGUMENTS = '{"cmd": "ls -la", "workdir": "/tmp"}'
CUSTOM_INPUT = 'const r = await tools.exec_command({cmd: "echo hi"});\ntext("é€😀");\n'
MESSAGE_TEXT = '{"type": "function_call", "name": "exec_command", "arguments": "{}"}'

FUNCTION_CALL_ITEM: dict[str, Any] = {
    "id": "fc_0",
    "type": "function_call",
    "status": "completed",
    "arguments": FUNCTION_ARGUMENTS,
    "call_id": "call_0",
    "name": "exec_command",
}
CUSTOM_CALL_ITEM: dict[str, Any] = {
    "id": "ctc_1",
    "type": "custom_tool_call",
    "status": "completed",
    "call_id": "call_c1",
    "namespace": "functions",
    "name": "exec",
    "input": CUSTOM_INPUT,
}


def _response(status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    response: dict[str, Any] = {
        "id": "resp_abc",
        "object": "response",
        "created_at": 1750000000,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "model": "qwen3",
        "output": output,
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "metadata": {},
        "usage": None,
    }
    if status == "completed":
        response["completed_at"] = 1750000001
        response["usage"] = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 2},
            "total_tokens": 30,
        }
    return response


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def reference_events(*, terminal: bool = True) -> list[dict[str, Any]]:
    """The events of the stream, ``sequence_number`` included."""
    reasoning: dict[str, Any] = {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "Thinking"}],
        "encrypted_content": None,
        "status": "completed",
    }
    text_part = {"type": "output_text", "text": MESSAGE_TEXT, "annotations": [], "logprobs": []}
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [text_part],
    }
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response("in_progress", [])},
        {"type": "response.in_progress", "response": _response("in_progress", [])},
        # 0: reasoning
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**reasoning, "content": [], "status": "in_progress"},
        },
        {
            "type": "response.content_part.added",
            "item_id": "rs_1",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "reasoning_text", "text": ""},
        },
        *(
            {
                "type": "response.reasoning_text.delta",
                "item_id": "rs_1",
                "output_index": 0,
                "content_index": 0,
                "delta": delta,
            }
            for delta in ("Think", "ing")
        ),
        {
            "type": "response.reasoning_text.done",
            "item_id": "rs_1",
            "output_index": 0,
            "content_index": 0,
            "text": "Thinking",
        },
        {
            "type": "response.content_part.done",
            "item_id": "rs_1",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "reasoning_text", "text": "Thinking"},
        },
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
        # 1: a message whose text is a JSON "call": never a call
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**message, "status": "in_progress", "content": []},
        },
        {
            "type": "response.content_part.added",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "part": {**text_part, "text": ""},
        },
        *(
            {
                "type": "response.output_text.delta",
                "item_id": "msg_1",
                "output_index": 1,
                "content_index": 0,
                "delta": delta,
                "logprobs": [],
            }
            for delta in _chunks(MESSAGE_TEXT, 7)
        ),
        {
            "type": "response.output_text.done",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "text": MESSAGE_TEXT,
            "logprobs": [],
        },
        {
            "type": "response.content_part.done",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "part": text_part,
        },
        {"type": "response.output_item.done", "output_index": 1, "item": message},
        # 2: function_call, arguments streamed
        {
            "type": "response.output_item.added",
            "output_index": 2,
            "item": {**FUNCTION_CALL_ITEM, "status": "in_progress", "arguments": ""},
        },
        *(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_0",
                "output_index": 2,
                "delta": delta,
            }
            for delta in _chunks(FUNCTION_ARGUMENTS, 5)
        ),
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_0",
            "output_index": 2,
            "arguments": FUNCTION_ARGUMENTS,
            "name": "exec_command",
        },
        {"type": "response.output_item.done", "output_index": 2, "item": FUNCTION_CALL_ITEM},
        # 3: custom_tool_call, input streamed
        {
            "type": "response.output_item.added",
            "output_index": 3,
            "item": {**CUSTOM_CALL_ITEM, "status": "in_progress", "input": ""},
        },
        *(
            {
                "type": "response.custom_tool_call_input.delta",
                "item_id": "ctc_1",
                "output_index": 3,
                "delta": delta,
            }
            for delta in _chunks(CUSTOM_INPUT, 9)
        ),
        {
            "type": "response.custom_tool_call_input.done",
            "item_id": "ctc_1",
            "output_index": 3,
            "input": CUSTOM_INPUT,
        },
        {"type": "response.output_item.done", "output_index": 3, "item": CUSTOM_CALL_ITEM},
    ]
    if terminal:
        output = [reasoning, message, FUNCTION_CALL_ITEM, CUSTOM_CALL_ITEM]
        events.append({"type": "response.completed", "response": _response("completed", output)})
    return [{**event, "sequence_number": number} for number, event in enumerate(events)]


def encode_stream(events: list[dict[str, Any]], *, line_end: bytes = b"\n") -> tuple[bytes, list[int]]:
    """The SSE bytes of ``events`` (with ``event:`` lines, as OpenAI sends them), and
    the offset just past each event's frame."""
    body = b""
    ends: list[int] = []
    for event in events:
        frame = encode_event(orjson.dumps(event), event=event["type"])
        body += frame.replace(b"\n", line_end)
        ends.append(len(body))
    return body, ends
