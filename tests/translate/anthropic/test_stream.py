"""``MessagesStreamTranslator``: tables of Messages stream events and the Responses they become.

The event sequences are the scripted Messages API's (``answer_events``: Anthropic's own
order, pings included), or written out where a test needs an exact fault. Every stream
is also read by the openai SDK's strict accumulator (``tests.translate.sdk``).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState

from tests.support.messages_upstream import (
    Answer,
    Redacted,
    Said,
    Search,
    Thinking,
    Use,
    answer_events,
    sign,
    whole_message,
)
from tests.translate.chat.shapes import COLLABORATION, FUNCTIONS_NAMESPACE, TOOLS
from tests.translate.sdk import sdk_event, without_parsed
from toolwire.protocol import PlainChunks, WholeAnswer, parse_request
from toolwire.translate import (
    MESSAGES_PRESETS,
    MessagesStreamTranslator,
    open_reasoning,
    open_reasoning_blocks,
    translate_messages_request,
)

JSON = dict[str, Any]
USAGE = {"input_tokens": 10, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 20}
STRICT_TOOL = {
    "type": "function",
    "name": "get_weather",
    "strict": True,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False},
}


def sdk_final_response(events: list[Any]) -> Any:
    """What the SDK's strict stream accumulator makes of ``events``: the final Response,
    whose output must be the terminal event's."""
    state: ResponseStreamState[None] = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in events:
        state.handle_event(sdk_event(event))
    final = state._completed_response
    assert final is not None
    assert without_parsed(final.to_dict()["output"]) == events[-1]["response"]["output"]
    return final


def machine(tools: list[JSON] | None = None) -> MessagesStreamTranslator:
    request = parse_request(orjson.dumps({"model": "claude", "input": "hi", "tools": tools or TOOLS, "stream": True}))
    translated = translate_messages_request(request, MESSAGES_PRESETS["anthropic"])
    return MessagesStreamTranslator(request, translated.tools, response_id="resp_1", created_at=1, model="claude")


def run(events: list[JSON], *, ended_cleanly: bool = True, tools: list[JSON] | None = None) -> tuple[list[Any], JSON]:
    translator = machine(tools)
    out: list[Any] = translator.start()
    for event in events:
        out += translator.feed(event)
    out += translator.finish(ended_cleanly=ended_cleanly)
    assert translator.finish() == [] and translator.feed({"type": "ping"}) == []
    assert [e["sequence_number"] for e in out] == list(range(len(out)))
    terminals = [e for e in out if e["type"] in ("response.completed", "response.incomplete", "response.failed")]
    assert len(terminals) == 1 and out[-1] is terminals[0]
    return out, translator.response


def events_of(answer: Answer, fragment_size: int = 5) -> list[JSON]:
    return answer_events(answer, message_id="msg_0001", model="claude", usage=USAGE, fragment_size=fragment_size)


# ---------------------------------------------------------------- answers


def test_text_thinking_and_usage() -> None:
    out, response = run(events_of(Answer([Thinking("Let me see."), Said("Hello there.")])))
    assert response["status"] == "completed"
    thinking, message = response["output"]
    assert thinking["content"] == [{"type": "reasoning_text", "text": "Let me see."}]
    assert open_reasoning(thinking["encrypted_content"]) == "Let me see."
    assert open_reasoning_blocks(thinking["encrypted_content"]) == [
        {"type": "thinking", "thinking": "Let me see.", "signature": sign("Let me see.")}
    ]
    assert message["content"][0]["text"] == "Hello there."
    assert response["usage"]["input_tokens"] == 33
    assert response["usage"]["input_tokens_details"] == {"cached_tokens": 20, "cache_write_tokens": 3}
    assert response["usage"]["total_tokens"] == 33 + response["usage"]["output_tokens"]
    assert sdk_final_response(out).output_text == "Hello there."


