"""Responses items: typed by ``type``, and ``dump_item(parse_item(x)) == x`` for all of them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolwire.protocol import (
    AdditionalToolsItem,
    CompactionItem,
    CompactionTriggerItem,
    CustomTool,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    GrammarFormat,
    InputFile,
    InputImage,
    InputText,
    ItemReference,
    LocalShellCallItem,
    MessageItem,
    NamespaceTool,
    OutputText,
    ReasoningItem,
    ReasoningText,
    Refusal,
    SummaryText,
    ToolSearchCallItem,
    ToolSearchOutputItem,
    UnknownItem,
    UnknownPart,
    WebSearchCallItem,
    WireModel,
    dump_item,
    parse_item,
)

from .helpers import with_unknown_fields

LARK = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\n%import common.LF\n'

# (id, item JSON as a real client sends it, expected class)
ITEMS: list[tuple[str, dict[str, Any], type[WireModel]]] = [
    ("easy-message-string", {"role": "user", "content": "hello"}, MessageItem),
    ("message-string-typed", {"type": "message", "role": "developer", "content": "be brief"}, MessageItem),
    (
        "message-input-parts",
        {
            "type": "message",
            "id": "msg_1",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "high"},
                {"type": "input_image", "file_id": "file_1", "detail": "auto"},
                {"type": "input_file", "file_id": "file_2", "filename": "a.pdf"},
                {"type": "input_file", "file_data": "data:application/pdf;base64,AA", "file_url": None},
            ],
        },
        MessageItem,
    ),
    (
        "message-output-parts",
        {
            "type": "message",
            "id": "msg_2",
            "role": "assistant",
            "status": "completed",
            "phase": "final_answer",
            "content": [
                {"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []},
                {"type": "refusal", "refusal": "no"},
            ],
        },
        MessageItem,
    ),
    (
        "message-unknown-part",
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_audio", "input_audio": {"data": "AAA", "format": "wav"}}],
        },
        MessageItem,
    ),
    (
        "reasoning-full",
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "**Plan**"}],
            "content": [{"type": "reasoning_text", "text": "think"}, {"type": "text", "text": "raw"}],
            "encrypted_content": "gAAAAB...",
            "status": "completed",
        },
        ReasoningItem,
    ),
    (
        "reasoning-as-codex-replays-it",
        {"type": "reasoning", "summary": [], "content": None, "encrypted_content": None},
        ReasoningItem,
    ),
    (
        "function-call",
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "list_agents",
            "namespace": "collaboration",
            "arguments": '{ "cmd" :"ls",  "n": 1.50 }',
            "status": "completed",
        },
        FunctionCallItem,
    ),
    (
        "function-call-output-string",
        {"type": "function_call_output", "id": "fco_1", "call_id": "call_1", "output": "aborted"},
        FunctionCallOutputItem,
    ),
    (
        "function-call-output-parts",
        {
            "type": "function_call_output",
            "call_id": "call_2",
            "output": [
                {"type": "input_text", "text": "see image"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBOR"},
                {"type": "encrypted_content", "encrypted_content": "xyz"},
            ],
        },
        FunctionCallOutputItem,
    ),
    (
        "custom-tool-call",
        {
            "type": "custom_tool_call",
            "id": "ctc_1",
            "status": "completed",
            "call_id": "call_3",
            "name": "exec",
            "namespace": "functions",
            "input": 'await tools.exec_command({cmd: "pwd"})\n',
        },
        CustomToolCallItem,
    ),
    (
        "custom-tool-call-output-parts",
        {
            "type": "custom_tool_call_output",
            "id": "ctco_1",
            "call_id": "call_3",
            "name": "exec",
            "output": [{"type": "input_text", "text": "Script completed"}],
        },
        CustomToolCallOutputItem,
    ),
    (
        "custom-tool-call-output-string",
        {"type": "custom_tool_call_output", "call_id": "call_4", "output": "Done!"},
        CustomToolCallOutputItem,
    ),
    (
        "tool-search-call-client",
        {
            "type": "tool_search_call",
            "id": "tsc_1",
            "call_id": "call_5",
            "status": "completed",
            "execution": "client",
            "arguments": {"query": "calendar", "limit": 3},
        },
        ToolSearchCallItem,
    ),
    (
        "tool-search-call-server",
        {"type": "tool_search_call", "execution": "server", "arguments": {"query": "x"}},
        ToolSearchCallItem,
    ),
    (
        "tool-search-output",
        {
            "type": "tool_search_output",
            "id": "tso_1",
            "call_id": "call_5",
            "status": "completed",
            "execution": "client",
            "tools": [
                {
                    "type": "namespace",
                    "name": "mcp__calendar__",
                    "description": "Calendar tools.",
                    "tools": [
                        {
                            "type": "function",
                            "name": "create_event",
                            "description": "",
                            "strict": False,
                            "defer_loading": True,
                            "parameters": {"type": "object", "properties": {}},
                        }
                    ],
                }
            ],
        },
        ToolSearchOutputItem,
    ),
    (
        "additional-tools",
        {
            "type": "additional_tools",
            "id": "at_1",
            "role": "developer",
            "tools": [
                {
                    "type": "namespace",
                    "name": "functions",
                    "description": "",
                    "tools": [
                        {
                            "type": "custom",
                            "name": "exec",
                            "description": "Run JavaScript",
                            "format": {"type": "grammar", "syntax": "lark", "definition": LARK},
                        },
                        {"type": "function", "name": "wait", "parameters": {"type": "object"}},
                    ],
                },
                {"type": "tool_search", "execution": "client", "description": "search", "parameters": {}},
            ],
        },
        AdditionalToolsItem,
    ),
    (
        "web-search-call",
        {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search", "query": "weather", "queries": ["weather"]},
        },
        WebSearchCallItem,
    ),
    (
        "local-shell-call",
        {
            "type": "local_shell_call",
            "id": "lsh_1",
            "call_id": "call_6",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls", "-la"], "timeout_ms": 1000, "env": {}},
        },
        LocalShellCallItem,
    ),
    ("compaction", {"type": "compaction", "id": "cmp_1", "encrypted_content": "abc"}, CompactionItem),
    ("compaction-summary-alias", {"type": "compaction_summary", "encrypted_content": "abc"}, CompactionItem),
    ("item-reference", {"type": "item_reference", "id": "msg_9"}, ItemReference),
    ("compaction-trigger", {"type": "compaction_trigger"}, CompactionTriggerItem),
    (
        "unknown-agent-message",
        {
            "type": "agent_message",
            "author": "/root",
            "recipient": "/root/worker",
            "content": [{"type": "encrypted_content", "encrypted_content": "x"}],
        },
        UnknownItem,
    ),
    (
        "unknown-image-generation-call",
        {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "iVBOR"},
        UnknownItem,
    ),
    (
        "unknown-with-call-shape",
        {"type": "program", "call_id": "c", "name": "exec_command", "arguments": {"cmd": "ls"}},
        UnknownItem,
    ),
]

ITEM_PARAMS = [pytest.param(item, cls, id=name) for name, item, cls in ITEMS]
EXAMPLE = {name: item for name, item, _ in ITEMS}


@pytest.mark.parametrize(("item", "cls"), ITEM_PARAMS)
def test_item_is_typed_by_its_type(item: dict[str, Any], cls: type[WireModel]) -> None:
    assert type(parse_item(item)) is cls


@pytest.mark.parametrize(("item", "cls"), ITEM_PARAMS)
def test_round_trip_is_exact(item: dict[str, Any], cls: type[WireModel]) -> None:
    original = copy.deepcopy(item)
    assert dump_item(parse_item(item)) == original
    assert item == original  # parsing does not touch its input


@pytest.mark.parametrize(("item", "cls"), ITEM_PARAMS)
def test_round_trip_keeps_unknown_fields_at_every_level(
    item: dict[str, Any], cls: type[WireModel]
) -> None:
    extended = with_unknown_fields(item)
    parsed = parse_item(extended)
    assert type(parsed) is cls
    assert dump_item(parsed) == extended


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(
    case=st.sampled_from(ITEMS),
    extra=st.dictionaries(st.text(min_size=1).map(lambda key: f"zz_{key}"), json_values, max_size=4),
)
def test_round_trip_any_extra_fields(case: tuple[str, dict[str, Any], type[WireModel]], extra: dict[str, Any]) -> None:
    _, item, cls = case
    extended = {**item, **extra}
    parsed = parse_item(extended)
    assert type(parsed) is cls
    assert dump_item(parsed) == extended


def test_unknown_fields_are_reachable() -> None:
    parsed = parse_item({"type": "function_call", "call_id": "c", "name": "n", "arguments": "{}", "caller": {"x": 1}})
    assert parsed.model_extra == {"caller": {"x": 1}}


# ------------------------------------------------------ typed access


def test_message_parts_are_typed() -> None:
    item = parse_item(EXAMPLE["message-input-parts"])
    assert isinstance(item, MessageItem)
    assert isinstance(item.content, list)
    assert [type(part) for part in item.content] == [InputText, InputImage, InputImage, InputFile, InputFile]
    output = parse_item(EXAMPLE["message-output-parts"])
    assert isinstance(output, MessageItem) and isinstance(output.content, list)
    assert [type(part) for part in output.content] == [OutputText, Refusal]
    unknown = parse_item(EXAMPLE["message-unknown-part"])
    assert isinstance(unknown, MessageItem) and isinstance(unknown.content, list)
    assert isinstance(unknown.content[0], UnknownPart)


def test_message_type_may_be_omitted_and_is_not_added() -> None:
    item = parse_item({"role": "user", "content": "hi"})
    assert isinstance(item, MessageItem)
    assert item.type == "message"
    assert item.content == "hi"
    assert "type" not in dump_item(item)


def test_reasoning_parts_are_typed() -> None:
    item = parse_item(EXAMPLE["reasoning-full"])
    assert isinstance(item, ReasoningItem)
    assert isinstance(item.summary[0], SummaryText)
    assert item.content is not None
    assert [type(part) for part in item.content] == [ReasoningText, ReasoningText]
    assert item.encrypted_content == "gAAAAB..."


def test_explicit_nulls_are_kept() -> None:
    item: dict[str, Any] = {"type": "reasoning", "summary": [], "content": None, "encrypted_content": None}
    assert dump_item(parse_item(item)) == item
    assert dump_item(parse_item({"type": "reasoning", "summary": []})) == {"type": "reasoning", "summary": []}


def test_function_call_arguments_stay_a_raw_string() -> None:
    item = parse_item(EXAMPLE["function-call"])
    assert isinstance(item, FunctionCallItem)
    assert item.arguments == '{ "cmd" :"ls",  "n": 1.50 }'
    assert (item.namespace, item.name, item.call_id) == ("collaboration", "list_agents", "call_1")


def test_outputs_are_string_or_parts() -> None:
    as_string = parse_item(EXAMPLE["function-call-output-string"])
    assert isinstance(as_string, FunctionCallOutputItem) and as_string.output == "aborted"
    as_parts = parse_item(EXAMPLE["function-call-output-parts"])
    assert isinstance(as_parts, FunctionCallOutputItem) and isinstance(as_parts.output, list)
    assert [type(part) for part in as_parts.output] == [InputText, InputImage, UnknownPart]


def test_tool_search_call_arguments_are_an_object() -> None:
    item = parse_item(EXAMPLE["tool-search-call-client"])
    assert isinstance(item, ToolSearchCallItem)
    assert (item.call_id, item.execution) == ("call_5", "client")
    assert item.arguments == {"query": "calendar", "limit": 3}


def test_tools_inside_items_are_typed() -> None:
    output = parse_item(EXAMPLE["tool-search-output"])
    assert isinstance(output, ToolSearchOutputItem)
    namespace = output.tools[0]
    assert isinstance(namespace, NamespaceTool) and isinstance(namespace.tools[0], FunctionTool)
    additional = parse_item(EXAMPLE["additional-tools"])
    assert isinstance(additional, AdditionalToolsItem)
    assert additional.role == "developer"
    functions = additional.tools[0]
    assert isinstance(functions, NamespaceTool)
    exec_tool = functions.tools[0]
    assert isinstance(exec_tool, CustomTool) and isinstance(exec_tool.format, GrammarFormat)
    assert exec_tool.format.syntax == "lark"


def test_unknown_item_keeps_all_its_json() -> None:
    item = {"type": "agent_message", "author": "/root", "content": [{"type": "x", "y": [1, {"z": None}]}]}
    parsed = parse_item(item)
    assert isinstance(parsed, UnknownItem)
    assert parsed.type == "agent_message"
    assert dump_item(parsed) == item
