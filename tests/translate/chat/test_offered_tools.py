"""The tools a Chat backend is offered (``chat/_tools``, the shared ``_tools``), spelled out
whole, with the conversions and warnings an operator reads; and every request error of
``tool_choice`` and ``text.format`` with the message a client gets.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.translate.offered import FREEFORM, RAW_INPUT
from toolwire.errors import RequestError
from toolwire.translate import PRESETS

from .shapes import EXEC_COMMAND, TOOL_SEARCH, translate

JSON = dict[str, Any]
MCP = {
    "type": "namespace",
    "name": "mcp",
    "description": "An MCP server.",
    "tools": [
        {"type": "function", "name": "read", "description": "Read a file.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
        {"type": "function", "name": "bare"},
        {"type": "custom", "name": "run", "description": "Run code."},
        {"type": "custom", "name": "rx", "format": {"type": "grammar", "syntax": "regex", "definition": "[a-z]+"}},
        {"type": "custom", "name": "fmt", "format": {"type": "future_format"}},
    ],
}
FILE_SEARCH = {"type": "file_search", "vector_store_ids": ["vs_1"]}
DECLARED = [EXEC_COMMAND, MCP, TOOL_SEARCH, FILE_SEARCH]


def function(name: str, **fields: Any) -> JSON:
    return {"type": "function", "function": {"name": name, **fields}}


def freeform(name: str, format_text: str, description: str = "") -> JSON:
    return function(name, description=f"An MCP server.\n\n{description}{FREEFORM}\n\n{format_text}", parameters=RAW_INPUT)


MCP_RUN = freeform("mcp__run", "`input` is unconstrained text.", "Run code.\n\n")
SEARCH = function("tool_search", parameters=TOOL_SEARCH["parameters"], description="Search deferred tools.")
FILE_SEARCH_NOT_SENT = "hosted tools not sent (a Chat Completions backend cannot run them): file_search"


def test_every_kind_of_declared_tool() -> None:
    translated = translate({"input": "hi", "tools": DECLARED})
    assert translated.chat["tools"] == [
        function("exec_command", parameters=EXEC_COMMAND["parameters"], description="Runs a command in a PTY.", strict=False),
        function("mcp__read", parameters={"type": "object", "properties": {"path": {"type": "string"}}}, description="An MCP server.\n\nRead a file."),
        function("mcp__bare", parameters={"type": "object", "properties": {}}, description="An MCP server."),
        MCP_RUN,
        freeform("mcp__rx", "`input` must match this regular expression:\n[a-z]+"),
        freeform("mcp__fmt", "`input` format: future_format."),
        SEARCH,
    ]
    assert translated.warnings == [FILE_SEARCH_NOT_SENT]
    assert translated.conversions == [
        "namespace tools flattened",
        "custom tool mcp.run wrapped as function",
        "custom tool mcp.rx wrapped as function",
        "custom tool mcp.fmt wrapped as function",
        "client tool_search sent as a function",
    ]


@pytest.mark.parametrize(
    ("choice", "sent_as_serialized"),
    [(None, True), ("required", True), ({"type": "allowed_tools", "tools": [{"type": "tool_search"}]}, False)],
    ids=["every tool", "every tool, one required", "a subset"],
)
def test_the_tools_go_upstream_as_serialized_once_when_all_are_sent(choice: Any, sent_as_serialized: bool) -> None:
    body = {"input": "hi", "tools": DECLARED, **({"tool_choice": choice} if choice is not None else {})}
    translated = translate(body)
    wire = translated.wire_body()
    assert orjson.dumps(wire) == orjson.dumps(translated.chat)
    assert isinstance(wire["tools"], orjson.Fragment) is sent_as_serialized
    assert isinstance(translated.chat["tools"], list)  # what is read stays readable
    if sent_as_serialized:  # the very bytes kept with the declared tools, not serialized again
        assert translate(body).serialized_tools is translated.serialized_tools is not None


def test_allowed_tools_without_a_mode_sends_the_subset_as_auto() -> None:
    choice = {"type": "allowed_tools", "tools": [{"type": "custom", "name": "run", "namespace": "mcp"}, {"type": "tool_search"}]}
    translated = translate({"input": "hi", "tools": DECLARED, "tool_choice": choice})
    assert translated.chat["tools"] == [MCP_RUN, SEARCH]
    assert translated.chat["tool_choice"] == "auto"
    assert translated.warnings == [FILE_SEARCH_NOT_SENT]
    assert translated.conversions == [
        "namespace tools flattened",
        "custom tool mcp.run wrapped as function",
        "client tool_search sent as a function",
        "allowed_tools sent as the subset of tools",
    ]


@pytest.mark.parametrize(
    ("choice", "warnings"),
    [
        ("none", [FILE_SEARCH_NOT_SENT]),
        ("auto", [FILE_SEARCH_NOT_SENT]),
        ("required", [FILE_SEARCH_NOT_SENT, "tool_choice not sent: no tool can be sent to this backend"]),
    ],
)
def test_a_choice_with_no_tool_to_send(choice: str, warnings: list[str]) -> None:
    translated = translate({"input": "hi", "tools": [FILE_SEARCH], "tool_choice": choice})
    assert "tool_choice" not in translated.chat
    assert translated.warnings == warnings


@pytest.mark.parametrize(
    ("choice", "message", "param"),
    [
        ("sometimes", "Invalid 'tool_choice': 'sometimes' is not 'auto', 'none', 'required' or a tool.", "tool_choice"),
        ({"type": "web_search"}, "Invalid 'tool_choice': 'web_search' tools cannot run on a Chat Completions backend.", "tool_choice"),
        ({"type": "allowed_tools", "mode": "any", "tools": []}, "Invalid 'tool_choice.mode': 'any' is not 'auto', 'none' or 'required'.", "tool_choice.mode"),
        ({"type": "allowed_tools", "tools": "exec_command"}, "Invalid 'tool_choice.tools': expected a list of tools.", "tool_choice.tools"),
        ({"type": "allowed_tools", "tools": ["exec_command"]}, "Invalid 'tool_choice.tools[0]': expected an object.", "tool_choice.tools[0]"),
        ({"type": "function", "name": 7}, "Invalid 'tool_choice': a tool needs a string 'name'.", "tool_choice"),
        ({"type": "custom", "name": "read", "namespace": "mcp2"}, "Invalid 'tool_choice': the request declares no tool named mcp2.read.", "tool_choice"),
    ],
)
def test_a_tool_choice_that_cannot_be_sent_is_a_request_error(choice: Any, message: str, param: str) -> None:
    with pytest.raises(RequestError) as raised:
        translate({"input": "hi", "tools": DECLARED, "tool_choice": choice})
    assert (raised.value.message, raised.value.param) == (message, param)


@pytest.mark.parametrize(
    ("text", "message", "param"),
    [
        ({"format": "json"}, "Invalid 'text.format': expected an object.", "text.format"),
        ({"format": {"type": "json_schema", "name": 3, "schema": {}}}, "Invalid 'text.format.name': expected a string.", "text.format.name"),
        ({"format": {"type": "json_schema", "name": "n", "schema": []}}, "Invalid 'text.format.schema': expected an object.", "text.format.schema"),
    ],
)
def test_a_text_format_that_cannot_be_sent_is_a_request_error(text: JSON, message: str, param: str) -> None:
    with pytest.raises(RequestError) as raised:
        translate({"input": "hi", "text": text})
    assert (raised.value.message, raised.value.param) == (message, param)


def test_fields_without_a_chat_equivalent_are_named_in_one_warning() -> None:
    translated = translate(
        {
            "input": "hi",
            "text": {"format": {"type": "future"}},
            "reasoning": {"effort": "high", "summary": "auto", "generate_summary": "x"},
            "max_output_tokens": 100,
            "truncation": "disabled",
            "top_logprobs": 3,
            "store": False,
        },
        PRESETS["openai"],
    )
    assert translated.chat == {"model": "gpt-5.5", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 100, "reasoning_effort": "high"}
    assert translated.warnings == [
        "request fields not forwarded (no Chat Completions equivalent): reasoning.generate_summary, reasoning.summary, text.format (future), top_logprobs"
    ]
