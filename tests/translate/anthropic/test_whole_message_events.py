"""``message_events``: a whole Message as the events the Messages API would have streamed.

A non-streamed answer is translated by reading it as its stream, so that the two cannot
disagree: each block opens with ``content_block_start`` carrying the block emptied (text
``""``, thinking and signature ``""``, a tool's ``input`` ``{}``), its content comes in
one delta of the block's kind, and ``content_block_stop`` closes it, all under the block's
own index; the message's ``stop_reason`` and usage come in ``message_delta``.
"""

from __future__ import annotations

from typing import Any

from toolwire.translate.anthropic._events import message_events

JSON = dict[str, Any]

USAGE = {"input_tokens": 12, "output_tokens": 30}


def whole(*content: JSON, stop_reason: str | None = "end_turn") -> JSON:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": list(content),
            "stop_reason": stop_reason, "usage": USAGE}


def block(index: int, start: JSON, *deltas: JSON) -> list[JSON]:
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        *({"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def test_each_kind_of_block_streams_as_the_api_streams_it() -> None:
    message = whole(
        {"type": "thinking", "thinking": "Look it up.", "signature": "sig=="},
        {"type": "text", "text": "Searching."},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "toolwire"}},
        {"type": "tool_use", "id": "toolu_1", "name": "exec_command", "input": {"cmd": "ls"}},
        stop_reason="tool_use",
    )
    assert message_events(message) == [
        {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}},
        *block(0, {"type": "thinking", "thinking": "", "signature": ""},
               {"type": "thinking_delta", "thinking": "Look it up."}, {"type": "signature_delta", "signature": "sig=="}),
        *block(1, {"type": "text", "text": ""}, {"type": "text_delta", "text": "Searching."}),
        *block(2, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
               {"type": "input_json_delta", "partial_json": '{"query":"toolwire"}'}),
        *block(3, {"type": "tool_use", "id": "toolu_1", "name": "exec_command", "input": {}},
               {"type": "input_json_delta", "partial_json": '{"cmd":"ls"}'}),
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": USAGE},
        {"type": "message_stop"},
    ]


def test_a_block_of_another_kind_opens_and_closes_as_it_is() -> None:
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
    assert message_events(whole(result))[1:3] == block(0, result)


def test_empty_content_and_a_message_not_ended() -> None:
    events = message_events(whole({"type": "text", "text": ""}, {"type": "tool_use", "id": "t", "name": "f"}, stop_reason=None))
    assert [event["type"] for event in events] == ["message_start", *(["content_block_start", "content_block_delta",
                                                                        "content_block_stop"] * 2)]
    assert events[2]["delta"] == {"type": "text_delta", "text": ""}
    assert events[5]["delta"] == {"type": "input_json_delta", "partial_json": "{}"}


def test_an_error_body_is_its_own_event() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert message_events(error) == [error]