def test_redacted_thinking_is_carried_whole() -> None:
    _, response = run(events_of(Answer([Redacted(), Said("ok")])))
    redacted = response["output"][0]
    assert redacted["type"] == "reasoning" and redacted["content"] == []
    assert open_reasoning_blocks(redacted["encrypted_content"]) == [{"type": "redacted_thinking", "data": Redacted().data}]


@pytest.mark.parametrize("fragment_size", [1, 2, 3, 7, 50])
def test_tool_input_split_anywhere_is_restored_to_its_declared_type(fragment_size: int) -> None:
    patch = '*** Begin Patch\n*** Add File: a.txt\n+"quoted" \\ é\n*** End Patch\n'
    answer = Answer(
        [
            Use("exec_command", {"cmd": 'echo "hi" && ls'}),
            Use("apply_patch", {"input": patch}),
            Use("collaboration__list_agents", {}),
            Use("tool_search", {"query": "agents", "limit": 2}),
        ]
    )
    out, response = run(events_of(answer, fragment_size))
    function, custom, namespaced, search = response["output"]
    assert (function["type"], orjson.loads(function["arguments"])) == ("function_call", {"cmd": 'echo "hi" && ls'})
    streamed = "".join(e["delta"] for e in out if e["type"] == "response.function_call_arguments.delta" and e["item_id"] == function["id"])
    assert streamed == function["arguments"]
    assert (custom["type"], custom["input"]) == ("custom_tool_call", patch)
    assert (namespaced["name"], namespaced["namespace"], namespaced["arguments"]) == ("list_agents", "collaboration", "{}")
    assert (search["type"], search["arguments"]) == ("tool_search_call", {"query": "agents", "limit": 2})
    assert len({item["call_id"] for item in response["output"]}) == 4
    sdk_final_response(out)


def test_legacy_cmd_json_for_code_mode_exec_becomes_javascript() -> None:
    _, response = run(events_of(Answer([Use("functions__exec", {"cmd": "pwd"})])), tools=[FUNCTIONS_NAMESPACE])
    [call] = response["output"]
    assert call["type"] == "custom_tool_call" and call["namespace"] == "functions"
    assert "tools.exec_command" in call["input"] and "pwd" in call["input"]


def test_a_bare_or_undeclared_tool_name() -> None:
    _, response = run(events_of(Answer([Use("list_agents", {}), Use("no_such_tool", {"a": 1})])), tools=[COLLABORATION])
    guessed, unknown = response["output"]
    assert (guessed["name"], guessed["namespace"]) == ("list_agents", "collaboration")
    assert unknown["type"] == "function_call" and unknown["name"] == "no_such_tool" and "namespace" not in unknown


def test_a_tool_use_with_an_empty_name_is_a_call_of_unnamed_tool() -> None:
    """A function call needs a name to be answered (the client replies "unsupported call")."""
    _, response = run(events_of(Answer([Use("", {"a": 1})])))
    (call,) = response["output"]
    assert (call["type"], call["name"], call["arguments"]) == ("function_call", "unnamed_tool", '{"a":1}')


def test_a_strict_tools_broken_input_is_repaired() -> None:
    _, response = run(events_of(Answer([Use("get_weather", '{"city": "Paris"')])), tools=[STRICT_TOOL])
    assert orjson.loads(response["output"][0]["arguments"]) == {"city": "Paris"}


def test_web_search_is_a_web_search_call_with_its_sources() -> None:
    out, response = run(events_of(Answer([Search("python sse", ["https://a.example", "https://b.example"]), Said("Found.")])))
    search, message = response["output"]
    assert search == {
        "id": search["id"],
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "python sse", "sources": [{"type": "url", "url": "https://a.example"}, {"type": "url", "url": "https://b.example"}]},
    }
    assert message["content"][0]["text"] == "Found."
    sdk_final_response(out)


def test_a_whole_message_is_translated_as_its_stream() -> None:
    answer = Answer([Thinking("t"), Said("x"), Use("exec_command", {"cmd": "ls"}), Search("q", ["https://a.example"])])
    _, streamed = run(events_of(answer))
    whole = machine().translate_whole(whole_message(answer, message_id="msg_0001", model="claude", usage=USAGE))
    strip = lambda output: [{k: v for k, v in item.items() if k != "id"} for item in output]  # noqa: E731
    assert strip(whole["output"]) == strip(streamed["output"])
    assert whole["usage"]["input_tokens"] == streamed["usage"]["input_tokens"]


