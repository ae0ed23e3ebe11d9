"""ToolCatalog.from_request: every tool a request declares, wherever it declares it."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from toolwire.errors import RequestError
from toolwire.protocol import CustomTool, FunctionTool, HostedTool, ToolSearchTool, parse_request
from toolwire.tools import CatalogEntry, ConfigurationError, ToolCatalog, ToolKind, ToolName

EXEC_COMMAND = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}}
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
}
TOOL_SEARCH = {"type": "tool_search", "execution": "client", "parameters": {"type": "object"}}
WEB_SEARCH = {"type": "web_search", "external_web_access": False}


def namespace(name: str, *tools: dict[str, Any]) -> dict[str, Any]:
    return {"type": "namespace", "name": name, "description": "", "tools": list(tools)}


def function(name: str, **extra: Any) -> dict[str, Any]:
    return {"type": "function", "name": name, **extra}


def catalog_of(*, tools: list[dict[str, Any]] | None = None, input: list[Any] | None = None) -> ToolCatalog:
    body: dict[str, Any] = {"model": "m", "input": input or []}
    if tools is not None:
        body["tools"] = tools
    return ToolCatalog.from_request(body)


def test_top_level_tools() -> None:
    catalog = catalog_of(tools=[EXEC_COMMAND, APPLY_PATCH, TOOL_SEARCH, WEB_SEARCH, namespace("multi_agent_v1", function("spawn"))])
    assert [entry.tool_name for entry in catalog] == [
        ToolName(None, "exec_command"),
        ToolName(None, "apply_patch"),
        ToolName(None, "tool_search"),
        ToolName(None, "web_search"),
        ToolName("multi_agent_v1", "spawn"),
    ]
    assert [entry.kind for entry in catalog] == [
        ToolKind.FUNCTION,
        ToolKind.CUSTOM,
        ToolKind.TOOL_SEARCH,
        ToolKind.HOSTED,
        ToolKind.FUNCTION,
    ]
    assert [entry.source for entry in catalog] == ["tools[0]", "tools[1]", "tools[2]", "tools[3]", "tools[4].tools[0]"]
    assert len(catalog) == 5


def test_get_returns_the_entry_with_kind_and_original_spec() -> None:
    request = parse_request({"model": "m", "tools": [EXEC_COMMAND, APPLY_PATCH, TOOL_SEARCH, WEB_SEARCH]})
    catalog = ToolCatalog.from_request(request)
    entry = catalog.get(ToolName(None, "apply_patch"))
    assert isinstance(entry, CatalogEntry)
    assert entry.kind is ToolKind.CUSTOM
    assert request.tools is not None
    assert entry.spec is request.tools[1]
    assert isinstance(entry.spec, CustomTool)
    assert entry.spec.dump() == APPLY_PATCH
    assert isinstance(catalog.get(ToolName(None, "exec_command")).spec, FunctionTool)  # type: ignore[union-attr]
    assert isinstance(catalog.get(ToolName(None, "tool_search")).spec, ToolSearchTool)  # type: ignore[union-attr]
    assert isinstance(catalog.get(ToolName(None, "web_search")).spec, HostedTool)  # type: ignore[union-attr]


def test_get_unknown_is_none() -> None:
    catalog = catalog_of(tools=[EXEC_COMMAND, namespace("collaboration", function("list_agents"))])
    assert catalog.get(ToolName(None, "nope")) is None
    assert catalog.get(ToolName(None, "list_agents")) is None  # only inside its namespace
    assert catalog.get(ToolName("functions", "exec_command")) is None
    assert ToolName("collaboration", "list_agents") in catalog
    assert "collaboration.list_agents" not in catalog


def test_each_additional_tools_item() -> None:
    catalog = catalog_of(
        input=[
            {"type": "additional_tools", "role": "developer", "tools": [namespace("functions", APPLY_PATCH | {"name": "exec"}, function("wait"))]},
            {"role": "user", "content": "hi"},
            {"type": "additional_tools", "role": "developer", "tools": [namespace("collaboration", function("list_agents")), TOOL_SEARCH]},
        ]
    )
    assert {str(entry.tool_name): (entry.kind, entry.source) for entry in catalog} == {
        "functions.exec": (ToolKind.CUSTOM, "input[0].tools[0].tools[0]"),
        "functions.wait": (ToolKind.FUNCTION, "input[0].tools[0].tools[1]"),
        "collaboration.list_agents": (ToolKind.FUNCTION, "input[2].tools[0].tools[0]"),
        "tool_search": (ToolKind.TOOL_SEARCH, "input[2].tools[1]"),
    }


def test_tools_attached_to_any_input_item() -> None:
    catalog = catalog_of(
        tools=[EXEC_COMMAND],
        input=[
            {"type": "tool_search_call", "call_id": "c1", "execution": "client", "arguments": {"query": "cal"}},
            {
                "type": "tool_search_output",
                "call_id": "c1",
                "execution": "client",
                "status": "completed",
                "tools": [namespace("mcp__calendar__", function("create_event", defer_loading=True))],
            },
            {"type": "some_future_item", "tools": [function("future_tool")]},
            {"type": "message", "role": "developer", "content": "x", "tools": [function("from_message")]},
        ],
    )
    assert [(entry.tool_name, entry.source) for entry in catalog] == [
        (ToolName(None, "exec_command"), "tools[0]"),
        (ToolName("mcp__calendar__", "create_event"), "input[1].tools[0].tools[0]"),
        (ToolName(None, "future_tool"), "input[2].tools[0]"),
        (ToolName(None, "from_message"), "input[3].tools[0]"),
    ]


def test_unknown_item_with_a_bad_tool_is_a_request_error() -> None:
    with pytest.raises(RequestError) as caught:
        catalog_of(input=[{"role": "user", "content": "x"}, {"type": "future", "tools": [EXEC_COMMAND, {"type": "function"}]}])
    assert caught.value.param == "input[1].tools[1].name"


def test_unknown_item_whose_tools_is_not_a_list_declares_nothing() -> None:
    assert len(catalog_of(input=[{"type": "future", "tools": "all"}])) == 0


def test_namespaces_at_any_depth() -> None:
    deep = namespace("outer", function("a"), namespace("inner", function("b"), namespace("innermost", APPLY_PATCH)))
    catalog = catalog_of(input=[{"type": "additional_tools", "role": "developer", "tools": [deep]}])
    # A call carries one namespace: the one its tool is directly inside.
    assert [entry.tool_name for entry in catalog] == [
        ToolName("outer", "a"),
        ToolName("inner", "b"),
        ToolName("innermost", "apply_patch"),
    ]
    assert catalog.get(ToolName("innermost", "apply_patch")).kind is ToolKind.CUSTOM  # type: ignore[union-attr]


def test_same_name_in_different_namespaces_is_fine() -> None:
    catalog = catalog_of(tools=[function("wait"), namespace("functions", function("wait")), namespace("collaboration", function("wait"))])
    assert len(catalog) == 3


def test_two_different_tools_with_one_name_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"exec_command.*tools\[0\].*input\[0\]\.tools\[0\]"):
        catalog_of(
            tools=[EXEC_COMMAND],
            input=[{"type": "additional_tools", "role": "developer", "tools": [function("exec_command", description="other")]}],
        )
    with pytest.raises(ConfigurationError):
        catalog_of(tools=[EXEC_COMMAND, {"type": "custom", "name": "exec_command"}])
    with pytest.raises(ConfigurationError):
        catalog_of(tools=[namespace("ns", function("x")), namespace("ns", function("x", strict=True))])


def test_identical_duplicate_counts_once() -> None:
    # Codex repeats a definition, e.g. a tool a tool_search_output loaded that is also declared.
    catalog = catalog_of(
        tools=[EXEC_COMMAND, namespace("ns", function("x"))],
        input=[{"type": "tool_search_output", "tools": [dict(EXEC_COMMAND), namespace("ns", function("x"))]}],
    )
    assert len(catalog) == 2
    assert catalog.get(ToolName(None, "exec_command")).source == "tools[0]"  # type: ignore[union-attr]


def test_from_request_accepts_bytes_mapping_and_parsed_request() -> None:
    body = {"model": "m", "tools": [EXEC_COMMAND]}
    for source in (body, orjson.dumps(body), parse_request(body)):
        assert [entry.tool_name for entry in ToolCatalog.from_request(source)] == [ToolName(None, "exec_command")]


def test_string_input_and_no_tools() -> None:
    assert len(ToolCatalog.from_request({"model": "m", "input": "hi"})) == 0


def test_invalid_body_is_a_request_error() -> None:
    with pytest.raises(RequestError) as caught:
        ToolCatalog.from_request(b'{"model": "m", "tools": [{"type": "custom"}]}')
    assert caught.value.param == "tools[0].name"
