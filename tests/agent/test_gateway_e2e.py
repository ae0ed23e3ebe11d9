"""The agent end to end through toolwire's own gateway (a real ``toolwire serve`` process)
in front of the scripted Chat Completions upstream."""

from __future__ import annotations

import json

from tests.support.chat_upstream import Call, ChatUpstream, Text, ToolCalls
from tests.support.gateway import GatewayProcess
from toolwire.agent import AgentLoop, HttpResponsesClient, ToolContext, builtin_router


async def run(gateway: GatewayProcess, context: ToolContext, prompt: str) -> str:
    async with HttpResponsesClient(gateway.base_url) as client:
        loop = AgentLoop(client, builtin_router(), model="scripted-model", context=context)
        return (await loop.run(prompt)).answer


def tool_messages(request: dict[str, object]) -> list[dict[str, object]]:
    messages = request["messages"]
    assert isinstance(messages, list)
    return [message for message in messages if message.get("role") == "tool"]


async def test_a_function_call_through_the_gateway(
    gateway: GatewayProcess, upstream: ChatUpstream, full_access: ToolContext
) -> None:
    upstream.enqueue(
        ToolCalls([Call("exec_command", '{"cmd":"echo hi"}', id="call_echo")]), Text("done")
    )
    assert await run(gateway, full_access, "say hi") == "done"
    first, second = upstream.chat_requests
    assert {tool["function"]["name"] for tool in first["tools"]} >= {
        "exec_command",
        "apply_patch",
        "view_image",
    }
    [assistant] = [m for m in second["messages"] if m.get("role") == "assistant"]
    assert assistant["tool_calls"][0]["id"] == "call_echo"
    [answer] = tool_messages(second)
    assert answer["tool_call_id"] == "call_echo"
    assert "Exit code: 0" in str(answer["content"]) and "hi" in str(answer["content"])


async def test_a_custom_tool_call_through_the_gateway(
    gateway: GatewayProcess, upstream: ChatUpstream, full_access: ToolContext
) -> None:
    patch = "*** Begin Patch\n*** Add File: notes.txt\n+written by the agent\n*** End Patch\n"
    upstream.enqueue(
        ToolCalls(
            [
                Call("apply_patch", json.dumps({"input": patch}), id="call_patch"),
                Call("exec_command", '{"cmd":"echo also"}', id="call_echo"),
            ]
        ),
        Text("written"),
    )
    assert await run(gateway, full_access, "write notes") == "written"
    assert (full_access.cwd / "notes.txt").read_text() == "written by the agent\n"
    second = upstream.chat_requests[1]
    answers = {
        message["tool_call_id"]: str(message["content"]) for message in tool_messages(second)
    }
    assert answers["call_patch"].startswith("Success. Updated the following files:\nA notes.txt")
    assert "also" in answers["call_echo"]
