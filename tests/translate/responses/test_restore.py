"""``ResponsesStreamRestorer``: a V1 backend's answer, restored for V2 Responses clients.

Every restored stream is checked the way clients read it: sequence numbers 0, 1, 2, ...;
each event valid for the official SDK in strict mode and accepted by its stream
accumulator; the terminal output exactly the restored done items.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState

from tests.support.responses_upstream import answer, custom_call, function_call, message
from toolwire.protocol import TERMINAL_EVENT_TYPES, PlainChunks
from toolwire.translate import ResponsesCapabilities, ResponsesStreamRestorer

from ..sdk import sdk_event, without_parsed
from ..test_custom_input import PATCH
from .test_downgrade import V1_ONLY, downgrade, fixture

JSON = dict[str, Any]


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


def test_plain_chunks_are_read_one_by_one() -> None:
    """A Responses backend sends no Chat chunks; ``PlainChunks`` handed to the restorer
    anyway are read as the objects they hold, one by one."""
    events = list(answer([message("Hello there.")]).events)
    expected, _ = restore(TERRA, events, finish=False)
    restorer = ResponsesStreamRestorer(downgrade(TERRA, V1_ONLY), response_id="resp_gateway", created_at=1, model=TERRA["model"])
    assert restorer.feed(PlainChunks("", b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events))) == expected


def test_a_namespace_that_is_not_a_string_is_ignored() -> None:
    """A backend that writes something else than a string in ``namespace`` is read as
    having named none: its call of the flattened name is still the declared tool's."""
    item = {**function_call("collaboration__list_agents", "{}", "call_1"), "namespace": 7}
    events, restorer = restore(TERRA, list(answer([item]).events))
    (call,) = verify(events, TERRA)["output"]
    assert (call["type"], call["namespace"], call["name"]) == ("function_call", "collaboration", "list_agents")
    assert restorer.conversions == ["namespace collaboration restored"]


@pytest.mark.parametrize(
    ("arguments", "conversions"),
    [("", []), ("not json", []), ("[1, 2]", ["tool arguments replaced with {}"])],
)
def test_a_tool_search_call_without_usable_arguments_searches_with_none(arguments: str, conversions: list[str]) -> None:
    body = fixture("gpt-5.5", 1)
    events, restorer = restore(body, list(answer([function_call("tool_search", arguments, "call_5")]).events))
    (call,) = verify(events, body)["output"]
    assert (call["type"], call["arguments"]) == ("tool_search_call", {})
    assert [c for c in restorer.conversions if c != "tool_search call restored"] == conversions


def test_each_restored_call_keeps_its_own_item_even_when_the_backend_reuses_an_output_index() -> None:
    """A partial Responses server that numbers every item 0: each custom call's input
    events still name its own item, not the one done before it at the same index."""
    calls = [
        function_call("functions__exec", json.dumps({"input": f"text('{n}');\n"}), f"call_{n}", item_id=f"fc_{n}")
        for n in (1, 2)
    ]
    events = [
        {**event, "output_index": 0} if "output_index" in event else event for event in answer(calls).events
    ]
    restored, _ = restore(TERRA, events)
    inputs = [
        (event["item_id"], event["input"])
        for event in restored
        if event["type"] == "response.custom_tool_call_input.done"
    ]
    assert inputs == [("ctc_1", "text('1');\n"), ("ctc_2", "text('2');\n")]

