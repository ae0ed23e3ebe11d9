"""``downgrade_request``: V2 Responses clients' requests for V1 backends.

Requests are Codex's own (``tests/fixtures/codex``): V2 ``gpt-5.6-terra`` (tools in an
``additional_tools`` item, namespaces, custom ``exec``) and V1 ``gpt-5.5`` (custom
``apply_patch``, ``tool_search``, and their calls in the history).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolwire.errors import RequestError
from toolwire.protocol import parse_request
from toolwire.tools import ToolKind, ToolName
from toolwire.translate import DowngradedRequest, ResponsesCapabilities, downgrade_request

from ..test_custom_input import APPLY_PATCH_GRAMMAR

JSON = dict[str, Any]
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "codex"
V1_ONLY = ResponsesCapabilities()
EVERYTHING = ResponsesCapabilities.everything()


def fixture(model: str, turn: int) -> JSON:
    return json.loads((FIXTURES / model / f"turn-{turn}.json").read_text())


def downgrade(
    body: JSON, caps: ResponsesCapabilities = V1_ONLY, **kwargs: Any
) -> DowngradedRequest:
    return downgrade_request(parse_request(body), caps, **kwargs)


def tool_names(tools: list[JSON]) -> list[tuple[str, str]]:
    return [(tool["type"], tool.get("name", "")) for tool in tools]


TERRA_FUNCTIONS = [
    ("function", "functions__exec"),
    ("function", "functions__wait"),
    ("function", "functions__request_user_input"),
    ("function", "collaboration__followup_task"),
    ("function", "collaboration__interrupt_agent"),
    ("function", "collaboration__list_agents"),
    ("function", "collaboration__send_message"),
    ("function", "collaboration__spawn_agent"),
    ("function", "collaboration__wait_agent"),
]


# ---------------------------------------------------------------- requests


def test_v2_request_for_a_v1_backend_hoists_flattens_and_lowers() -> None:
    body = fixture("gpt-5.6-terra", 1)
    downgraded = downgrade(body)
    sent = downgraded.body
    assert tool_names(sent["tools"]) == TERRA_FUNCTIONS
    assert all(item["type"] != "additional_tools" for item in sent["input"])
    assert sent["input"] == body["input"][1:]  # nothing else in the history changes
    exec_tool = sent["tools"][0]
    assert exec_tool["parameters"]["required"] == ["input"]
    assert "raw text itself" in exec_tool["description"]
    assert (
        body["input"][0]["tools"][0]["tools"][0]["format"]["definition"] in exec_tool["description"]
    )
    collaboration = sent["tools"][5]
    assert collaboration["description"].startswith("Tools for spawning and managing sub-agents.")
    assert downgraded.conversions == [
        "additional_tools hoisted into tools",
        "custom tools sent as functions",
        "namespace tools flattened",
    ]
    # Everything else the client sent is forwarded as it was.
    for key in (
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "store",
        "include",
        "prompt_cache_key",
        "text",
        "client_metadata",
        "stream",
    ):
        assert sent[key] == body[key]


def test_a_backend_with_every_capability_gets_the_request_unchanged() -> None:
    for model, turn in [("gpt-5.6-terra", 2), ("gpt-5.5", 2), ("gpt-5.4", 2)]:
        body = fixture(model, turn)
        downgraded = downgrade(body, EVERYTHING)
        assert downgraded.body == body
        assert downgraded.conversions == [] and downgraded.warnings == []
    assert downgrade(body, EVERYTHING, model="served-name").body["model"] == "served-name"


@pytest.mark.parametrize(
    ("caps", "expected"),
    [
        pytest.param(
            ResponsesCapabilities(supports_namespaces=True),
            [
                (
                    "namespace",
                    "functions",
                    [
                        ("function", "exec"),
                        ("function", "wait"),
                        ("function", "request_user_input"),
                    ],
                ),
                ("namespace", "collaboration", None),
            ],
            id="namespaces",
        ),
        pytest.param(
            ResponsesCapabilities(supports_custom_tools=True),
            [
                ("custom", "functions__exec", None),
                *[(kind, name, None) for kind, name in TERRA_FUNCTIONS[1:]],
            ],
            id="custom",
        ),
        pytest.param(
            ResponsesCapabilities(supports_custom_tools=True, supports_namespaces=True),
            [
                (
                    "namespace",
                    "functions",
                    [("custom", "exec"), ("function", "wait"), ("function", "request_user_input")],
                ),
                ("namespace", "collaboration", None),
            ],
            id="custom+namespaces",
        ),
    ],
)
def test_each_capability_keeps_its_feature(
    caps: ResponsesCapabilities, expected: list[tuple[str, str, Any]]
) -> None:
    sent = downgrade(fixture("gpt-5.6-terra", 1), caps).body
    got = [
        (
            tool["type"],
            tool["name"],
            tool_names(tool["tools"])
            if tool["type"] == "namespace"
            and expected[0][2] is not None
            and tool["name"] == "functions"
            else None,
        )
        for tool in sent["tools"]
    ]
    assert got == expected


def test_additional_tools_stay_in_the_input_item_when_supported() -> None:
    body = fixture("gpt-5.6-terra", 1)
    sent = downgrade(body, ResponsesCapabilities(supports_additional_tools=True)).body
    assert "tools" not in sent
    item = sent["input"][0]
    assert (item["type"], item["id"], item["role"]) == (
        "additional_tools",
        body["input"][0]["id"],
        "developer",
    )
    assert tool_names(item["tools"]) == TERRA_FUNCTIONS


def test_v2_history_calls_become_function_calls() -> None:
    body = fixture("gpt-5.6-terra", 3)
    sent = downgrade(body).body
    calls = [
        item for item in sent["input"] if item["type"] in ("function_call", "function_call_output")
    ]
    original = [item for item in body["input"] if "call_id" in item]
    assert [item["type"] for item in calls] == [
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
    ]
    exec_call, exec_output, list_call, _ = calls
    assert exec_call == {
        "type": "function_call",
        "call_id": original[0]["call_id"],
        "name": "functions__exec",
        "status": "completed",
        "arguments": json.dumps({"input": original[0]["input"]}, separators=(",", ":")),
    }
    assert exec_output == {
        "type": "function_call_output",
        "call_id": original[1]["call_id"],
        "output": original[1]["output"],
    }
    assert (list_call["name"], "namespace" in list_call, list_call["id"]) == (
        "collaboration__list_agents",
        False,
        original[2]["id"],
    )
    assert not any(item["type"].startswith("custom_tool_call") for item in sent["input"])


def test_v1_history_with_apply_patch_and_tool_search() -> None:
    body = fixture("gpt-5.5", 2)
    # Which tools Codex's search loads varies between captures (ties in its ranking).
    [search_result] = [item for item in body["input"] if item["type"] == "tool_search_output"]
    loaded = [f"multi_agent_v1__{tool['name']}" for namespace in search_result["tools"] for tool in namespace["tools"]]
    assert len(loaded) == 2 and loaded[0] == "multi_agent_v1__spawn_agent"
    downgraded = downgrade(body)
    sent = downgraded.body
    assert tool_names(sent["tools"]) == [
        ("function", "exec_command"),
        ("function", "write_stdin"),
        ("function", "request_user_input"),
        ("function", "apply_patch"),
        ("function", "view_image"),
        ("function", "get_goal"),
        ("function", "create_goal"),
        ("function", "update_goal"),
        ("function", "tool_search"),
        # loaded by the tool search in the history, no longer deferred
        *[("function", name) for name in loaded],
    ]
    assert not any("defer_loading" in tool for tool in sent["tools"])
    assert downgraded.warnings == [
        "tools not sent (this Responses backend does not support them): web_search"
    ]
    history = [item for item in sent["input"] if item["type"] != "message"]
    assert [(item["type"], item.get("name")) for item in history] == [
        ("function_call", "apply_patch"),
        ("function_call", "tool_search"),
        ("function_call", "view_image"),
        ("function_call_output", None),
        ("function_call_output", None),
        ("function_call_output", None),
    ]
    search_call, search_output = history[1], history[4]
    assert json.loads(search_call["arguments"]) == {"query": "spawn sub-agent", "limit": 2}
    listing = json.loads(search_output["output"])["loaded_tools"]
    assert [entry["name"] for entry in listing] == loaded
    assert history[5]["output"] == body["input"][9]["output"]  # image output passes as it is


def test_hosted_tools_and_tool_search_pass_when_supported() -> None:
    body = fixture("gpt-5.5", 1)
    caps = ResponsesCapabilities(
        supports_tool_search=True, supports_hosted_tools=True, supports_custom_tools=True
    )
    downgraded = downgrade(body, caps)
    assert downgraded.body["tools"] == body["tools"] and downgraded.warnings == []


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("required", "required"),
        ({"type": "custom", "name": "apply_patch"}, {"type": "function", "name": "apply_patch"}),
        (
            {"type": "function", "name": "list_agents", "namespace": "collaboration"},
            {"type": "function", "name": "collaboration__list_agents"},
        ),
        ({"type": "function", "name": "undeclared"}, {"type": "function", "name": "undeclared"}),
        # the client's tool_search tool, named by a choice of another type: the function it became
        ({"type": "custom", "name": "tool_search"}, {"type": "function", "name": "tool_search"}),
        (
            {
                "type": "allowed_tools",
                "mode": "auto",
                "tools": [{"type": "custom", "name": "apply_patch"}, {"type": "tool_search"}],
            },
            {
                "type": "allowed_tools",
                "mode": "auto",
                "tools": [
                    {"type": "function", "name": "apply_patch"},
                    {"type": "function", "name": "tool_search"},
                ],
            },
        ),
    ],
)
def test_tool_choice_names_what_the_backend_knows(choice: Any, expected: Any) -> None:
    body = {
        "model": "m",
        "input": "hi",
        "tools": [
            {
                "type": "custom",
                "name": "apply_patch",
                "format": {"type": "grammar", "syntax": "lark", "definition": APPLY_PATCH_GRAMMAR},
            },
            {
                "type": "namespace",
                "name": "collaboration",
                "description": "",
                "tools": [{"type": "function", "name": "list_agents"}],
            },
            {"type": "tool_search", "execution": "client"},
        ],
        "tool_choice": choice,
    }
    assert downgrade(body).body["tool_choice"] == expected


def test_two_different_tools_with_one_name_are_a_client_error() -> None:
    tool = {"type": "function", "name": "f", "parameters": {"type": "object"}}
    body = {"model": "m", "input": "hi", "tools": [tool, {**tool, "description": "other"}]}
    with pytest.raises(RequestError) as caught:
        downgrade(body)
    assert caught.value.param == "tools"


def test_table_maps_both_ways() -> None:
    table = downgrade(fixture("gpt-5.6-terra", 1)).tools
    exec_tool = table.by_upstream(ToolName(None, "functions__exec"))
    assert exec_tool is not None
    assert (exec_tool.tool_name, exec_tool.kind, exec_tool.lowered) == (
        ToolName("functions", "exec"),
        ToolKind.CUSTOM,
        True,
    )
    assert table.by_tool_name(ToolName("collaboration", "list_agents")) is not None
    assert len(table) == 9


def test_everything_is_every_capability() -> None:
    assert ResponsesCapabilities.everything() == ResponsesCapabilities(
        supports_additional_tools=True,
        supports_custom_tools=True,
        supports_namespaces=True,
        supports_tool_search=True,
        supports_hosted_tools=True,
        supports_compaction=True,
    )


def test_a_tool_declared_again_in_additional_tools_is_sent_once() -> None:
    read = {"type": "function", "name": "read", "parameters": {"type": "object", "properties": {}}}
    write = {**read, "name": "write"}
    body = {
        "model": "m",
        "tools": [read],
        "input": [{"type": "additional_tools", "role": "developer", "tools": [read, write]}, {"role": "user", "content": "hi"}],
    }
    assert tool_names(downgrade(body).body["tools"]) == [("function", "read"), ("function", "write")]
    mcp = {"type": "namespace", "name": "mcp", "description": "", "tools": [read]}
    body = {
        "model": "m",
        "tools": [mcp],
        "input": [{"type": "additional_tools", "role": "developer", "tools": [{**mcp, "tools": [read, write]}]}, {"role": "user", "content": "hi"}],
    }
    assert tool_names(downgrade(body).body["tools"]) == [("function", "mcp__read"), ("function", "mcp__write")]


def test_a_backend_with_custom_tools_but_no_namespaces_gets_them_flattened() -> None:
    mcp = {"type": "namespace", "name": "mcp", "description": "", "tools": [{"type": "custom", "name": "run"}]}
    body = {
        "model": "m",
        "tools": [mcp, {"type": "tool_search", "execution": "client"}],
        "tool_choice": {"type": "custom", "namespace": "mcp", "name": "run"},
        "input": [
            {"type": "custom_tool_call", "call_id": "c1", "namespace": "mcp", "name": "run", "input": "ls"},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"},
        ],
    }
    downgraded = downgrade(body, ResponsesCapabilities(supports_custom_tools=True))
    assert downgraded.body["input"] == [
        {"type": "custom_tool_call", "call_id": "c1", "name": "mcp__run", "input": "ls"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"},
    ]
    assert downgraded.body["tool_choice"] == {"type": "custom", "name": "mcp__run"}
    assert downgraded.conversions == [
        "namespaced calls flattened",
        "namespace tools flattened",
        "client tool_search sent as a function",
    ]
