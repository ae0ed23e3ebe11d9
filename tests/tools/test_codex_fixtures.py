"""The catalog of real Codex CLI requests holds the tools each tool protocol declares."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.protocol.codex_fixtures import FIXTURES, load, model_of
from toolwire.protocol import CustomTool, GrammarFormat, ToolSearchTool, parse_request
from toolwire.tools import ToolCatalog, ToolKind, ToolName, decode_call


def catalog_for(path: Path) -> ToolCatalog:
    raw, _ = load(path)
    return ToolCatalog.from_request(raw)


def assert_lark_custom(catalog: ToolCatalog, tool_name: ToolName) -> None:
    entry = catalog.get(tool_name)
    assert entry is not None, f"{tool_name} not in catalog"
    assert entry.kind is ToolKind.CUSTOM
    assert isinstance(entry.spec, CustomTool)
    assert isinstance(entry.spec.format, GrammarFormat)
    assert entry.spec.format.syntax == "lark"
    assert entry.spec.format.definition


@pytest.mark.parametrize("path", FIXTURES)
def test_catalog_finds_the_expected_tools(path: Path) -> None:
    catalog = catalog_for(path)
    model = model_of(path)
    if model == "gpt-5.6-terra":
        # V2: namespace `functions` (with the custom `exec`) and `collaboration`, both in additional_tools.
        assert_lark_custom(catalog, ToolName("functions", "exec"))
        exec_entry = catalog.get(ToolName("functions", "exec"))
        assert exec_entry is not None and exec_entry.source.startswith("input[0].tools[")
        assert catalog.get(ToolName(None, "exec")) is None
        collaboration = [entry for entry in catalog if entry.tool_name.namespace == "collaboration"]
        assert collaboration, "namespace collaboration"
        assert all(entry.kind is ToolKind.FUNCTION for entry in collaboration)
        assert ToolName("collaboration", "list_agents") in catalog
        assert all(entry.source.startswith("input[") for entry in catalog)
    else:
        # V1: exec_command is a top-level function tool.
        exec_command = catalog.get(ToolName(None, "exec_command"))
        assert exec_command is not None
        assert exec_command.kind is ToolKind.FUNCTION
        assert exec_command.source.startswith("tools[")
        web_search = catalog.get(ToolName(None, "web_search"))
        assert web_search is not None and web_search.kind is ToolKind.HOSTED
    if model == "gpt-5.5":
        assert_lark_custom(catalog, ToolName(None, "apply_patch"))
        tool_search = catalog.get(ToolName(None, "tool_search"))
        assert tool_search is not None and tool_search.kind is ToolKind.TOOL_SEARCH
        assert isinstance(tool_search.spec, ToolSearchTool)
        assert tool_search.spec.execution == "client"


@pytest.mark.parametrize("path", FIXTURES)
def test_every_replayed_call_names_a_declared_tool_of_its_kind(path: Path) -> None:
    _, body = load(path)
    request = parse_request(body)
    catalog = ToolCatalog.from_request(request)
    for item in request.input_items():
        call = decode_call(item)
        if call is None:
            continue
        entry = catalog.get(call.tool_name)
        assert entry is not None, f"{call.tool_name} is not declared"
        assert entry.kind is call.payload.kind
