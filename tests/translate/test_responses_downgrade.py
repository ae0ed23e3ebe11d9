"""``downgrade_request`` and ``ResponsesStreamRestorer``: V2 Responses clients over V1 backends.

Requests are Codex's own (``tests/fixtures/codex``): V2 ``gpt-5.6-terra`` (tools in an
``additional_tools`` item, namespaces, custom ``exec``) and V1 ``gpt-5.5`` (custom
``apply_patch``, ``tool_search``, and their calls in the history). Every restored stream
is checked the way clients read it: sequence numbers 0, 1, 2, ...; each event valid for
the official SDK in strict mode and accepted by its stream accumulator; the terminal
output exactly the restored done items.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState

from tests.support.responses_upstream import answer, custom_call, function_call, message
from toolwire.errors import RequestError
from toolwire.protocol import TERMINAL_EVENT_TYPES, parse_request
from toolwire.tools import ToolKind, ToolName
from toolwire.translate.responses_downgrade import (
    DowngradedRequest,
    ResponsesCapabilities,
    ResponsesStreamRestorer,
    downgrade_request,
)

from .test_custom_input import APPLY_PATCH_GRAMMAR, PATCH
from .test_stream import sdk_event, without_parsed

JSON = dict[str, Any]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
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


# ---------------------------------------------------------------- the stream back


TERRA = fixture("gpt-5.6-terra", 1)
JS = 'const r = await tools.exec_command({cmd: "echo hi"});\ntext(JSON.stringify(r));\n'


def restore(
    body: JSON, events: list[JSON], caps: ResponsesCapabilities = V1_ONLY, *, finish: bool = True
) -> tuple[list[JSON], ResponsesStreamRestorer]:
    restorer = ResponsesStreamRestorer(
        downgrade(body, caps), response_id="resp_gateway", created_at=1, model=body["model"]
    )
    out: list[JSON] = []
    for event in events:
        out.extend(restorer.feed(event))
    if finish:
        out.extend(restorer.finish())
    return out, restorer


def verify(events: list[JSON], body: JSON) -> JSON:
    """Every invariant a client relies on; returns the terminal Response object."""
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created"
    terminals = [event for event in events if event["type"] in TERMINAL_EVENT_TYPES]
    assert len(terminals) == 1 and terminals[0] is events[-1]
    response = terminals[0]["response"]
    added: dict[int, JSON] = {}
    done: dict[int, JSON] = {}
    for event in events:
        if event["type"] == "response.output_item.added":
            added[event["output_index"]] = event["item"]
        elif event["type"] == "response.output_item.done":
            item = event["item"]
            first = added[event["output_index"]]
            assert (item["type"], item["id"], item.get("call_id")) == (
                first["type"],
                first["id"],
                first.get("call_id"),
            )
            done[event["output_index"]] = item
        elif "item_id" in event:
            assert event["item_id"] == added[event["output_index"]]["id"], event
    assert response["output"] == [done[index] for index in sorted(done)]
    state: ResponseStreamState[None] = ResponseStreamState(
        input_tools=body.get("tools") or [], text_format=omit
    )
    for event in events:
        state.handle_event(sdk_event(event))
    if terminals[0]["type"] == "response.completed":
        final = state._completed_response
        assert final is not None
        assert without_parsed(final.to_dict()["output"]) == response["output"]
    return dict(response)


def test_v1_backend_call_of_a_custom_tool_comes_back_as_a_custom_tool_call() -> None:
    upstream = answer(
        [
            message("Running it.", "msg_u1"),
            function_call("functions__exec", json.dumps({"input": JS}), "call_1", item_id="fc_u1"),
            function_call("collaboration__list_agents", "{}", "call_2"),
        ],
        model="qwen3-served",
    )
    events, restorer = restore(TERRA, list(upstream.events))
    response = verify(events, TERRA)
    message_item, exec_call, list_call = response["output"]
    assert message_item["content"][0]["text"] == "Running it."
    assert exec_call == {
        "id": "ctc_u1",
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": "call_1",
        "name": "exec",
        "namespace": "functions",
        "input": JS,
    }
    assert (
        list_call["type"],
        list_call["namespace"],
        list_call["name"],
        list_call["arguments"],
    ) == ("function_call", "collaboration", "list_agents", "{}")
    kinds = [event["type"] for event in events if event.get("output_index") == 1]
    assert kinds == [
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
    ]
    assert [
        event["delta"]
        for event in events
        if event["type"] == "response.custom_tool_call_input.delta"
    ] == [JS]
    renamed = [
        event for event in events if event["type"] == "response.function_call_arguments.done"
    ]
    assert [event["name"] for event in renamed] == ["list_agents"]
    # The Response object is the gateway's, and repeats the client's request.
    assert (response["id"], response["model"], response["tools"]) == (
        "resp_gateway",
        "gpt-5.6-terra",
        [],
    )
    assert {event["response"]["id"] for event in events if "response" in event} == {"resp_gateway"}
    assert restorer.conversions == [
        "custom exec restored",
        "namespace functions restored",
        "namespace collaboration restored",
    ]


def test_without_arguments_done_the_input_events_come_before_the_item_done() -> None:
    upstream = answer(
        [function_call("functions__exec", json.dumps({"input": JS}), "call_1")],
        arguments_done=False,
    )
    events, _ = restore(TERRA, list(upstream.events))
    response = verify(events, TERRA)
    assert response["output"][0]["input"] == JS
    assert [event["type"] for event in events if event.get("output_index") == 0][1:] == [
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
    ]


def test_a_sloppy_wrapper_is_recovered_against_the_grammar() -> None:
    body = {**fixture("gpt-5.5", 1), "stream": True}
    arguments = json.dumps({"patch": "```\n" + PATCH + "```"})
    upstream = answer([function_call("apply_patch", arguments, "call_9")])
    events, restorer = restore(body, list(upstream.events))
    response = verify(events, body)
    assert (response["output"][0]["type"], response["output"][0]["input"]) == (
        "custom_tool_call",
        PATCH,
    )
    assert "custom apply_patch restored" in restorer.conversions
    assert any("unwrapped from 'patch'" in conversion for conversion in restorer.conversions)


def test_tool_search_function_comes_back_as_a_tool_search_call() -> None:
    body = fixture("gpt-5.5", 1)
    upstream = answer(
        [function_call("tool_search", '{"query": "agents", "limit": 2}', "call_5", item_id="fc_t")]
    )
    events, _ = restore(body, list(upstream.events))
    response = verify(events, body)
    assert response["output"] == [
        {
            "id": "tsc_t",
            "type": "tool_search_call",
            "status": "completed",
            "call_id": "call_5",
            "execution": "client",
            "arguments": {"query": "agents", "limit": 2},
        }
    ]
    assert not any(event["type"].startswith("response.function_call_arguments") for event in events)


def test_calls_that_need_nothing_pass_through() -> None:
    items = [
        function_call("undeclared_tool", '{"a": 1}', "call_1"),
        function_call("functions__wait", '{"cell_id": "1"}', "call_2"),
    ]
    upstream = answer(items)
    events, restorer = restore(TERRA, list(upstream.events), ResponsesCapabilities.everything())
    assert [{k: v for k, v in e.items() if k != "sequence_number"} for e in events[2:-1]] == [
        {k: v for k, v in e.items() if k != "sequence_number"} for e in upstream.events[2:-1]
    ]
    assert restorer.conversions == []
    # A V1 backend's flat name for a plain function is still given its namespace back.
    events, _ = restore(TERRA, list(upstream.events))
    assert verify(events, TERRA)["output"][1]["namespace"] == "functions"


def test_a_backend_that_knows_custom_tools_gets_only_its_namespace_restored() -> None:
    upstream = answer([custom_call("functions__exec", JS, "call_1")])
    events, restorer = restore(
        TERRA, list(upstream.events), ResponsesCapabilities(supports_custom_tools=True)
    )
    response = verify(events, TERRA)
    assert response["output"][0] == {
        **upstream.events[-1]["response"]["output"][0],
        "name": "exec",
        "namespace": "functions",
    }
    assert [
        event["delta"]
        for event in events
        if event["type"] == "response.custom_tool_call_input.delta"
    ] == [JS[i : i + 5] for i in range(0, len(JS), 5)]
    assert restorer.conversions == ["namespace functions restored"]


def test_a_model_that_drops_the_namespace_is_understood() -> None:
    upstream = answer([function_call("list_agents", "{}", "call_1")])
    events, restorer = restore(
        TERRA, list(upstream.events), ResponsesCapabilities(supports_namespaces=True)
    )
    assert verify(events, TERRA)["output"][0]["namespace"] == "collaboration"
    assert restorer.conversions == ["tool name list_agents resolved to collaboration.list_agents"]


def test_a_stream_without_terminal_event_fails_with_the_items_done_so_far() -> None:
    upstream = answer(
        [message("part one", "msg_1"), function_call("functions__exec", '{"input": "x"}', "call_1")]
    )
    cut = [event for event in upstream.events if event["type"] != "response.completed"][:-3]
    events, restorer = restore(TERRA, cut)
    response = verify(events, TERRA)
    assert (
        response["status"] == "failed"
        and "closed before a terminal event" in response["error"]["message"]
    )
    assert [item["type"] for item in response["output"]] == ["message"]
    assert events[-2]["type"] == "error"
    assert (
        restorer.finished and restorer.feed(upstream.events[-1]) == [] and restorer.finish() == []
    )


def test_a_failure_before_any_event_is_still_a_whole_stream() -> None:
    restorer = ResponsesStreamRestorer(
        downgrade(TERRA), response_id="resp_gw", created_at=5, model="gpt-5.6-terra"
    )
    events = restorer.fail("The upstream stream broke: reset.")
    response = verify(events, TERRA)
    assert [event["type"] for event in events] == ["response.created", "error", "response.failed"]
    assert (response["id"], response["model"], response["error"]["code"]) == (
        "resp_gw",
        "gpt-5.6-terra",
        "server_error",
    )


def test_the_backends_own_failure_passes_through() -> None:
    upstream = answer([message("hi")])
    failed = {
        **upstream.events[-1],
        "type": "response.failed",
        "response": {
            **upstream.events[-1]["response"],
            "status": "failed",
            "output": [],
            "error": {"code": "server_error", "message": "boom"},
        },
    }
    events, _ = restore(TERRA, [*upstream.events[:2], failed])
    assert verify(events, TERRA)["error"]["message"] == "boom"


def test_restore_response_for_a_non_streaming_answer() -> None:
    body = {**TERRA, "stream": False}
    final = answer(
        [function_call("functions__exec", json.dumps({"input": JS}), "call_1")], model="served"
    ).events[-1]["response"]
    restorer = ResponsesStreamRestorer(
        downgrade(body), response_id="x", created_at=0, model="gpt-5.6-terra"
    )
    restored = restorer.restore_response(final)
    assert (
        restored["output"][0]["type"] == "custom_tool_call" and restored["output"][0]["input"] == JS
    )
    assert restored["model"] == "gpt-5.6-terra" and restored["usage"] == final["usage"]
    assert final["output"][0]["type"] == "function_call"  # the backend's object is not modified
    assert restorer.conversions == ["custom exec restored", "namespace functions restored"]
