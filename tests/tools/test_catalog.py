"""ToolCatalog.from_request: every tool a request declares, wherever it declares it."""

from __future__ import annotations

import uuid
from types import MappingProxyType
from typing import Any

import orjson
import pytest

from toolwire.errors import RequestError
from toolwire.protocol import (
    KNOWN_HISTORIES,
    CustomTool,
    FunctionTool,
    HostedTool,
    ResponsesRequest,
    ToolSearchTool,
    parse_request,
)
from toolwire.protocol._tool_cache import TOOL_LISTS
from toolwire.tools import CatalogEntry, ConfigurationError, ToolCatalog, ToolKind, ToolName
from toolwire.tools._catalog import _CATALOGS

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
    for source in (body, MappingProxyType(body), orjson.dumps(body), parse_request(body)):
        assert [entry.tool_name for entry in ToolCatalog.from_request(source)] == [ToolName(None, "exec_command")]


def test_a_namespaced_tool_keeps_its_namespace_and_the_namespace_description() -> None:
    catalog = catalog_of(
        tools=[{"type": "namespace", "name": "browser", "description": "Browse the web.", "tools": [WEB_SEARCH, function("open")]}]
    )
    assert [(entry.tool_name, entry.kind, entry.namespace_description) for entry in catalog] == [
        (ToolName("browser", "web_search"), ToolKind.HOSTED, "Browse the web."),
        (ToolName("browser", "open"), ToolKind.FUNCTION, "Browse the web."),
    ]
    assert catalog_of(tools=[EXEC_COMMAND]).get(ToolName(None, "exec_command")).namespace_description is None  # type: ignore[union-attr]


def test_items_with_other_extra_fields_declare_nothing() -> None:
    catalog = catalog_of(
        tools=[EXEC_COMMAND],
        input=[{"type": "future_item", "payload": {"tools_like": True}}, {"type": "message", "role": "user", "content": "hi", "phase": "x"}],
    )
    assert [entry.source for entry in catalog] == ["tools[0]"]


def test_string_input_and_no_tools() -> None:
    assert len(ToolCatalog.from_request({"model": "m", "input": "hi"})) == 0


def test_invalid_body_is_a_request_error() -> None:
    with pytest.raises(RequestError) as caught:
        ToolCatalog.from_request(b'{"model": "m", "tools": [{"type": "custom"}]}')
    assert caught.value.param == "tools[0].name"


# ---------------------------------------------------------------- shared between requests


def parsed(*, tools: list[dict[str, Any]] | None = None, input: list[Any] | None = None) -> ToolCatalog:
    """The catalog of a body sent as JSON, the way the gateway gets it."""
    body: dict[str, Any] = {"model": "m", "input": input or []}
    if tools is not None:
        body["tools"] = tools
    return ToolCatalog.from_request(parse_request(orjson.dumps(body)))


CODEX_V2_INPUT: list[Any] = [
    {"type": "additional_tools", "role": "developer", "tools": [namespace("functions", EXEC_COMMAND, APPLY_PATCH), WEB_SEARCH]},
    {"role": "user", "content": "hi"},
]


def test_the_same_declared_tools_are_the_same_catalog() -> None:
    first = parsed(tools=[TOOL_SEARCH], input=CODEX_V2_INPUT)
    assert parsed(tools=[TOOL_SEARCH], input=CODEX_V2_INPUT) is first
    assert parsed(tools=[TOOL_SEARCH], input=[*CODEX_V2_INPUT, {"role": "user", "content": "more"}]) is first
    assert [(str(entry.tool_name), entry.source) for entry in first] == [
        ("tool_search", "tools[0]"),
        ("functions.exec_command", "input[0].tools[0].tools[0]"),
        ("functions.apply_patch", "input[0].tools[0].tools[1]"),
        ("web_search", "input[0].tools[1]"),
    ]


def test_the_same_tools_at_another_place_are_another_catalog_with_its_sources() -> None:
    first = parsed(input=CODEX_V2_INPUT)
    moved = parsed(input=[{"role": "user", "content": "first"}, *CODEX_V2_INPUT])
    assert moved is not first
    assert [entry.source for entry in moved] == [
        "input[1].tools[0].tools[0]",
        "input[1].tools[0].tools[1]",
        "input[1].tools[1]",
    ]
    assert all(a.spec is b.spec for a, b in zip(first, moved, strict=True))


def test_changed_tools_are_another_catalog() -> None:
    first = parsed(tools=[EXEC_COMMAND, APPLY_PATCH])
    changed = parsed(tools=[EXEC_COMMAND, APPLY_PATCH | {"description": "Edit files."}])
    assert changed is not first
    assert changed.get(ToolName(None, "apply_patch")).spec.dump()["description"] == "Edit files."  # type: ignore[union-attr]


def test_a_duplicate_name_is_an_error_every_time_with_its_sources() -> None:
    input = [{"role": "user", "content": "hi"}, {"type": "additional_tools", "role": "developer", "tools": [function("exec_command", description="other")]}]
    parsed(tools=[EXEC_COMMAND])  # both lists are kept: only the catalog is new
    parsed(input=input)
    for _ in range(2):
        with pytest.raises(ConfigurationError) as caught:
            parsed(tools=[EXEC_COMMAND], input=input)
        assert caught.value.message == "Two different tools are named exec_command: at tools[0] and at input[1].tools[0]."


