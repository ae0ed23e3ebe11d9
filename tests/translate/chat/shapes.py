"""Requests shaped the way Codex sends them, for the tests of ``translate_request``.

Item and tool shapes are the ones Codex sends (/work/shared/REAL_CLIENTS.md);
``translate`` checks every translation against the invariants every Chat backend relies
on (``check_invariants``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from toolwire.protocol import CustomToolCallItem, FunctionCallItem, ResponsesRequest, parse_request
from toolwire.tools import ToolKind, ToolName
from toolwire.translate import GENERIC, BackendProfile, TranslatedRequest, translate_request

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "codex"
DEEPSEEK = BackendProfile(name="deepseek", reasoning_on_every_assistant=True)
VLLM = BackendProfile(
    name="vllm", reasoning_field="reasoning", max_tokens_field="max_completion_tokens"
)

# ---------------------------------------------------------------- shapes Codex sends

EXEC_COMMAND = {
    "type": "function",
    "name": "exec_command",
    "description": "Runs a command in a PTY.",
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string", "description": "Shell command to execute."}},
        "required": ["cmd"],
        "additionalProperties": False,
    },
}
VIEW_IMAGE = {
    "type": "function",
    "name": "view_image",
    "description": "View a local image file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}
APPLY_PATCH_GRAMMAR = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\n'
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Use the `apply_patch` tool to edit files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": APPLY_PATCH_GRAMMAR},
}
TOOL_SEARCH = {
    "type": "tool_search",
    "execution": "client",
    "description": "Search deferred tools.",
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "number"}},
        "required": ["query"],
    },
}
COLLABORATION = {
    "type": "namespace",
    "name": "collaboration",
    "description": "Tools for working with other agents.",
    "tools": [
        {
            "type": "function",
            "name": "list_agents",
            "description": "List the agents.",
            "parameters": {"type": "object", "properties": {}},
        },
        {
            "type": "function",
            "name": "spawn_agent",
            "parameters": {"type": "object", "properties": {"task": {"type": "string"}}},
        },
    ],
}
EXEC_JS = {
    "type": "custom",
    "name": "exec",
    "description": "Run JavaScript.",
    "format": {
        "type": "grammar",
        "syntax": "lark",
        "definition": "start: SOURCE\nSOURCE: /[\\s\\S]+/\n",
    },
}
FUNCTIONS_NAMESPACE = {
    "type": "namespace",
    "name": "functions",
    "description": "",
    "tools": [EXEC_JS],
}
WEB_SEARCH = {"type": "web_search", "external_web_access": False}
TOOLS = [EXEC_COMMAND, VIEW_IMAGE, APPLY_PATCH, TOOL_SEARCH, COLLABORATION, WEB_SEARCH]

PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEklEQVR4nGP4z8DAAMIM/4EAAB/uBfsL2WiLAAAAAElFTkSuQmCC"


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def developer(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": text}],
    }


def assistant(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call(
    call_id: str, name: str, arguments: str = "{}", namespace: str | None = None
) -> dict[str, Any]:
    item = {
        "type": "function_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }
    if namespace is not None:
        item["namespace"] = namespace
    return item


def function_output(call_id: str, output: Any) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def custom_call(
    call_id: str, name: str, input_text: str, namespace: str | None = None
) -> dict[str, Any]:
    item = {
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "input": input_text,
    }
    if namespace is not None:
        item["namespace"] = namespace
    return item


def custom_output(call_id: str, output: Any) -> dict[str, Any]:
    return {"type": "custom_tool_call_output", "call_id": call_id, "output": output}


def tool_search_call(call_id: str, query: str) -> dict[str, Any]:
    return {
        "type": "tool_search_call",
        "call_id": call_id,
        "status": "completed",
        "execution": "client",
        "arguments": {"query": query, "limit": 2},
    }


def reasoning(
    *, content: str | None = None, summary: str | None = None, encrypted_content: str | None = None
) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "id": "rs_1", "summary": []}
    if summary is not None:
        item["summary"] = [{"type": "summary_text", "text": summary}]
    if content is not None:
        item["content"] = [{"type": "reasoning_text", "text": content}]
    if encrypted_content is not None:
        item["encrypted_content"] = encrypted_content
    return item


def translate(
    body: dict[str, Any], profile: BackendProfile = GENERIC, **kwargs: Any
) -> TranslatedRequest:
    # As JSON, the way the gateway gets a body: the tool lists the tests share (``TOOLS``)
    # are then validated once and translated from the kept specs and tool tables.
    request = parse_request(orjson.dumps({"model": "gpt-5.5", **body}))
    translated = translate_request(request, profile, **kwargs)
    check_invariants(request, translated)
    return translated


def conversation(
    *items: dict[str, Any], profile: BackendProfile = GENERIC, **body: Any
) -> list[dict[str, Any]]:
    """The messages for ``items`` with the standard tools, without the system message."""
    messages = translate({"tools": TOOLS, "input": list(items), **body}, profile).chat["messages"]
    return [dict(m) for m in messages if m["role"] != "system"]


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


# ---------------------------------------------------------------- invariants


VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_invariants(request: ResponsesRequest, translated: TranslatedRequest) -> None:
    """What every Chat backend needs, whatever the input was."""
    chat = translated.chat
    messages = chat["messages"]
    orjson.dumps(chat)  # plain JSON all the way down
    assert all(m["role"] in ("system", "user", "assistant", "tool") for m in messages)
    assert [i for i, m in enumerate(messages) if m["role"] == "system"] in ([], [0])
    position = 0
    while position < len(messages):
        message = messages[position]
        position += 1
        assert message["role"] != "tool", f"tool message {position - 1} follows no tool call"
        calls = message.get("tool_calls") or []
        if not calls:
            continue
        assert message["role"] == "assistant"
        answers = [m.get("tool_call_id") for m in messages[position : position + len(calls)]]
        assert answers == [call["id"] for call in calls]
        assert all(
            m["role"] == "tool" and isinstance(m["content"], str)
            for m in messages[position : position + len(calls)]
        )
        position += len(calls)
        for call in calls:
            assert len(call["id"]) <= 40
            assert VALID_NAME.match(call["function"]["name"])
    for tool in chat.get("tools", []):
        name = tool["function"]["name"]
        assert VALID_NAME.match(name)
        upstream = translated.tools.by_upstream_name(name)
        assert upstream is not None
        if upstream.kind is ToolKind.CUSTOM:
            parameters = tool["function"]["parameters"]
            assert parameters["required"] == ["input"]
            assert list(parameters["properties"]) == ["input"]
            assert parameters["properties"]["input"]["type"] == "string"
    if "tools" not in chat:
        assert "tool_choice" not in chat and "parallel_tool_calls" not in chat
    # a declared tool called in the history is restored from its flat name
    for item in request.input_items():
        if isinstance(item, FunctionCallItem | CustomToolCallItem):
            tool_name = ToolName(item.namespace, item.name)
            if translated.tools.by_tool_name(tool_name) is not None:
                flat = translated.tools.upstream_name(tool_name)
                restored = translated.tools.by_upstream_name(flat)
                assert restored is not None and restored.tool_name == tool_name