def test_a_streamed_request_answered_with_a_whole_message_streams_that_message() -> None:
    """A server that ignored ``stream`` and answered with a Message: read as a
    ``WholeAnswer``, the stream is what the client's SDK accepts and ends with the Response
    the Message translates to (its tool call among the items, as the client declared the tool)."""
    answer = Answer([Thinking("t"), Said("x"), Use("exec_command", {"cmd": "ls"})])
    message = whole_message(answer, message_id="msg_0001", model="claude", usage=USAGE)
    out, streamed = run([WholeAnswer(message)])
    assert streamed == machine().translate_whole(message)
    assert [item["type"] for item in streamed["output"]] == ["reasoning", "message", "function_call"]
    sdk_final_response(out)


# ---------------------------------------------------------------- how the stream ends


def stop_with(stop_reason: str | None, *, clean: bool = True, text: str = "some text") -> JSON:
    events = [e for e in events_of(Answer([Said(text)] if text else [])) if e["type"] not in ("message_delta", "message_stop")]
    if stop_reason is not None:
        events.append({"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {"output_tokens": 3}})
    return run(events, ended_cleanly=clean)[1]


@pytest.mark.parametrize(
    ("stop_reason", "clean", "text", "status", "reason"),
    [
        ("end_turn", True, "x", "completed", None),
        ("tool_use", True, "x", "completed", None),
        ("stop_sequence", True, "x", "completed", None),
        ("pause_turn", True, "x", "completed", None),
        ("max_tokens", True, "x", "incomplete", "max_output_tokens"),
        ("refusal", True, "x", "incomplete", "content_filter"),
        ("end_turn", False, "x", "completed", None),  # the stop reason came; only message_stop is missing
        (None, False, "x", "failed", None),  # cut before message_delta
        (None, True, "", "failed", None),
    ],
)
def test_stop_reasons(stop_reason: str | None, clean: bool, text: str, status: str, reason: str | None) -> None:
    response = stop_with(stop_reason, clean=clean, text=text)
    assert response["status"] == status
    if reason is not None:
        assert response["incomplete_details"] == {"reason": reason}


def test_a_failed_stream_leaves_a_half_call_out() -> None:
    events = events_of(Answer([Said("Running."), Use("exec_command", {"cmd": "rm -rf /tmp/build"})]))
    cut = [e for e in events if e["type"] != "message_delta"][:9]
    out, response = run(cut, ended_cleanly=False)
    assert response["status"] == "failed"
    assert [item["type"] for item in response["output"]] == ["message"]
    assert not [e for e in out if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"]


@pytest.mark.parametrize(
    ("error", "code"),
    [
        ({"type": "overloaded_error", "message": "Overloaded"}, "server_error"),
        ({"type": "invalid_request_error", "message": "prompt is too long: 200001 tokens > 200000 maximum"}, "context_length_exceeded"),
    ],
)
def test_an_error_event_fails_with_its_message(error: JSON, code: str) -> None:
    events = [*events_of(Answer([Said("partial answer")]))[:5], {"type": "error", "error": error}]
    out, response = run(events)
    assert response["status"] == "failed"
    assert response["error"] == {"code": code, "message": error["message"]}
    assert [e["type"] for e in out].count("error") == 1


def test_plain_chunks_are_read_one_by_one() -> None:
    """A wire with no plain chunks of its own reads any ``PlainChunks`` it is handed as the
    objects they hold, one by one."""
    events = events_of(Answer([Said("Hello there.")]))
    one_by_one, translator = machine(), machine()
    expected = one_by_one.start() + [e for event in events for e in one_by_one.feed(event)]
    together = translator.start() + translator.feed(PlainChunks("", b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events)))
    assert together == expected and translator.response == one_by_one.response
