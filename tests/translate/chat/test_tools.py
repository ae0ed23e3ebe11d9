"""The Chat ``tools`` and ``tool_choice`` of a translated request (``chat/_tools``)."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.errors import RequestError
from toolwire.protocol import parse_request
from toolwire.tools import ToolKind, ToolName
from toolwire.translate import BackendProfile, translate_request

from .shapes import (
    APPLY_PATCH,
    APPLY_PATCH_GRAMMAR,
    COLLABORATION,
    EXEC_COMMAND,
    FUNCTIONS_NAMESPACE,
    TOOL_SEARCH,
    TOOLS,
    WEB_SEARCH,
    translate,
    user,
)

# ---------------------------------------------------------------- tools


def test_function_tools_keep_their_schema_object() -> None:
    request = parse_request(
        {"model": "m", "input": "hi", "tools": [EXEC_COMMAND, {"type": "function", "name": "bare"}]}
    )
    chat_tools = translate_request(request).chat["tools"]
    assert chat_tools[0] == {
        "type": "function",
        "function": {
            "name": "exec_command",
            "parameters": EXEC_COMMAND["parameters"],
            "description": "Runs a command in a PTY.",
            "strict": False,
        },
    }
    declared = request.tools[0]  # type: ignore[index]
    assert chat_tools[0]["function"]["parameters"] is declared.parameters  # type: ignore[union-attr]
    assert chat_tools[1] == {
        "type": "function",
        "function": {"name": "bare", "parameters": {"type": "object", "properties": {}}},
    }


def test_custom_tool_becomes_a_function_with_one_raw_text_input() -> None:
    translated = translate({"input": "hi", "tools": [APPLY_PATCH]})
    (tool,) = translated.chat["tools"]
    function = tool["function"]
    assert function["name"] == "apply_patch"
    assert function["parameters"] == {
        "type": "object",
        "properties": {
            "input": {
                "type": "string",
                "description": "The raw text input: not JSON, not wrapped in markdown code fences.",
            }
        },
        "required": ["input"],
        "additionalProperties": False,
    }
    description = function["description"]
    assert description.startswith("Use the `apply_patch` tool to edit files.")
    assert "Lark grammar" in description and APPLY_PATCH_GRAMMAR in description
    assert (
        "raw text" in description
        and "NOT JSON" in description
        and "markdown code fences" in description
    )
    assert translated.conversions == ["custom tool apply_patch wrapped as function"]
    assert translated.tools.by_upstream_name("apply_patch").kind is ToolKind.CUSTOM  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("tool_format", "fragment"),
    [
        (None, "`input` is unconstrained text."),
        ({"type": "text"}, "`input` is unconstrained text."),
        (
            {"type": "grammar", "syntax": "regex", "definition": "^[a-z]+$"},
            "`input` must match this regular expression:\n^[a-z]+$",
        ),
    ],
)
def test_custom_tool_format_is_described(tool_format: dict[str, Any] | None, fragment: str) -> None:
    spec: dict[str, Any] = {"type": "custom", "name": "note"}
    if tool_format is not None:
        spec["format"] = tool_format
    (tool,) = translate({"input": "hi", "tools": [spec]}).chat["tools"]
    assert fragment in tool["function"]["description"]


def test_namespaced_tools_are_flattened_with_the_namespace_description() -> None:
    translated = translate({"input": "hi", "tools": [COLLABORATION, FUNCTIONS_NAMESPACE]})
    functions = {tool["function"]["name"]: tool["function"] for tool in translated.chat["tools"]}
    assert list(functions) == [
        "collaboration__list_agents",
        "collaboration__spawn_agent",
        "functions__exec",
    ]
    assert (
        functions["collaboration__list_agents"]["description"]
        == "Tools for working with other agents.\n\nList the agents."
    )
    assert (
        functions["collaboration__spawn_agent"]["description"]
        == "Tools for working with other agents."
    )
    assert functions["functions__exec"]["description"].startswith(
        "Run JavaScript."
    )  # empty namespace description
    restored = translated.tools.by_upstream_name("collaboration__list_agents")
    assert restored is not None and restored.tool_name == ToolName("collaboration", "list_agents")
    assert "namespace tools flattened" in translated.conversions


def test_tools_declared_in_additional_tools_are_sent_without_warning() -> None:
    translated = translate(
        {
            "parallel_tool_calls": False,
            "input": [
                {
                    "type": "additional_tools",
                    "role": "developer",
                    "tools": [FUNCTIONS_NAMESPACE, COLLABORATION],
                },
                user("hi"),
            ],
        }
    )
    assert [t["function"]["name"] for t in translated.chat["tools"]] == [
        "functions__exec",
        "collaboration__list_agents",
        "collaboration__spawn_agent",
    ]
    assert translated.chat["parallel_tool_calls"] is False
    assert translated.chat["messages"] == [{"role": "user", "content": "hi"}]
    assert translated.warnings == []


def test_client_tool_search_is_a_function_and_hosted_tools_are_not_sent() -> None:
    server_search = {"type": "tool_search", "execution": "server"}
    translated = translate(
        {
            "input": "hi",
            "tools": [
                TOOL_SEARCH,
                WEB_SEARCH,
                {"type": "file_search", "vector_store_ids": ["vs_1"]},
            ],
        }
    )
    assert translated.chat["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "tool_search",
                "parameters": TOOL_SEARCH["parameters"],
                "description": "Search deferred tools.",
            },
        }
    ]
    assert translated.warnings == [
        "hosted tools not sent (a Chat Completions backend cannot run them): web_search, file_search"
    ]
    only_hosted = translate(
        {"input": "hi", "tools": [WEB_SEARCH, server_search], "tool_choice": "auto"}
    )
    assert "tools" not in only_hosted.chat
    assert only_hosted.warnings == [
        "hosted tools not sent (a Chat Completions backend cannot run them): web_search, tool_search"
    ]


def test_two_different_tools_with_one_name_are_a_request_error() -> None:
    other = {**EXEC_COMMAND, "description": "something else"}
    with pytest.raises(RequestError) as caught:
        translate({"input": "hi", "tools": [EXEC_COMMAND, other]})
    assert caught.value.param == "tools"


# ---------------------------------------------------------------- tool_choice


@pytest.mark.parametrize(
    ("tool_choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (
            {"type": "function", "name": "exec_command"},
            {"type": "function", "function": {"name": "exec_command"}},
        ),
        (
            {"type": "function", "name": "list_agents", "namespace": "collaboration"},
            {"type": "function", "function": {"name": "collaboration__list_agents"}},
        ),
        (
            {"type": "custom", "name": "apply_patch"},
            {"type": "function", "function": {"name": "apply_patch"}},
        ),
    ],
    ids=["auto", "none", "required", "function", "namespaced-function", "custom"],
)
def test_tool_choice_forms(tool_choice: Any, expected: Any) -> None:
    chat = translate({"input": "hi", "tools": TOOLS, "tool_choice": tool_choice}).chat
    assert chat["tool_choice"] == expected
    assert chat["parallel_tool_calls"] is True
    assert len(chat["tools"]) == 6


def test_allowed_tools_sends_only_the_subset_and_the_mode() -> None:
    tool_choice = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [
            {"type": "function", "name": "exec_command"},
            {"type": "custom", "name": "apply_patch"},
            {"type": "function", "name": "list_agents", "namespace": "collaboration"},
            {"type": "web_search"},
        ],
    }
    translated = translate({"input": "hi", "tools": TOOLS, "tool_choice": tool_choice})
    assert [t["function"]["name"] for t in translated.chat["tools"]] == [
        "exec_command",
        "apply_patch",
        "collaboration__list_agents",
    ]
    assert translated.chat["tool_choice"] == "required"
    assert len(translated.tools) == 6, "the table still maps every declared callable tool"


@pytest.mark.parametrize(
    ("tool_choice", "param"),
    [
        ({"type": "web_search_preview"}, "tool_choice"),
        ({"type": "mcp", "server_label": "x"}, "tool_choice"),
        ({"type": "function", "name": "nope"}, "tool_choice"),
        (
            {"type": "function", "name": "list_agents"},
            "tool_choice",
        ),  # declared only inside a namespace
        ({"type": "function"}, "tool_choice"),
        ("sometimes", "tool_choice"),
        (
            {
                "type": "allowed_tools",
                "mode": "auto",
                "tools": [{"type": "function", "name": "nope"}],
            },
            "tool_choice.tools[0]",
        ),
    ],
    ids=[
        "hosted",
        "mcp",
        "undeclared",
        "missing-namespace",
        "no-name",
        "bad-string",
        "allowed-undeclared",
    ],
)
def test_tool_choice_errors(tool_choice: Any, param: str) -> None:
    with pytest.raises(RequestError) as caught:
        translate({"input": "hi", "tools": TOOLS, "tool_choice": tool_choice})
    assert caught.value.param == param


def test_tool_choice_and_parallel_calls_follow_the_profile() -> None:
    profile = BackendProfile(supports_tool_choice=False, supports_parallel_tool_calls=False)
    chat = translate(
        {"input": "hi", "tools": TOOLS, "tool_choice": "required", "parallel_tool_calls": True},
        profile,
    ).chat
    assert "tool_choice" not in chat and "parallel_tool_calls" not in chat
    assert len(chat["tools"]) == 6


def test_no_tools_means_no_tool_fields() -> None:
    translated = translate({"input": "hi", "tool_choice": "required", "parallel_tool_calls": True})
    assert set(translated.chat) == {"model", "messages"}
    assert translated.warnings == ["tool_choice not sent: no tool can be sent to this backend"]


