"""Tool definitions: typed by ``type``, hosted tools opaque, every one round-trips exactly."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from toolwire.errors import RequestError
from toolwire.protocol import (
    CustomTool,
    FunctionTool,
    GrammarFormat,
    HostedTool,
    NamespaceTool,
    TextFormat,
    ToolSearchTool,
    WireModel,
    parse_request,
)
from toolwire.protocol._tools import UnknownFormat

from .helpers import parse_tool, with_unknown_fields

LARK = 'start: pragma_source | plain_source\nSOURCE: /[\\s\\S]+/\n'


TOOLS: list[tuple[str, dict[str, Any], type[WireModel]]] = [
    (
        "function",
        {
            "type": "function",
            "name": "exec_command",
            "description": "Runs a command.",
            "strict": False,
            "parameters": {
                "type": "object",
                "properties": {"cmd": {"type": "string"}, "tty": {"type": "boolean"}},
                "required": ["cmd"],
                "additionalProperties": False,
            },
        },
        FunctionTool,
    ),
    (
        "function-deferred-minimal",
        {"type": "function", "name": "f", "defer_loading": True, "parameters": None, "strict": None},
        FunctionTool,
    ),
    ("custom-no-format", {"type": "custom", "name": "note"}, CustomTool),
    ("custom-text", {"type": "custom", "name": "note", "format": {"type": "text"}}, CustomTool),
    (
        "custom-lark",
        {
            "type": "custom",
            "name": "apply_patch",
            "description": "FREEFORM tool",
            "format": {"type": "grammar", "syntax": "lark", "definition": LARK},
        },
        CustomTool,
    ),
    (
        "custom-regex",
        {
            "type": "custom",
            "name": "digits",
            "format": {"type": "grammar", "syntax": "regex", "definition": "^[0-9]+$"},
        },
        CustomTool,
    ),
    (
        "custom-future-format",
        {"type": "custom", "name": "x", "format": {"type": "json_schema", "schema": {}}},
        CustomTool,
    ),
    (
        "namespace-nested",
        {
            "type": "namespace",
            "name": "functions",
            "description": "",
            "tools": [
                {
                    "type": "custom",
                    "name": "exec",
                    "format": {"type": "grammar", "syntax": "lark", "definition": LARK},
                },
                {"type": "function", "name": "wait", "strict": False, "parameters": {"type": "object"}},
                {
                    "type": "namespace",
                    "name": "inner",
                    "description": "deeper",
                    "tools": [{"type": "function", "name": "deep"}, {"type": "web_search"}],
                },
                {"type": "tool_search", "execution": "client"},
            ],
        },
        NamespaceTool,
    ),
    (
        "tool-search",
        {
            "type": "tool_search",
            "execution": "client",
            "description": "Search for tools",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "number"}},
                "required": ["query"],
            },
        },
        ToolSearchTool,
    ),
    ("web-search", {"type": "web_search", "external_web_access": False}, HostedTool),
    (
        "web-search-full",
        {
            "type": "web_search",
            "external_web_access": True,
            "filters": {"allowed_domains": ["example.com"]},
            "user_location": {"type": "approximate", "country": "FR"},
            "search_context_size": "low",
        },
        HostedTool,
    ),
    ("file-search", {"type": "file_search", "vector_store_ids": ["vs_1"], "max_num_results": 4}, HostedTool),
    ("image-generation", {"type": "image_generation", "output_format": "png"}, HostedTool),
    ("code-interpreter", {"type": "code_interpreter", "container": {"type": "auto"}}, HostedTool),
    (
        "mcp",
        {
            "type": "mcp",
            "server_label": "deepwiki",
            "server_url": "https://mcp.deepwiki.com/mcp",
            "require_approval": "never",
            "allowed_tools": ["ask_question"],
        },
        HostedTool,
    ),
    ("local-shell", {"type": "local_shell"}, HostedTool),
    ("future-hosted", {"type": "programmatic_tool_calling", "x": [1, {"y": None}]}, HostedTool),
]

TOOL_PARAMS = [pytest.param(spec, cls, id=name) for name, spec, cls in TOOLS]
EXAMPLE = {name: spec for name, spec, _ in TOOLS}


@pytest.mark.parametrize(("spec", "cls"), TOOL_PARAMS)
def test_tool_is_typed_by_its_type(spec: dict[str, Any], cls: type[WireModel]) -> None:
    assert type(parse_tool(spec)) is cls


@pytest.mark.parametrize(("spec", "cls"), TOOL_PARAMS)
def test_tool_round_trip_is_exact(spec: dict[str, Any], cls: type[WireModel]) -> None:
    original = copy.deepcopy(spec)
    assert parse_tool(spec).dump() == original


@pytest.mark.parametrize(("spec", "cls"), TOOL_PARAMS)
def test_tool_round_trip_keeps_unknown_fields_at_every_level(spec: dict[str, Any], cls: type[WireModel]) -> None:
    # Unknown fields in the tool, in nested namespace tools, in the grammar format, and
    # inside the (opaque) JSON schema too.
    extended = with_unknown_fields(spec)
    parsed = parse_tool(extended)
    assert type(parsed) is cls
    assert parsed.dump() == extended


@pytest.mark.parametrize(("spec", "cls"), TOOL_PARAMS)
def test_a_tool_echoed_without_copying_is_the_same_json(spec: dict[str, Any], cls: type[WireModel]) -> None:
    # A Response echoes the request's tools through shared_dump: the same JSON as dump,
    # unknown fields and nested namespace tools included, no field added.
    assert parse_tool(spec).shared_dump() == spec
    extended = with_unknown_fields(spec)
    assert parse_tool(extended).shared_dump() == extended


def test_custom_formats_are_typed() -> None:
    lark = parse_tool({"type": "custom", "name": "p", "format": {"type": "grammar", "syntax": "lark", "definition": LARK}})
    assert isinstance(lark, CustomTool) and isinstance(lark.format, GrammarFormat)
    assert (lark.format.syntax, lark.format.definition) == ("lark", LARK)
    text = parse_tool({"type": "custom", "name": "t", "format": {"type": "text"}})
    assert isinstance(text, CustomTool) and isinstance(text.format, TextFormat)
    future = parse_tool({"type": "custom", "name": "f", "format": {"type": "json_schema"}})
    assert isinstance(future, CustomTool) and isinstance(future.format, UnknownFormat)


def test_namespace_holds_tools_of_any_kind() -> None:
    namespace = parse_tool(EXAMPLE["namespace-nested"])
    assert isinstance(namespace, NamespaceTool)
    assert [type(tool) for tool in namespace.tools] == [CustomTool, FunctionTool, NamespaceTool, ToolSearchTool]
    inner = namespace.tools[2]
    assert isinstance(inner, NamespaceTool)
    assert [type(tool) for tool in inner.tools] == [FunctionTool, HostedTool]


def test_hosted_tool_is_opaque() -> None:
    hosted = parse_tool({"type": "mcp", "server_label": "x", "headers": {"a": "b"}})
    assert isinstance(hosted, HostedTool)
    assert hosted.type == "mcp"
    assert hosted.model_extra == {"server_label": "x", "headers": {"a": "b"}}


@pytest.mark.parametrize(
    ("spec", "param"),
    [
        ({"type": "function"}, "tools[0].name"),
        ({"type": "function", "name": 7}, "tools[0].name"),
        ({"type": "function", "name": "f", "parameters": []}, "tools[0].parameters"),
        ({"type": "function", "name": "f", "strict": "yes"}, "tools[0].strict"),
        ({"type": "custom", "name": "c", "format": {"type": "grammar", "syntax": "ebnf", "definition": ""}}, "tools[0].format.syntax"),
        ({"type": "custom", "name": "c", "format": {"type": "grammar", "syntax": "lark"}}, "tools[0].format.definition"),
        ({"type": "namespace", "name": "n"}, "tools[0].tools"),
        ({"type": "namespace", "name": "n", "tools": [{"type": "custom"}]}, "tools[0].tools[0].name"),
        ({"type": "namespace", "name": "n", "tools": [{"type": "namespace", "name": "m", "tools": [{"type": "function", "name": 1}]}]}, "tools[0].tools[0].tools[0].name"),
        ({"name": "no_type"}, "tools[0].type"),
        ({"type": ["function"]}, "tools[0].type"),
    ],
)
def test_invalid_tool_names_the_field(spec: dict[str, Any], param: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse_request({"model": "m", "tools": [spec]})
    assert caught.value.param == param
