"""``downgrade_request`` spelled out whole: the exact body a Responses backend gets for
each set of capabilities it lacks, with the warnings and conversions an operator reads;
and a passthrough backend getting the request as the client sent it.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from toolwire.errors import RequestError
from toolwire.protocol import parse_request
from toolwire.translate import DowngradedRequest, ResponsesCapabilities, downgrade_request

from ..chat.shapes import EXEC_COMMAND, custom_call, function_call, user

JSON = dict[str, Any]
V1_ONLY = ResponsesCapabilities()
NAMESPACES_ONLY = ResponsesCapabilities(supports_namespaces=True)
EVERYTHING = ResponsesCapabilities.everything()
FREEFORM = (
    "This is a freeform tool: pass its whole input as the string argument `input`. `input` is the raw text "
    "itself (for example the patch, or the JavaScript source), NOT JSON and NOT wrapped in markdown code fences."
    "\n\n`input` is unconstrained text."
)
RAW_INPUT = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The raw text input: not JSON, not wrapped in markdown code fences."}},
    "required": ["input"],
    "additionalProperties": False,
}
MCP = {
    "type": "namespace",
    "name": "mcp",
    "description": "An MCP server.",
    "tools": [
        {"type": "function", "name": "read", "description": "Read a file.", "parameters": {"type": "object", "properties": {}}},
        {"type": "function", "name": "bare"},
        {"type": "custom", "name": "run", "description": "Run code."},
        {"type": "tool_search", "execution": "client"},
    ],
}
UNDESCRIBED = {"type": "namespace", "name": "nd", "tools": [{"type": "custom", "name": "run2"}]}
LOADED = {"type": "namespace", "name": "late", "description": "Loaded later.", "tools": [{"type": "function", "name": "f", "defer_loading": True}]}


def downgrade(body: JSON, capabilities: ResponsesCapabilities, **kwargs: Any) -> DowngradedRequest:
    return downgrade_request(parse_request(orjson.dumps({"model": "m", **body})), capabilities, **kwargs)


HISTORY = [
    {"type": "additional_tools", "tools": [{"type": "function", "name": "extra", "description": "Extra."}, EXEC_COMMAND]},
    user("go"),
    function_call("c1", "read", "{}", namespace="mcp"),
    function_call("c0", "exec_command", "{}"),
    custom_call("c2", "run", "code", namespace="mcp"),
    {"type": "custom_tool_call_output", "id": "o1", "call_id": "c2", "output": "ran", "name": "run"},
    {"type": "tool_search_call", "call_id": "c3", "status": "completed", "execution": "client", "arguments": {"query": "q"}},
    {"type": "tool_search_call", "call_id": "c4", "execution": "client", "arguments": '{"query":"r"}'},
    {"type": "tool_search_call", "execution": "server", "status": "completed", "arguments": {}},
    {"type": "tool_search_call", "call_id": "s1", "execution": "server", "arguments": {}},
    {"type": "tool_search_call", "execution": "client", "arguments": {}},
    {"type": "tool_search_output", "call_id": "c3", "execution": "client", "status": "completed", "tools": [LOADED]},
    {"type": "tool_search_output", "execution": "server", "status": "completed", "tools": [{"type": "function", "name": "g", "defer_loading": True}]},
    {"type": "tool_search_output", "call_id": "s1", "execution": "server", "tools": []},
    {"type": "tool_search_output", "execution": "client", "tools": []},
]
CHOICE = {
    "type": "allowed_tools",
    "mode": "auto",
    "tools": [
        {"type": "custom", "name": "run", "namespace": "mcp"},
        {"type": "function", "name": "exec_command"},
        {"type": "tool_search"},
        "junk",
        {"type": "custom", "name": "nope"},
        {"type": "function", "name": 5},
        {"type": "function", "name": "read", "namespace": {}},
    ],
}
REQUEST = {"input": HISTORY, "tools": [EXEC_COMMAND, MCP, {"type": "tool_search", "execution": "server", "description": "srv"}, {"type": "web_search"}], "tool_choice": CHOICE}
USER_GO = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}


def test_everything_a_v1_backend_lacks_is_lowered() -> None:
    downgraded = downgrade(REQUEST, V1_ONLY, model="up")
    assert downgraded.body == {
        "model": "up",
        "input": [
            USER_GO,
            {"type": "function_call", "call_id": "c1", "name": "mcp__read", "arguments": "{}", "status": "completed"},
            {"type": "function_call", "call_id": "c0", "name": "exec_command", "arguments": "{}", "status": "completed"},
            {"type": "function_call", "call_id": "c2", "name": "mcp__run", "status": "completed", "arguments": '{"input":"code"}'},
            {"type": "function_call_output", "call_id": "c2", "output": "ran"},
            {"type": "function_call", "call_id": "c3", "name": "tool_search", "arguments": '{"query":"q"}', "status": "completed"},
            {"type": "function_call", "call_id": "c4", "name": "tool_search", "arguments": '{"query":"r"}'},
            {"type": "function_call_output", "call_id": "c3", "output": '{"loaded_tools":[{"name":"late__f"}]}'},
        ],
        "tools": [
            EXEC_COMMAND,
            {"type": "function", "name": "mcp__read", "description": "An MCP server.\n\nRead a file.", "parameters": {"type": "object", "properties": {}}},
            {"type": "function", "name": "mcp__bare", "description": "An MCP server."},
            {"type": "function", "name": "mcp__run", "description": f"An MCP server.\n\nRun code.\n\n{FREEFORM}", "parameters": RAW_INPUT},
            {"type": "function", "name": "mcp__tool_search", "parameters": {"type": "object", "properties": {}}, "description": "An MCP server."},
            {"type": "function", "name": "extra", "description": "Extra."},
            {"type": "function", "name": "late__f", "description": "Loaded later."},
            {"type": "function", "name": "g"},
        ],
        "tool_choice": {
            **CHOICE,
            "tools": [
                {"type": "function", "name": "mcp__run"},
                {"type": "function", "name": "exec_command"},
                {"type": "function", "name": "tool_search"},
                *CHOICE["tools"][3:],  # type: ignore[index]
            ],
        },
    }
    assert downgraded.warnings == ["tools not sent (this Responses backend does not support them): tool_search (server), web_search"]
    assert downgraded.conversions == [
        "additional_tools hoisted into tools",
        "namespaced calls flattened",
        "custom tool calls sent as function calls",
        "tool_search calls sent as function calls",
        "tool_search outputs sent as function_call_output",
        "custom tools sent as functions",
        "client tool_search sent as a function",
        "namespace tools flattened",
    ]
    assert downgraded.capabilities is V1_ONLY


def test_a_passthrough_backend_gets_the_request_as_it_was_sent() -> None:
    assert (EVERYTHING.supports_additional_tools, EVERYTHING.supports_custom_tools, EVERYTHING.supports_namespaces) == (True, True, True)
    assert (EVERYTHING.supports_tool_search, EVERYTHING.supports_hosted_tools, EVERYTHING.supports_compaction) == (True, True, True)
    body = {**REQUEST, "tools": [*REQUEST["tools"], {"type": "function", "name": "mcp"}]}
    downgraded = downgrade(body, EVERYTHING)
    sent = orjson.loads(orjson.dumps({"model": "m", **body}))
    assert downgraded.body == parse_request(orjson.dumps(sent)).dump()
    assert downgraded.body["tools"] == sent["tools"]
    assert downgraded.body["tool_choice"] == CHOICE
    assert [item["type"] for item in downgraded.body["input"]] == [item["type"] for item in HISTORY]
    assert downgraded.warnings == [] and downgraded.conversions == []


def test_with_namespaces_only_a_custom_tool_keeps_its_own_description_and_loaded_tools_lose_defer_loading() -> None:
    body = {
        "input": [user("go"), {"type": "tool_search_output", "call_id": "c3", "execution": "client", "status": "completed", "tools": [LOADED]}],
        "tools": [{**MCP, "tools": [MCP["tools"][2]]}, UNDESCRIBED, {"type": "function", "name": "later", "defer_loading": True}],
        "tool_choice": {"type": "custom", "name": "run", "namespace": "mcp"},
    }
    downgraded = downgrade(body, NAMESPACES_ONLY)
    assert downgraded.body["input"][1] == {"type": "function_call_output", "call_id": "c3", "output": '{"loaded_tools":[{"name":"f","namespace":"late"}]}'}
    assert downgraded.body["tools"] == [
        {"type": "namespace", "name": "mcp", "description": "An MCP server.", "tools": [{"type": "function", "name": "run", "description": f"Run code.\n\n{FREEFORM}", "parameters": RAW_INPUT}]},
        {"type": "namespace", "name": "nd", "tools": [{"type": "function", "name": "run2", "description": FREEFORM, "parameters": RAW_INPUT}]},
        {"type": "function", "name": "later", "defer_loading": True},
        {"type": "namespace", "name": "late", "description": "Loaded later.", "tools": [{"type": "function", "name": "f"}]},
    ]
    assert downgraded.body["tool_choice"] == {"type": "function", "name": "run", "namespace": "mcp"}
    assert downgraded.conversions == ["tool_search outputs sent as function_call_output", "custom tools sent as functions"]


def test_on_a_v1_backend_an_undescribed_namespace_adds_nothing_and_deferred_declared_tools_stay_deferred() -> None:
    body = {
        "input": [user("go"), {"type": "additional_tools", "tools": [{"type": "function", "name": "more", "defer_loading": True}]}],
        "tools": [UNDESCRIBED, {"type": "tool_search", "execution": "client", "description": "Find.", "parameters": None}],
        "tool_choice": {"type": "allowed_tools", "tools": "exec_command"},
    }
    downgraded = downgrade(body, V1_ONLY)
    assert downgraded.body["tools"] == [
        {"type": "function", "name": "nd__run2", "description": FREEFORM, "parameters": RAW_INPUT},
        {"type": "function", "name": "tool_search", "description": "Find.", "parameters": {"type": "object", "properties": {}}},
        {"type": "function", "name": "more", "defer_loading": True},
    ]
    assert downgraded.body["tool_choice"] == {"type": "allowed_tools", "tools": "exec_command"}


@pytest.mark.parametrize("capabilities", [V1_ONLY, EVERYTHING], ids=["v1", "everything"])
def test_a_custom_tool_chosen_is_chosen_as_the_backend_knows_it(capabilities: ResponsesCapabilities) -> None:
    downgraded = downgrade({"input": "hi", "tools": [MCP], "tool_choice": {"type": "custom", "name": "run", "namespace": "mcp"}}, capabilities)
    expected = {"type": "function", "name": "mcp__run"} if capabilities is V1_ONLY else {"type": "custom", "name": "run", "namespace": "mcp"}
    assert downgraded.body["tool_choice"] == expected


def test_two_different_tools_of_one_name_are_a_request_error_on_tools() -> None:
    with pytest.raises(RequestError) as raised:
        downgrade({"input": "hi", "tools": [EXEC_COMMAND, {**EXEC_COMMAND, "description": "Other."}]}, V1_ONLY)
    assert (raised.value.message, raised.value.param) == ("Two different tools are named exec_command: at tools[0] and at tools[1].", "tools")
