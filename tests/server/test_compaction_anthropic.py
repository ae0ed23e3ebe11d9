"""Compaction through the real gateway in front of the scripted Messages API (kind ``anthropic``).

The API refuses a request whose history holds ``tool_use`` or ``tool_result`` blocks
without declaring tools, and the summary request offers none; the scripted API enforces
that rule with the others (thinking sent back unchanged, every ``tool_use`` answered
first in the next message). So each compaction here is of a conversation with tool
calls: a ``compaction_trigger`` (streamed and not), ``POST /v1/responses/compact``, one
in the middle of a tool loop with signed thinking, and a later request that carries the
compaction item.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from tests.support.gateway import GatewayProcess
from tests.support.messages_upstream import Answer, MessagesUpstream, Said, Thinking, Use, sign
from toolwire.compaction import COMPACTION_PROMPT, SEALED_PREFIX, SUMMARY_HEADING
from toolwire.protocol import SSEDecoder

JSON = dict[str, Any]
MODEL = "claude-sonnet-4-5"

TOOLS = [
    {"type": "function", "name": "exec_command", "description": "Runs a command.",
     "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
    {"type": "custom", "name": "apply_patch", "description": "Edits files."},
]
HISTORY: list[JSON] = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]},
    {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": '{"cmd":"pytest"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "1 failed: test_parse"},
    {"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"},
    {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done."},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Patched; rerunning."}]},
]
TRIGGER: JSON = {"type": "compaction_trigger"}
SUMMARY = "The user wants test_parse fixed; pytest showed it failing; a patch was applied."


def post(gateway: GatewayProcess, path: str, body: JSON) -> httpx.Response:
    return httpx.post(gateway.base_url + path, json={"model": MODEL, **body}, timeout=30)


def stream(gateway: GatewayProcess, body: JSON) -> list[JSON]:
    decoder = SSEDecoder()
    with httpx.stream(
        "POST", gateway.base_url + "/responses", json={"model": MODEL, **body, "stream": True}, timeout=30
    ) as answer:
        assert answer.status_code == 200, answer.read()
        return [orjson.loads(event.data) for chunk in answer.iter_raw() for event in decoder.feed(chunk)]


def blocks_of(message: JSON) -> list[JSON]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def block_types(messages: list[JSON]) -> list[list[str]]:
    return [[block["type"] for block in blocks_of(message)] for message in messages]


def assert_a_summary_request(sent: JSON) -> None:
    """The backend was asked for the summary: the history's tool calls as they were, the
    tools they call declared but not to be called, our prompt last."""
    assert sent["tool_choice"] == {"type": "none"}
    assert sorted(tool["name"] for tool in sent["tools"]) == ["apply_patch", "exec_command"]
    assert all(tool["input_schema"]["type"] == "object" for tool in sent["tools"])
    messages = sent["messages"]
    assert block_types(messages) == [["text"], ["tool_use"], ["tool_result"], ["tool_use"], ["tool_result"], ["text"], ["text"]]
    last = blocks_of(messages[-1])
    assert last[-1]["type"] == "text" and last[-1]["text"] == COMPACTION_PROMPT


def test_a_trigger_compacts_a_conversation_with_tool_calls(
    anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream
) -> None:
    messages_upstream.enqueue(Answer([Said(SUMMARY)]))
    events = stream(anthropic_gateway, {"input": [*HISTORY, TRIGGER], "tools": TOOLS, "store": False})
    assert [event["type"] for event in events][-1] == "response.completed", events[-1]
    [item] = events[-1]["response"]["output"]
    assert item["type"] == "compaction" and item["encrypted_content"].startswith(SEALED_PREFIX)
    [sent] = messages_upstream.message_requests
    assert_a_summary_request(sent)
    uses = [block for message in sent["messages"] for block in blocks_of(message) if block["type"] == "tool_use"]
    assert [(use["name"], use["input"]) for use in uses] == [
        ("exec_command", {"cmd": "pytest"}), ("apply_patch", {"input": "*** Begin Patch\n*** End Patch"})
    ]


def test_a_trigger_not_streamed(anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream) -> None:
    messages_upstream.enqueue(Answer([Said(SUMMARY)]))
    answer = post(anthropic_gateway, "/responses", {"input": [*HISTORY, TRIGGER], "tools": TOOLS, "store": False})
    assert answer.status_code == 200, answer.text
    assert [item["type"] for item in answer.json()["output"]] == ["compaction"]
    assert_a_summary_request(messages_upstream.message_requests[-1])


def test_the_compact_endpoint_and_a_later_request_with_its_item(
    anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream
) -> None:
    messages_upstream.enqueue(Answer([Said(SUMMARY)]), Answer([Said("Rerunning pytest.")]))
    compacted = post(anthropic_gateway, "/responses/compact", {"input": HISTORY, "tools": TOOLS})
    assert compacted.status_code == 200, compacted.text
    body = compacted.json()
    assert body["object"] == "response.compaction" and body["output"][-1]["type"] == "compaction"
    assert_a_summary_request(messages_upstream.message_requests[0])

    later = [*body["output"], {"type": "message", "role": "user", "content": "Go on."}]
    answer = post(anthropic_gateway, "/responses", {"input": later, "tools": TOOLS, "store": False})
    assert answer.status_code == 200, answer.text
    assert answer.json()["output"][0]["content"][0]["text"] == "Rerunning pytest."
    sent = messages_upstream.message_requests[-1]
    assert "tool_choice" not in sent and [tool["name"] for tool in sent["tools"]] == ["exec_command", "apply_patch"]
    [user] = sent["messages"]  # the kept user message, the summary in the item's place, the new one
    texts = [block["text"] for block in blocks_of(user)]
    assert texts == ["Fix the failing test.", f"{SUMMARY_HEADING}\n\n{SUMMARY}", "Go on."]
    assert "1 failed" not in orjson.dumps(sent).decode()  # what it summarised is left out


def test_a_compaction_in_the_middle_of_a_tool_loop_with_thinking(
    anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream
) -> None:
    """Codex compacts mid-turn: the history ends with a tool's output, after a turn that
    began with signed thinking, and reasoning stays on. The thinking goes back unchanged
    before its ``tool_use``, the output answers it first in the last message, our prompt
    follows it there, and the tool it called is declared."""
    messages_upstream.enqueue(Answer([Thinking("Run the tests first."), Use("exec_command", {"cmd": "pytest"})]))
    first = post(anthropic_gateway, "/responses", {
        "input": "Fix the failing test.", "tools": TOOLS, "reasoning": {"effort": "low"}, "store": False,
    })
    assert first.status_code == 200, first.text
    reasoning, call = first.json()["output"]
    assert (reasoning["type"], call["type"]) == ("reasoning", "function_call")
    history = [
        {"type": "message", "role": "user", "content": "Fix the failing test."},
        reasoning,
        call,
        {"type": "function_call_output", "call_id": call["call_id"], "output": "1 failed: test_parse"},
        TRIGGER,
    ]
    messages_upstream.enqueue(Answer([Thinking("Summarise."), Said(SUMMARY)]))
    events = stream(anthropic_gateway, {"input": history, "tools": TOOLS, "reasoning": {"effort": "low"}, "store": False})
    assert events[-1]["type"] == "response.completed", events[-1]
    assert [item["type"] for item in events[-1]["response"]["output"]] == ["compaction"]
    sent = messages_upstream.message_requests[-1]
    assert sent["thinking"]["type"] == "enabled" and sent["tool_choice"] == {"type": "none"}
    assert [tool["name"] for tool in sent["tools"]] == ["exec_command"]
    assert block_types(sent["messages"]) == [["text"], ["thinking", "tool_use"], ["tool_result", "text"]]
    thinking = blocks_of(sent["messages"][1])[0]
    assert thinking["signature"] == sign("Run the tests first.")
    assert blocks_of(sent["messages"][-1])[-1]["text"] == COMPACTION_PROMPT