def test_tools_in_an_unknown_item_are_shared_and_checked() -> None:
    future = {"type": "some_future_item", "tools": [EXEC_COMMAND, namespace("ns", function("x"))]}
    first, second = parsed(input=[future]), parsed(input=[{"role": "user", "content": "hi"}, future])
    assert [entry.source for entry in second] == ["input[1].tools[0]", "input[1].tools[1].tools[0]"]
    assert all(a.spec is b.spec for a, b in zip(first, second, strict=True))
    bad = {"type": "some_future_item", "tools": [EXEC_COMMAND, namespace("ns", function(5))]}  # type: ignore[arg-type]
    for _ in range(2):
        with pytest.raises(RequestError) as caught:
            parsed(input=[{"role": "user", "content": "hi"}, bad])
        assert caught.value.param == "input[1].tools[1].tools[0].name"


def test_catalogs_of_unshared_specs_are_still_right() -> None:
    # A body given as a dict is validated anew each time: new specs, a new catalog.
    first, second = catalog_of(tools=[EXEC_COMMAND]), catalog_of(tools=[EXEC_COMMAND])
    assert first is not second
    assert [entry.tool_name for entry in first] == [entry.tool_name for entry in second] == [ToolName(None, "exec_command")]


def test_lists_validated_anew_make_a_new_catalog() -> None:
    first = parsed(tools=[EXEC_COMMAND, function("unkept")])
    TOOL_LISTS.clear()
    KNOWN_HISTORIES.clear()  # the same body again would continue its history, specs and all
    second = parsed(tools=[EXEC_COMMAND, function("unkept")])  # validated anew: new specs
    assert second is not first
    assert parsed(tools=[EXEC_COMMAND, function("unkept")]) is second


def test_what_is_derived_from_a_catalog_is_built_once_and_kept_with_it() -> None:
    built: list[ToolCatalog] = []

    def names(catalog: ToolCatalog) -> list[str]:
        built.append(catalog)
        return [str(entry.tool_name) for entry in catalog]

    catalog = parsed(tools=[EXEC_COMMAND, APPLY_PATCH])
    assert catalog.derived(names) == ["exec_command", "apply_patch"]
    assert parsed(tools=[EXEC_COMMAND, APPLY_PATCH]).derived(names) is catalog.derived(names)
    assert built == [catalog]
    empty = ToolCatalog.from_request({"model": "m", "input": "no tools"})  # built anew every time
    assert empty.derived(names) == [] and empty.derived(names) is empty.derived(names)
    assert built == [catalog, empty]


def test_the_catalog_cache_weighs_what_it_keeps_by_the_lists_json_bytes() -> None:
    # The cache keeps the tool lists its catalogs were built from: its bound is in bytes.
    _CATALOGS.clear()
    tools = [function("weighed", description="w" * 5000), EXEC_COMMAND]
    request = parse_request(orjson.dumps({"model": "m", "tools": tools}))
    ToolCatalog.from_request(request)
    assert request.tools is not None
    assert _CATALOGS.weight == TOOL_LISTS.json_size(request.tools) > 5000


def test_tools_of_an_unknown_item_too_deep_to_key_are_still_read() -> None:
    # A request built without parse_request may nest deeper than a body may: its raw item
    # tools cannot be serialized as a key, and are validated without being kept.
    deep: Any = 1
    for _ in range(300):
        deep = {"x": deep}
    request = ResponsesRequest.model_validate(
        {"model": "m", "input": [{"type": "future", "tools": [function("deep", parameters=deep)]}]}
    )
    for _ in range(2):
        assert [entry.source for entry in ToolCatalog.from_request(request)] == ["input[0].tools[0]"]


def test_a_kept_catalog_is_never_given_to_other_tools_that_reuse_its_specs_memory() -> None:
    # A kept catalog is found by the ids of the specs it was built from: it must keep those
    # specs alive (a namespace's own spec is in no entry), or a later request's new specs
    # could take their addresses, and that request would get another request's tools.
    for index in range(300):
        request = parse_request(orjson.dumps({"model": "m", "tools": [namespace(f"ns{index}", function(f"f{index}"))]}))
        assert [entry.tool_name for entry in ToolCatalog.from_request(request)] == [ToolName(f"ns{index}", f"f{index}")]
        del request
        TOOL_LISTS.clear()  # only the catalog cache may still hold the specs


def test_a_continued_history_whose_tools_were_never_listed_is_read_for_them() -> None:
    # The history the request continues was parsed, but no catalog was made of it (its
    # request failed before that, e.g. on an unknown model): its items are walked too.
    KNOWN_HISTORIES.clear()
    declared = function(f"alpha_{uuid.uuid4().hex}")
    first = [{"type": "additional_tools", "role": "developer", "tools": [declared]}, {"role": "user", "content": "hi"}]
    head = {"model": "m", "stream": True}
    parse_request(orjson.dumps({**head, "input": first, "prompt_cache_key": "t"}))
    request = parse_request(orjson.dumps({**head, "input": [*first, {"role": "user", "content": "more"}], "prompt_cache_key": "t"}))
    link = request.history()
    assert link is not None and link.known == 2  # it did continue the first body's history
    assert ToolName(None, declared["name"]) in ToolCatalog.from_request(request)
