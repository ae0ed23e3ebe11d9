"""The ``tools`` and ``tool_choice`` of a Messages request (``anthropic/_tools``), the
thinking they allow, and the prompt-cache breakpoints (``anthropic/request``): exact
tool lists, and the request errors that name what the client got wrong.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.translate.chat.shapes import (
    APPLY_PATCH,
    EXEC_COMMAND,
    TOOL_SEARCH,
    assistant,
    function_call,
    function_output,
    user,
)
from tests.translate.offered import FREEFORM, RAW_INPUT
from toolwire.errors import RequestError

from .test_messages import REDACTED, signed, thinking
from .test_request import translate

JSON = dict[str, Any]
CACHED = "cache_control breakpoints on tools, system and the latest turn"
EPHEMERAL = {"type": "ephemeral"}
EMPTY_SCHEMA = {"type": "object", "properties": {}}
MCP = {
    "type": "namespace",
    "name": "mcp",
    "description": "An MCP server.",
    "tools": [
        {"type": "function", "name": "read", "description": "Read a file.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
        {"type": "function", "name": "bare"},
        {"type": "custom", "name": "run", "description": "Run code."},
    ],
}
ODD = {"type": "function", "name": "odd", "parameters": {"type": "string"}}
HOSTED = [{"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["vs_1"]}, {"type": "image_generation"}]
DECLARED = [EXEC_COMMAND, ODD, MCP, APPLY_PATCH, TOOL_SEARCH, *HOSTED]

EXEC = {"name": "exec_command", "input_schema": EXEC_COMMAND["parameters"], "description": "Runs a command in a PTY."}
MCP_RUN = {
    "name": "mcp__run",
    "description": f"An MCP server.\n\nRun code.\n\n{FREEFORM}\n\n`input` is unconstrained text.",
    "input_schema": RAW_INPUT,
}
SEARCH = {"name": "tool_search", "input_schema": TOOL_SEARCH["parameters"], "description": "Search deferred tools."}
CLIENT_TOOLS = [
    EXEC,
    {"name": "odd", "input_schema": EMPTY_SCHEMA},
    {"name": "mcp__read", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}, "description": "An MCP server.\n\nRead a file."},
    {"name": "mcp__bare", "input_schema": EMPTY_SCHEMA, "description": "An MCP server."},
    MCP_RUN,
    {
        "name": "apply_patch",
        "description": f"Use the `apply_patch` tool to edit files.\n\n{FREEFORM}\n\n`input` must match this Lark grammar:\n"
        + APPLY_PATCH["format"]["definition"],  # type: ignore[index]
        "input_schema": RAW_INPUT,
    },
    {**SEARCH, "cache_control": EPHEMERAL},
]
TOOL_CONVERSIONS = [
    "namespace tools flattened",
    "custom tool mcp.run wrapped as a tool with one string input",
    "custom tool apply_patch wrapped as a tool with one string input",
    "client tool_search sent as a tool",
]


def test_every_kind_of_declared_tool_on_a_backend_that_runs_web_search() -> None:
    translated = translate({"input": "hi", "tools": DECLARED})
    assert translated.body["tools"] == [*CLIENT_TOOLS, {"type": "web_search_20250305", "name": "web_search"}]
    assert translated.warnings == ["hosted tools not sent (this backend cannot run them): file_search, image_generation"]
    assert translated.conversions == [*TOOL_CONVERSIONS, "web_search sent as the backend's web_search server tool", CACHED]


def test_every_kind_of_declared_tool_on_a_backend_without_server_tools() -> None:
    translated = translate({"input": "hi", "tools": DECLARED}, "generic")
    assert translated.body["tools"] == CLIENT_TOOLS
    assert translated.warnings == ["hosted tools not sent (this backend cannot run them): web_search, file_search, image_generation"]
    assert translated.conversions == [*TOOL_CONVERSIONS, CACHED]


def test_web_search_without_live_access_is_not_sent_and_says_why() -> None:
    translated = translate({"input": "hi", "tools": [EXEC_COMMAND, {"type": "web_search", "external_web_access": False}]})
    assert translated.body["tools"] == [{**EXEC, "cache_control": EPHEMERAL}]
    assert translated.warnings == [
        "web_search not sent: the client asked for no live web access (external_web_access: false), and this backend searches live"
    ]


def test_the_cache_breakpoint_is_on_the_last_client_tool_before_the_server_tool() -> None:
    translated = translate({"input": "hi", "tools": [EXEC_COMMAND, {"type": "web_search"}]})
    assert translated.body["tools"] == [{**EXEC, "cache_control": EPHEMERAL}, {"type": "web_search_20250305", "name": "web_search"}]


def test_allowed_tools_sends_the_subset_without_the_server_tool() -> None:
    choice = {
        "type": "allowed_tools",
        "mode": "auto",
        "tools": [{"type": "custom", "name": "run", "namespace": "mcp"}, {"type": "tool_search"}, {"type": "web_search"}],
    }
    translated = translate({"input": "hi", "tools": DECLARED, "tool_choice": choice})
    assert translated.body["tools"] == [MCP_RUN, {**SEARCH, "cache_control": EPHEMERAL}]
    assert translated.body["tool_choice"] == {"type": "auto"}
    assert translated.warnings == ["hosted tools not sent (this backend cannot run them): web_search, file_search, image_generation"]
    assert translated.conversions == [
        "namespace tools flattened",
        "custom tool mcp.run wrapped as a tool with one string input",
        "client tool_search sent as a tool",
        "allowed_tools sent as the subset of tools",
        CACHED,
    ]


def test_allowed_tools_naming_only_the_tool_search() -> None:
    choice = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "tool_search"}]}
    translated = translate({"input": "hi", "tools": [EXEC_COMMAND, TOOL_SEARCH], "tool_choice": choice})
    assert translated.body["tools"] == [{**SEARCH, "cache_control": EPHEMERAL}]


def test_a_tool_search_in_a_namespace_carries_the_namespace_description() -> None:
    namespace = {"type": "namespace", "name": "mcp", "description": "An MCP server.", "tools": [{"type": "tool_search", "execution": "client", "description": "Find."}]}
    translated = translate({"input": "hi", "tools": [namespace]})
    assert translated.body["tools"] == [
        {"name": "mcp__tool_search", "input_schema": EMPTY_SCHEMA, "description": "An MCP server.\n\nFind.", "cache_control": EPHEMERAL}
    ]


def test_allowed_tools_without_a_mode_is_auto() -> None:
    choice = {"type": "allowed_tools", "tools": [{"type": "function", "name": "exec_command"}]}
    translated = translate({"input": "hi", "tools": [EXEC_COMMAND, TOOL_SEARCH], "tool_choice": choice})
    assert translated.body["tools"] == [{**EXEC, "cache_control": EPHEMERAL}]
    assert translated.body["tool_choice"] == {"type": "auto"}


def test_a_forced_choice_with_no_tool_to_send_is_not_sent() -> None:
    translated = translate({"input": "hi", "tools": [HOSTED[1]], "tool_choice": "required"})
    assert "tools" not in translated.body and "tool_choice" not in translated.body
    assert translated.warnings == [
        "hosted tools not sent (this backend cannot run them): file_search",
        "tool_choice not sent: no tool can be sent to this backend",
    ]


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_an_unforced_choice_with_no_tool_to_send_says_nothing(choice: str) -> None:
    translated = translate({"input": "hi", "tools": [HOSTED[1]], "tool_choice": choice})
    assert translated.warnings == ["hosted tools not sent (this backend cannot run them): file_search"]


@pytest.mark.parametrize(
    ("parallel", "choice", "sent", "converted"),
    [
        (False, "none", {"type": "none"}, False),
        (False, "auto", {"type": "auto", "disable_parallel_tool_use": True}, True),
        (True, None, None, False),
    ],
)
def test_parallel_tool_calls_false(parallel: bool, choice: str | None, sent: JSON | None, converted: bool) -> None:
    body: JSON = {"input": "hi", "tools": [EXEC_COMMAND], "parallel_tool_calls": parallel}
    if choice is not None:
        body["tool_choice"] = choice
    translated = translate(body)
    assert translated.body.get("tool_choice") == sent
    assert ("parallel_tool_calls false sent as disable_parallel_tool_use" in translated.conversions) is converted


MODES = "is not 'auto', 'none' or 'required'."


@pytest.mark.parametrize(
    ("choice", "message", "param"),
    [
        ("sometimes", "Invalid 'tool_choice': 'sometimes' is not 'auto', 'none', 'required' or a tool.", "tool_choice"),
        ({"type": "web_search"}, "Invalid 'tool_choice': 'web_search' tools cannot be chosen on a Messages backend.", "tool_choice"),
        ({"type": "allowed_tools", "mode": "any", "tools": []}, f"Invalid 'tool_choice.mode': 'any' {MODES}", "tool_choice.mode"),
        ({"type": "allowed_tools", "tools": "exec_command"}, "Invalid 'tool_choice.tools': expected a list of tools.", "tool_choice.tools"),
        ({"type": "allowed_tools", "tools": ["exec_command"]}, "Invalid 'tool_choice.tools[0]': expected an object.", "tool_choice.tools[0]"),
        (
            {"type": "allowed_tools", "tools": [{"type": "tool_search"}, {"type": "function", "name": 7}]},
            "Invalid 'tool_choice.tools[1]': a tool needs a string 'name'.",
            "tool_choice.tools[1]",
        ),
        (
            {"type": "function", "name": "exec_command", "namespace": 3},
            "Invalid 'tool_choice': a tool needs a string 'name'.",
            "tool_choice",
        ),
        (
            {"type": "custom", "name": "read", "namespace": "mcp2"},
            "Invalid 'tool_choice': the request declares no tool named mcp2.read.",
            "tool_choice",
        ),
        (
            {"type": "allowed_tools", "tools": [{"type": "function", "name": "nope"}]},
            "Invalid 'tool_choice.tools[0]': the request declares no tool named nope.",
            "tool_choice.tools[0]",
        ),
    ],
)
def test_a_tool_choice_that_cannot_be_sent_is_a_request_error(choice: Any, message: str, param: str) -> None:
    with pytest.raises(RequestError) as raised:
        translate({"input": "hi", "tools": [EXEC_COMMAND, MCP], "tool_choice": choice})
    assert (raised.value.message, raised.value.param) == (message, param)


def test_two_different_tools_of_one_name_are_a_request_error_on_tools() -> None:
    other = {**EXEC_COMMAND, "description": "Something else."}
    with pytest.raises(RequestError) as raised:
        translate({"input": "hi", "tools": [EXEC_COMMAND, other]})
    assert raised.value.message == "Two different tools are named exec_command: at tools[0] and at tools[1]."
    assert raised.value.param == "tools"


# ---------------------------------------------------------------- thinking and tools

LOOP = [user("go"), function_call("c1", "exec_command"), function_output("c1", "ok")]


@pytest.mark.parametrize(
    ("body", "thinking_on", "warnings"),
    [
        ({"input": [user("a"), assistant("b"), user("c")]}, True, []),
        ({"input": [LOOP[0], signed(REDACTED), *LOOP[1:]]}, True, []),
        ({"input": [LOOP[0], signed(thinking("plan")), *LOOP[1:]]}, True, []),
        (
            {"input": LOOP},
            False,
            ["reasoning not enabled: the tool loop in progress began without signed thinking (its assistant turn must start with a thinking block)"],
        ),
        (
            {"input": "hi", "tool_choice": {"type": "function", "name": "exec_command"}},
            False,
            ["reasoning not enabled: thinking cannot be on while tool_choice forces a tool"],
        ),
    ],
    ids=["no-loop", "redacted-first", "thinking-first", "unsigned-loop", "forced-tool"],
)
def test_when_thinking_can_be_on(body: JSON, thinking_on: bool, warnings: list[str]) -> None:
    translated = translate({"tools": [EXEC_COMMAND], "reasoning": {"effort": "low"}, **body})
    assert ("thinking" in translated.body) is thinking_on
    assert translated.warnings == warnings


def test_a_conversation_ending_in_thinking_alone_is_marked_on_the_tools_and_system() -> None:
    items = [user("go"), signed(thinking("t")), {"type": "message", "role": "assistant", "content": []}]
    bare = translate({"input": items})
    assert bare.body["messages"][-1] == {"role": "assistant", "content": [thinking("t")]}
    assert bare.conversions == []
    with_tools = translate({"input": items, "tools": [EXEC_COMMAND]})
    assert with_tools.body["tools"] == [{**EXEC, "cache_control": EPHEMERAL}]
    assert with_tools.conversions == [CACHED]
    with_system = translate({"input": items, "instructions": "Be brief."})
    assert with_system.body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    assert with_system.conversions == [CACHED]
