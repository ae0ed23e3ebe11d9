"""What the wires share, seen from where a user meets it: the reasoning envelope's edges,
a warning that names its first five places, the errors a backend sends inside its
stream, a tool search's arguments and its listing of what it loaded, and the writer's
own defaults.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from toolwire.protocol import parse_request
from toolwire.tools import ToolCatalog, ToolName
from toolwire.translate import (
    ResponsesEventWriter,
    UpstreamToolTable,
    flat_name,
    open_reasoning,
    open_reasoning_blocks,
    seal_reasoning,
    upstream_call_id,
)

from .chat.shapes import TOOL_SEARCH, translate, user
from .chat.test_stream import chunk, run

JSON = dict[str, Any]


def envelope(payload: Any) -> str:
    return "toolwire.r1." + base64.urlsafe_b64encode(orjson.dumps(payload)).decode()


@pytest.mark.parametrize(
    "sealed",
    [None, "", "gAAAA-foreign", "toolwire.r1.%%%", envelope([1]), envelope({"text": 5}), envelope("text")],
)
def test_what_is_not_an_intact_envelope_opens_to_nothing(sealed: str | None) -> None:
    assert (open_reasoning(sealed), open_reasoning_blocks(sealed)) == (None, None)


def test_an_envelope_opens_to_what_was_sealed() -> None:
    assert open_reasoning(seal_reasoning("t")) == "t" and open_reasoning_blocks(seal_reasoning("t")) is None
    assert open_reasoning_blocks(envelope({"text": "t", "blocks": []})) is None
    assert open_reasoning_blocks(envelope({"text": "t", "blocks": [{"type": "thinking"}, 1]})) is None
    blocks = [{"type": "thinking", "thinking": "t", "signature": "s"}]
    assert open_reasoning_blocks(seal_reasoning("t", blocks=blocks)) == blocks


@pytest.mark.parametrize(("skipped", "suffix"), [(5, ""), (6, " and 1 more"), (8, " and 3 more")])
def test_a_warning_names_its_first_five_places(skipped: int, suffix: str) -> None:
    search = {"type": "web_search_call", "id": "ws", "status": "completed", "action": {"type": "search"}}
    warnings = translate({"input": [user("a"), *[search] * skipped]}).warnings
    places = ", ".join(f"web_search_call at input[{index}]" for index in range(1, 6))
    assert warnings == [f"input items skipped (no Chat Completions equivalent): {places}{suffix}"]


@pytest.mark.parametrize(
    ("sent", "error"),
    [
        ({"object": "error", "message": "boom flat", "code": 400}, {"code": "server_error", "message": "boom flat"}),
        ({"error": "plain string"}, {"code": "server_error", "message": "plain string"}),
        ({"error": {"message": "ctx", "code": "context_length_exceeded"}}, {"code": "context_length_exceeded", "message": "ctx"}),
        ({"error": {"code": 5}}, {"code": "server_error", "message": "The upstream reported an error."}),
        ({"error": {}, "object": "chat.completion.chunk"}, None),
    ],
)
def test_an_error_a_backend_sends_inside_its_stream(sent: JSON, error: JSON | None) -> None:
    result = run([chunk(role="assistant", content="x"), sent])
    assert result.translator.response["error"] == error


def test_a_tool_searchs_empty_arguments_and_its_listing_of_what_it_loaded() -> None:
    note = {"type": "custom", "name": "note", "format": {"type": "text"}}
    loaded = [{"type": "custom", "name": "note2", "description": "\n\nWrites a note.\nMore."}, {"type": "web_search"}]
    translated = translate(
        {
            "tools": [TOOL_SEARCH, note],
            "input": [
                user("go"),
                {"type": "tool_search_call", "call_id": "c1", "execution": "client", "arguments": ""},
                {"type": "tool_search_call", "call_id": "c2", "execution": "client", "arguments": None},
                {"type": "tool_search_output", "call_id": "c1", "execution": "client", "tools": loaded},
            ],
        }
    )
    call = {"type": "function", "function": {"name": "tool_search", "arguments": "{}"}}
    assert translated.chat["messages"][1:] == [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", **call}, {"id": "c2", **call}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"loaded_tools":[{"name":"note2","description":"Writes a note."}]}'},
        {"role": "tool", "tool_call_id": "c2", "content": "aborted"},
    ]
    assert translated.chat["tools"][1]["function"]["description"].endswith("\n\n`input` is unconstrained text.")


def test_the_writers_error_defaults_to_a_server_error() -> None:
    writer = ResponsesEventWriter(parse_request(orjson.dumps({"model": "m", "input": "hi"})), response_id="resp_w", created_at=1, model="m")
    writer.error("boom")
    writer.reasoning_delta("rs_1", 0, "a")
    writer.reasoning_done("rs_1", 0, "a")
    error, delta, done = writer.take()
    assert (error["code"], error["error"]) == ("server_error", {"type": "server_error", "code": "server_error", "message": "boom", "param": None})
    assert (delta["content_index"], done["content_index"]) == (0, 0)


@pytest.mark.parametrize(
    ("tool_name", "flat"),
    [
        (ToolName("collaboration", "list_agents"), "collaboration__list_agents"),
        (ToolName("mcp__srv__", "t"), "mcp__srv__t"),
        (ToolName("ns", "a.b"), "ns__a_b_fc5e2851"),
        (ToolName(None, "x" * 70), "x" * 55 + "_c71bd109"),
    ],
)
def test_flat_names_are_valid_and_a_changed_one_carries_a_hash_of_the_original(tool_name: ToolName, flat: str) -> None:
    assert flat_name(tool_name) == flat and len(flat) <= 64


@pytest.mark.parametrize(
    ("call_id", "upstream"),
    [("ok_id-1", "ok_id-1"), ("call with spaces", "call_2e5817b7d8a7b4caa856e64c063ee4b8"), ("c" * 41, "call_2d55900a1d3409d7a599bb69946cbd9a")],
)
def test_a_call_id_a_chat_backend_cannot_take_is_hashed(call_id: str, upstream: str) -> None:
    assert upstream_call_id(call_id) == upstream


def test_two_tools_whose_flat_names_collide_keep_apart_in_the_history_too() -> None:
    def function(name: str) -> JSON:
        return {"type": "function", "name": name, "parameters": {"type": "object", "properties": {}}}

    tools = [
        {"type": "namespace", "name": "a", "description": "", "tools": [function("b__c")]},
        {"type": "namespace", "name": "a__b", "description": "", "tools": [function("c")]},
    ]
    history = [user("go"), {"type": "function_call", "call_id": "x1", "name": "c", "namespace": "a__b", "arguments": "{}"}, {"type": "function_call_output", "call_id": "x1", "output": "ok"}]
    translated = translate({"tools": tools, "input": history})
    assert [tool["function"]["name"] for tool in translated.chat["tools"]] == ["a__b__c", "a__b__c_57a76311"]
    assert translated.chat["messages"][1]["tool_calls"][0]["function"]["name"] == "a__b__c_57a76311"


def test_a_hashed_flat_name_that_is_taken_is_salted_until_free() -> None:
    def function(name: str) -> JSON:
        return {"type": "function", "name": name, "parameters": {"type": "object", "properties": {}}}

    tools = [
        {"type": "namespace", "name": "a", "description": "", "tools": [function("b__c")]},
        function("a__b__c_57a76311"),  # the hashed name a__b.c would get
        function("a__b__c_d78accbf"),  # and the one salted once
        {"type": "namespace", "name": "a__b", "description": "", "tools": [function("c")]},
    ]
    names = [tool["function"]["name"] for tool in translate({"tools": tools, "input": "hi"}).chat["tools"]]
    assert names == ["a__b__c", "a__b__c_57a76311", "a__b__c_d78accbf", "a__b__c_8edac892"]


def test_a_stream_cut_before_its_end_still_counts_the_usage_reported_so_far() -> None:
    usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    cut = run([chunk(content="Hel"), {**chunk(content="lo"), "usage": usage}], end=None)
    so_far = cut.translator.response
    assert (so_far["status"], so_far["usage"]) == (
        "in_progress",
        {
            "input_tokens": 12,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": 3,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        },
    )


def tool_table(*tools: dict[str, Any]) -> UpstreamToolTable:
    return UpstreamToolTable(ToolCatalog.from_request(parse_request({"model": "m", "input": "hi", "tools": list(tools)})))


def function(name: str) -> dict[str, Any]:
    return {"type": "function", "name": name, "parameters": {"type": "object"}}


def test_tables_agree_on_names_when_every_tool_either_declares_is_named_alike() -> None:
    """A saved translation of a history is reused only under a table that names each
    tool the same: a tool only one table declares counts too (the other names it as an
    undeclared one)."""
    flat = function("collaboration__list_agents")
    nested = {"type": "namespace", "name": "collaboration", "description": "Agents.", "tools": [function("list_agents")]}
    assert tool_table(flat).names_agree(tool_table(flat))  # two tables, the same names
    assert tool_table(flat, function("other")).names_agree(tool_table(flat))  # "other" is named alike either way
    # Declared together, the one declared second finds its flat name taken and is renamed,
    # in that table only: the namespaced tool, or the top-level one no other table declares.
    assert not tool_table(flat, nested).names_agree(tool_table(nested))
    assert not tool_table(nested).names_agree(tool_table(flat, nested))
    assert not tool_table(nested, flat).names_agree(tool_table(nested))
