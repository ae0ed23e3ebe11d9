"""The official ``openai`` Python SDK (3.51.0), in strict validation mode, through the gateway.

A real ``toolwire serve`` process sits in front of the scripted Chat Completions
upstream. Every response object and every stream event is validated by the SDK's own
pydantic models (``_strict_response_validation=True``); the streaming helper
(``client.responses.stream``) additionally checks ordering and identity (conformance
reference §5.2). Streaming tests run against both upstream wire styles ("openai": small
fragments, "ollama": whole tool calls in one chunk).

Upstream naming conventions checked here: a namespaced tool is the upstream function
``<namespace>__<name>``; a custom tool is an upstream function with one string property
``input``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from tests.support.chat_upstream import (
    Call,
    ChatUpstream,
    Cut,
    HttpError,
    StreamError,
    Text,
    ToolCalls,
)
from tests.support.gateway import GatewayProcess

pytestmark = pytest.mark.e2e

MODEL = "qwen3"
TERMINAL_TYPES = frozenset({"response.completed", "response.incomplete", "response.failed"})
LIFECYCLE_TYPES = TERMINAL_TYPES | {"response.created", "response.in_progress", "response.queued"}

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
CUSTOM_TOOL: dict[str, Any] = {
    "type": "custom",
    "name": "my_custom_tool",
    "description": "Runs a raw SQL query; the input is the query text.",
}
NAMESPACE_TOOL: dict[str, Any] = {
    "type": "namespace",
    "name": "collaboration",
    "description": "Work with other agents.",
    "tools": [
        {
            "type": "function",
            "name": "list_agents",
            "description": "List the agents.",
            "parameters": {
                "type": "object",
                "properties": {"state": {"type": "string"}},
                "required": ["state"],
                "additionalProperties": False,
            },
            "strict": True,
        }
    ],
}
# Quotes, a backslash, a newline and non-ASCII: the raw input must survive untouched.
RAW_INPUT = "SELECT * FROM users\nWHERE name = \"O'Brien\" AND path LIKE 'C:\\\\tmp%' -- é"


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture
def client(gateway: GatewayProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=gateway.base_url,
        api_key="test",
        _strict_response_validation=True,
        max_retries=0,
        timeout=30,
    ) as sdk_client:
        yield sdk_client


@pytest.fixture(params=["openai", "ollama"])
def style(request: pytest.FixtureRequest, upstream: ChatUpstream) -> str:
    """Run the test against both upstream streaming styles."""
    upstream.style = request.param
    return str(request.param)


# ------------------------------------------------------------------------------ helpers


def wire(value: Any) -> Any:
    """An SDK object as its wire JSON, without the helper's own ``parsed*`` additions."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    if isinstance(value, dict):
        return {k: wire(v) for k, v in value.items() if k not in {"parsed", "parsed_arguments"}}
    if isinstance(value, list):
        return [wire(v) for v in value]
    return value


def check_event_stream(events: Sequence[Any]) -> Any:
    """Invariants every Responses stream must hold; returns the terminal event."""
    types = [event.type for event in events]
    assert events, "the stream produced no events"
    assert [event.sequence_number for event in events] == list(range(len(events))), types
    assert types[:2] == ["response.created", "response.in_progress"], types
    terminals = [event for event in events if event.type in TERMINAL_TYPES]
    assert len(terminals) == 1, f"expected exactly one terminal event: {types}"
    assert events[-1] is terminals[0], f"events after the terminal event: {types}"
    assert events[0].response.output == []
    assert events[0].response.status == "in_progress"
    assert len({event.response.id for event in events if event.type in LIFECYCLE_TYPES}) == 1

    added = [event.output_index for event in events if event.type == "response.output_item.added"]
    done_events = [event for event in events if event.type == "response.output_item.done"]
    assert added == list(range(len(added))), types
    assert [event.output_index for event in done_events] == added, types
    # The terminal event carries the full output list, identical to the done items.
    assert wire([event.item for event in done_events]) == wire(terminals[0].response.output)
    return terminals[0]


def raw_stream(client: openai.OpenAI, **params: Any) -> list[Any]:
    """Every event of ``responses.create(stream=True)``, validated by the SDK."""
    with client.responses.create(model=MODEL, stream=True, **params) as stream:
        return list(stream)


def helper_stream(client: openai.OpenAI, **params: Any) -> tuple[list[Any], Any]:
    """Every event of the ``responses.stream`` helper, and its final response."""
    with client.responses.stream(model=MODEL, **params) as stream:
        events = list(stream)
        final = stream.get_final_response()
    return events, final


def of_type(events: Sequence[Any], kind: str) -> list[Any]:
    return [event for event in events if event.type == kind]


def upstream_tools(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The upstream request's tools by function name."""
    tools = request.get("tools") or []
    return {tool["function"]["name"]: tool for tool in tools}


def custom_tool_upstream_name(request: dict[str, Any], declared: str = "my_custom_tool") -> str:
    """The function name under which the gateway declared the custom tool upstream."""
    names = [name for name in upstream_tools(request) if declared in name]
    return names[0] if names else declared


def text_of(content: Any) -> str:
    """A Chat message's content as text (a string, or a list of text parts)."""
    if isinstance(content, str):
        return content
    assert isinstance(content, list), content
    return "".join(part["text"] for part in content if part.get("type") == "text")


def usage_for(style: str) -> dict[str, Any]:
    """A realistic upstream usage object: OpenAI reports details, Ollama does not."""
    if style == "openai":
        return {
            "prompt_tokens": 31,
            "completion_tokens": 7,
            "total_tokens": 38,
            "prompt_tokens_details": {"cached_tokens": 5},
            "completion_tokens_details": {"reasoning_tokens": 2},
        }
    return {"prompt_tokens": 31, "completion_tokens": 7, "total_tokens": 38}


def check_usage(usage: Any, style: str) -> None:
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (31, 7, 38)
    assert usage.input_tokens_details.cached_tokens == (5 if style == "openai" else 0)
    assert usage.input_tokens_details.cache_write_tokens == 0
    assert usage.output_tokens_details.reasoning_tokens == (2 if style == "openai" else 0)


# ------------------------------------------------------------------------------ text answers


def test_create_non_streaming_text(
    client: openai.OpenAI, upstream: ChatUpstream, style: str
) -> None:
    upstream.enqueue(Text("Hello there, friend.", usage=usage_for(style)))

    response = client.responses.create(model=MODEL, input="Say hello", instructions="Be brief.")

    assert response.object == "response"
    assert response.status == "completed"
    assert response.model == MODEL
    assert response.error is None and response.incomplete_details is None
    assert response.output_text == "Hello there, friend."
    [message] = response.output
    assert message.type == "message" and message.role == "assistant"
    assert message.status == "completed"
    check_usage(response.usage, style)

    [sent] = upstream.chat_requests
    assert sent.get("stream") is not True
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say hello"},
    ]


def test_create_stream_text(client: openai.OpenAI, upstream: ChatUpstream, style: str) -> None:
    text = "Streaming, one fragment at a time."
    upstream.enqueue(Text(text, usage=usage_for(style)))

    events = raw_stream(client, input="Say something")

    terminal = check_event_stream(events)
    assert terminal.type == "response.completed"
    assert terminal.response.status == "completed"
    deltas = of_type(events, "response.output_text.delta")
    assert len(deltas) >= 1
    assert "".join(delta.delta for delta in deltas) == text
    [text_done] = of_type(events, "response.output_text.done")
    assert text_done.text == text
    [part_added] = of_type(events, "response.content_part.added")
    assert part_added.part.type == "output_text" and part_added.part.text == ""
    [item_added] = of_type(events, "response.output_item.added")
    assert item_added.item.type == "message" and item_added.item.content == []
    assert terminal.response.output_text == text
    check_usage(terminal.response.usage, style)

    [sent] = upstream.chat_requests
    assert sent["stream"] is True


def test_stream_helper_text(client: openai.OpenAI, upstream: ChatUpstream, style: str) -> None:
    text = "The helper accumulates these deltas."
    upstream.enqueue(Text(text, usage=usage_for(style)))

    events, final = helper_stream(client, input="Say something")

    check_event_stream(events)
    deltas = of_type(events, "response.output_text.delta")
    assert "".join(delta.delta for delta in deltas) == text
    assert deltas[-1].snapshot == text
    assert final.status == "completed"
    assert final.output_text == text
    done_items = [event.item for event in of_type(events, "response.output_item.done")]
    assert wire(final.output) == wire(done_items)
    check_usage(final.usage, style)


# ------------------------------------------------------------------------------ tools


def test_strict_function_tool_streamed(
    client: openai.OpenAI, upstream: ChatUpstream, style: str
) -> None:
    upstream.enqueue(ToolCalls([Call("get_weather", '{"city": "Paris"}')]))

    events, final = helper_stream(client, input="Weather in Paris?", tools=[WEATHER_TOOL])

    check_event_stream(events)
    [call] = final.output
    assert call.type == "function_call"
    assert call.name == "get_weather"
    assert call.namespace is None
    assert call.call_id
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert call.parsed_arguments == {"city": "Paris"}
    arg_deltas = of_type(events, "response.function_call_arguments.delta")
    assert "".join(delta.delta for delta in arg_deltas) == call.arguments
    assert arg_deltas[-1].snapshot == call.arguments
    [args_done] = of_type(events, "response.function_call_arguments.done")
    assert args_done.arguments == call.arguments
    [added] = of_type(events, "response.output_item.added")
    assert added.item.arguments == "" and added.item.call_id == call.call_id
    assert [tool.type for tool in final.tools] == ["function"]

    tool = upstream_tools(upstream.chat_requests[0])["get_weather"]
    assert tool["type"] == "function"
    assert tool["function"]["parameters"] == WEATHER_TOOL["parameters"]


def test_strict_function_tool_parsed_non_streaming(
    client: openai.OpenAI, upstream: ChatUpstream, style: str
) -> None:
    upstream.enqueue(ToolCalls([Call("get_weather", '{"city": "Oslo"}')]))

    parsed = client.responses.parse(model=MODEL, input="Weather in Oslo?", tools=[WEATHER_TOOL])

    assert parsed.status == "completed"
    [call] = parsed.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert call.parsed_arguments == {"city": "Oslo"}
    assert json.loads(call.arguments) == {"city": "Oslo"}


def test_custom_tool(client: openai.OpenAI, upstream: ChatUpstream, style: str) -> None:
    def answer(request: dict[str, Any]) -> ToolCalls:
        name = custom_tool_upstream_name(request)
        return ToolCalls([Call(name, json.dumps({"input": RAW_INPUT}))])

    upstream.responder = answer

    events = raw_stream(client, input="Count the users", tools=[CUSTOM_TOOL])

    terminal = check_event_stream(events)
    assert terminal.type == "response.completed"
    [call] = terminal.response.output
    assert call.type == "custom_tool_call"
    assert call.name == "my_custom_tool"
    assert call.input == RAW_INPUT
    assert call.call_id
    [added] = of_type(events, "response.output_item.added")
    assert added.item.type == "custom_tool_call" and added.item.input == ""
    assert added.item.call_id == call.call_id
    input_deltas = of_type(events, "response.custom_tool_call_input.delta")
    assert input_deltas, [event.type for event in events]
    assert "".join(delta.delta for delta in input_deltas) == RAW_INPUT
    [input_done] = of_type(events, "response.custom_tool_call_input.done")
    assert input_done.input == RAW_INPUT
    assert of_type(events, "response.function_call_arguments.delta") == []
    assert [tool.type for tool in terminal.response.tools] == ["custom"]

    # The stream helper agrees, and so does a non-streaming answer.
    _, final = helper_stream(client, input="Count the users", tools=[CUSTOM_TOOL])
    assert wire(final.output[0]) | {"id": None, "call_id": None} == wire(call) | {
        "id": None,
        "call_id": None,
    }
    whole = client.responses.create(model=MODEL, input="Count the users", tools=[CUSTOM_TOOL])
    [whole_call] = whole.output
    assert (whole_call.type, whole_call.name, whole_call.input) == (
        "custom_tool_call",
        "my_custom_tool",
        RAW_INPUT,
    )

    # Upstream, the custom tool is a function with a single string property "input".
    assert list(upstream_tools(upstream.chat_requests[0])) == ["my_custom_tool"]
    tool = upstream_tools(upstream.chat_requests[0])["my_custom_tool"]
    assert tool["type"] == "function"
    parameters = tool["function"]["parameters"]
    assert parameters["type"] == "object"
    assert list(parameters["properties"]) == ["input"]
    assert parameters["properties"]["input"]["type"] == "string"


def test_namespaced_tool(client: openai.OpenAI, upstream: ChatUpstream, style: str) -> None:
    upstream.enqueue(
        ToolCalls([Call("collaboration__list_agents", '{"state": "idle"}')]),
        ToolCalls([Call("collaboration__list_agents", '{"state": "busy"}')]),
    )

    events, final = helper_stream(client, input="Who is idle?", tools=[NAMESPACE_TOOL])

    check_event_stream(events)
    [call] = final.output
    assert call.type == "function_call"
    assert (call.namespace, call.name) == ("collaboration", "list_agents")
    # The SDK resolves strictness through the namespace: parsed_arguments proves it.
    assert call.parsed_arguments == {"state": "idle"}
    [added] = of_type(events, "response.output_item.added")
    assert (added.item.namespace, added.item.name) == ("collaboration", "list_agents")
    assert [tool.type for tool in final.tools] == ["namespace"]

    whole = client.responses.create(model=MODEL, input="Who is busy?", tools=[NAMESPACE_TOOL])
    [whole_call] = whole.output
    assert (whole_call.type, whole_call.namespace, whole_call.name) == (
        "function_call",
        "collaboration",
        "list_agents",
    )
    assert json.loads(whole_call.arguments) == {"state": "busy"}

    assert list(upstream_tools(upstream.chat_requests[0])) == ["collaboration__list_agents"]


@pytest.mark.parametrize(
    ("upstream_style", "interleave"),
    [("openai", False), ("openai", True), ("ollama", False)],
    ids=["openai", "openai-interleaved", "ollama"],
)
def test_parallel_function_calls(
    client: openai.OpenAI, upstream: ChatUpstream, upstream_style: str, interleave: bool
) -> None:
    upstream.style = upstream_style  # type: ignore[assignment]
    calls = [Call("get_weather", '{"city": "Paris"}'), Call("get_weather", '{"city": "Oslo"}')]
    upstream.enqueue(
        ToolCalls(calls, interleave=interleave), ToolCalls(calls, interleave=interleave)
    )

    events, final = helper_stream(client, input="Paris and Oslo?", tools=[WEATHER_TOOL])

    check_event_stream(events)
    assert [item.type for item in final.output] == ["function_call", "function_call"]
    assert [item.parsed_arguments for item in final.output] == [{"city": "Paris"}, {"city": "Oslo"}]
    call_ids = [item.call_id for item in final.output]
    assert len(set(call_ids)) == 2, call_ids
    assert len({item.id for item in final.output}) == 2
    for index, item in enumerate(final.output):
        deltas = [
            d.delta
            for d in of_type(events, "response.function_call_arguments.delta")
            if d.output_index == index
        ]
        assert "".join(deltas) == item.arguments

    raw = raw_stream(client, input="Paris and Oslo?", tools=[WEATHER_TOOL])
    terminal = check_event_stream(raw)
    assert [json.loads(item.arguments) for item in terminal.response.output] == [
        {"city": "Paris"},
        {"city": "Oslo"},
    ]
    assert len({item.call_id for item in terminal.response.output}) == 2


def test_parallel_calls_non_streaming(
    client: openai.OpenAI, upstream: ChatUpstream, style: str
) -> None:
    upstream.enqueue(
        ToolCalls(
            [Call("get_weather", '{"city": "Paris"}'), Call("get_weather", '{"city": "Oslo"}')]
        )
    )

    response = client.responses.create(model=MODEL, input="Paris and Oslo?", tools=[WEATHER_TOOL])

    assert [json.loads(item.arguments) for item in response.output] == [
        {"city": "Paris"},
        {"city": "Oslo"},
    ]
    assert len({item.call_id for item in response.output}) == 2


def test_text_then_tool_call(client: openai.OpenAI, upstream: ChatUpstream, style: str) -> None:
    """A message and a call in one answer: the message is closed before the call opens."""
    upstream.enqueue(ToolCalls([Call("get_weather", '{"city": "Rome"}')], text="Let me check."))

    events, final = helper_stream(client, input="Weather in Rome?", tools=[WEATHER_TOOL])

    check_event_stream(events)
    assert [item.type for item in final.output] == ["message", "function_call"]
    assert final.output_text == "Let me check."
    assert final.output[1].parsed_arguments == {"city": "Rome"}
    message_done = next(
        i
        for i, e in enumerate(events)
        if e.type == "response.output_item.done" and e.output_index == 0
    )
    call_added = next(
        i
        for i, e in enumerate(events)
        if e.type == "response.output_item.added" and e.output_index == 1
    )
    assert message_done < call_added


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [("", {}), ('{"city": "Paris"', {"city": "Paris"})],
    ids=["empty", "truncated-json"],
)
def test_strict_tool_arguments_are_always_valid_json(
    client: openai.OpenAI, upstream: ChatUpstream, style: str, arguments: str, expected: Any
) -> None:
    """Reference §5.2 item 18: the helper json.loads a strict tool's arguments at completion."""
    upstream.enqueue(
        ToolCalls([Call("get_weather", arguments)]), ToolCalls([Call("get_weather", arguments)])
    )

    events, final = helper_stream(client, input="Weather?", tools=[WEATHER_TOOL])

    check_event_stream(events)
    [call] = final.output
    assert call.parsed_arguments == expected
    assert json.loads(call.arguments) == expected

    parsed = client.responses.parse(model=MODEL, input="Weather?", tools=[WEATHER_TOOL])
    assert parsed.output[0].parsed_arguments == expected


@pytest.mark.parametrize(
    "tool_choice",
    [
        "required",
        "none",
        {"type": "function", "name": "get_weather"},
        {"type": "custom", "name": "my_custom_tool"},
        {
            "type": "allowed_tools",
            "mode": "auto",
            "tools": [{"type": "function", "name": "get_weather"}],
        },
    ],
    ids=["required", "none", "function", "custom", "allowed_tools"],
)
def test_tool_choice_is_echoed_in_responses_shape(
    client: openai.OpenAI, upstream: ChatUpstream, tool_choice: Any
) -> None:
    upstream.enqueue(Text("ok"), Text("ok"))
    params: dict[str, Any] = {
        "input": "hi",
        "tools": [WEATHER_TOOL, CUSTOM_TOOL],
        "tool_choice": tool_choice,
        "temperature": 0.5,
        "max_output_tokens": 100,
        "metadata": {"k": "v"},
    }

    response = client.responses.create(model=MODEL, **params)
    terminal = check_event_stream(raw_stream(client, **params))

    for echoed in (response, terminal.response):
        assert wire(echoed.tool_choice) == tool_choice
        assert [tool.type for tool in echoed.tools] == ["function", "custom"]
        assert echoed.temperature == 0.5 and echoed.max_output_tokens == 100
        assert echoed.metadata == {"k": "v"}


class Weather(BaseModel):
    city: str
    celsius: int


def test_structured_output_text_format(
    client: openai.OpenAI, upstream: ChatUpstream, style: str
) -> None:
    answer = '{"city": "Paris", "celsius": 18}'
    upstream.enqueue(Text(answer), Text(answer))

    with client.responses.stream(
        model=MODEL, input="Weather in Paris", text_format=Weather
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    check_event_stream(events)
    assert final.output_parsed == Weather(city="Paris", celsius=18)

    parsed = client.responses.parse(model=MODEL, input="Weather in Paris", text_format=Weather)
    assert parsed.output_parsed == Weather(city="Paris", celsius=18)

    response_format = upstream.chat_requests[0]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Weather"
    assert set(response_format["json_schema"]["schema"]["properties"]) == {"city", "celsius"}


# ------------------------------------------------------------------------------ reasoning


def test_reasoning_streamed(client: openai.OpenAI, upstream: ChatUpstream, style: str) -> None:
    reasoning, text = "Two plus two: add the units, that makes four.", "It is 4."
    upstream.enqueue(Text(text, reasoning=reasoning), Text(text, reasoning=reasoning))
    params: dict[str, Any] = {"input": "What is 2+2?", "include": ["reasoning.encrypted_content"]}

    events = raw_stream(client, **params)

    terminal = check_event_stream(events)
    assert terminal.type == "response.completed"
    rs, message = terminal.response.output
    assert rs.type == "reasoning"
    assert [(part.type, part.text) for part in rs.content or []] == [("reasoning_text", reasoning)]
    assert isinstance(rs.encrypted_content, str) and rs.encrypted_content
    assert message.type == "message" and terminal.response.output_text == text
    assert "".join(d.delta for d in of_type(events, "response.reasoning_text.delta")) == reasoning
    [reasoning_done] = of_type(events, "response.reasoning_text.done")
    assert reasoning_done.text == reasoning
    part_types = [event.part.type for event in of_type(events, "response.content_part.added")]
    assert part_types == ["reasoning_text", "output_text"]

    helper_events, final = helper_stream(client, **params)
    check_event_stream(helper_events)
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert final.output[0].content[0].text == reasoning
    assert final.output[0].encrypted_content
    assert final.output_text == text


def test_reasoning_non_streaming(client: openai.OpenAI, upstream: ChatUpstream, style: str) -> None:
    reasoning = "The user wants a greeting."
    upstream.enqueue(Text("Hi!", reasoning=reasoning))

    response = client.responses.create(
        model=MODEL, input="Greet me", include=["reasoning.encrypted_content"]
    )

    rs, message = response.output
    assert rs.type == "reasoning"
    assert [(part.type, part.text) for part in rs.content or []] == [("reasoning_text", reasoning)]
    assert rs.encrypted_content
    assert message.type == "message"
    assert response.output_text == "Hi!"


# ------------------------------------------------------------------------------ follow-up turn


@pytest.mark.parametrize("first_turn", ["non-streaming", "stream-openai", "stream-ollama"])
def test_follow_up_with_tool_outputs(
    client: openai.OpenAI, upstream: ChatUpstream, first_turn: str
) -> None:
    """The documented pattern: ``input = [*history, *response.output, *outputs]``."""
    if first_turn == "stream-ollama":
        upstream.style = "ollama"
    reasoning = "I need the weather and the row count."

    def first_answer(request: dict[str, Any]) -> ToolCalls:
        return ToolCalls(
            [
                Call("get_weather", '{"city": "Paris"}'),
                Call(custom_tool_upstream_name(request), json.dumps({"input": RAW_INPUT})),
            ],
            reasoning=reasoning,
        )

    upstream.responder = first_answer
    tools = [WEATHER_TOOL, CUSTOM_TOOL]
    user = {"role": "user", "content": "Weather in Paris, and how many users?"}
    params: dict[str, Any] = {
        "input": [user],
        "tools": tools,
        "include": ["reasoning.encrypted_content"],
    }

    if first_turn == "non-streaming":
        output = list(client.responses.create(model=MODEL, **params).output)
    else:
        output = list(check_event_stream(raw_stream(client, **params)).response.output)
    assert [item.type for item in output] == ["reasoning", "function_call", "custom_tool_call"]
    _, function_call, custom_call = output

    upstream.responder = None
    upstream.enqueue(Text("18C in Paris; there are 3 users."))
    follow_up = client.responses.create(
        model=MODEL,
        tools=tools,
        include=["reasoning.encrypted_content"],
        input=[
            user,
            *output,
            {
                "type": "function_call_output",
                "call_id": function_call.call_id,
                "output": "18C, sunny",
            },
            {
                "type": "custom_tool_call_output",
                "call_id": custom_call.call_id,
                "output": [{"type": "input_text", "text": "3 rows"}],
            },
        ],
    )
    assert follow_up.output_text == "18C in Paris; there are 3 users."

    first, second = upstream.chat_requests
    custom_name = custom_tool_upstream_name(first)
    messages = second["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"], messages
    assert text_of(messages[0]["content"]) == user["content"]
    assistant = messages[1]
    tool_calls = assistant["tool_calls"]
    assert [c["function"]["name"] for c in tool_calls] == ["get_weather", custom_name]
    assert json.loads(tool_calls[0]["function"]["arguments"]) == {"city": "Paris"}
    assert json.loads(tool_calls[1]["function"]["arguments"]) == {"input": RAW_INPUT}
    ids = [c["id"] for c in tool_calls]
    assert len(set(ids)) == 2, ids
    assert [m["tool_call_id"] for m in messages[2:]] == ids
    assert [text_of(m["content"]) for m in messages[2:]] == ["18C, sunny", "3 rows"]
    # The reasoning went back with the assistant turn that it belongs to.
    assert assistant.get("reasoning_content") == reasoning, assistant
    assert set(upstream_tools(second)) == {"get_weather", custom_name}


def test_namespaced_call_in_history_keeps_its_upstream_name(
    client: openai.OpenAI, upstream: ChatUpstream
) -> None:
    upstream.enqueue(ToolCalls([Call("collaboration__list_agents", '{"state": "idle"}')]))
    first = client.responses.create(model=MODEL, input="Who is idle?", tools=[NAMESPACE_TOOL])
    [call] = first.output

    upstream.enqueue(Text("Nobody."))
    client.responses.create(
        model=MODEL,
        tools=[NAMESPACE_TOOL],
        input=[
            {"role": "user", "content": "Who is idle?"},
            *first.output,
            {"type": "function_call_output", "call_id": call.call_id, "output": "[]"},
        ],
    )

    messages = upstream.chat_requests[1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    [tool_call] = messages[1]["tool_calls"]
    assert tool_call["function"]["name"] == "collaboration__list_agents"
    assert messages[2]["tool_call_id"] == tool_call["id"]
    assert text_of(messages[2]["content"]) == "[]"


# ------------------------------------------------------------------------------ errors


@pytest.mark.parametrize("stream", [False, True], ids=["non-streaming", "streaming"])
def test_upstream_400_is_bad_request(
    client: openai.OpenAI, upstream: ChatUpstream, stream: bool
) -> None:
    upstream_message = "This model's maximum context length is 4096 tokens, you asked for 9000."
    upstream.enqueue(
        HttpError(
            400,
            {"error": {"message": upstream_message, "type": "invalid_request_error", "code": None}},
        )
    )

    with pytest.raises(openai.BadRequestError) as caught:
        if stream:
            raw_stream(client, input="hi")
        else:
            client.responses.create(model=MODEL, input="hi")

    assert caught.value.status_code == 400
    assert upstream_message in caught.value.message
    assert len(upstream.chat_requests) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["non-streaming", "streaming"])
def test_upstream_429_is_rate_limit(
    client: openai.OpenAI, upstream: ChatUpstream, stream: bool
) -> None:
    upstream.enqueue(
        HttpError(
            429,
            {"error": {"message": "Rate limit reached, slow down", "type": "rate_limit_error"}},
            {"retry-after": "3"},
        )
    )

    with pytest.raises(openai.RateLimitError) as caught:
        if stream:
            raw_stream(client, input="hi")
        else:
            client.responses.create(model=MODEL, input="hi")

    assert caught.value.status_code == 429
    assert "Rate limit reached, slow down" in caught.value.message
    assert caught.value.response.headers.get("retry-after") == "3"
    assert len(upstream.chat_requests) == 1  # a 429 is not retried by the gateway


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"input": [{"type": "function_call_output", "output": "orphan"}]}, "input[0].call_id"),
        (
            {
                "input": "hi",
                "extra_body": {"input": [{"type": "function_call_output", "output": "x"}]},
            },
            "input[0].call_id",
        ),
        (
            {
                "input": [
                    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": {"a": 1}}
                ]
            },
            "input[0].arguments",
        ),
        (
            {
                "input": "hi",
                "extra_body": {"tools": [{"type": "function", "description": "no name"}]},
            },
            "tools[0].name",
        ),
    ],
    ids=[
        "output-without-call-id",
        "extra-body-output-without-call-id",
        "arguments-not-a-string",
        "tool-without-name",
    ],
)
def test_malformed_request_is_bad_request_naming_the_field(
    client: openai.OpenAI, upstream: ChatUpstream, params: dict[str, Any], field: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=MODEL, **params)

    assert field in caught.value.message
    assert caught.value.param == field
    assert upstream.chat_requests == []


@pytest.mark.parametrize(
    "failure",
    [StreamError(after_chunks=3), Cut(after_chunks=3)],
    ids=["in-stream-error", "connection-cut"],
)
def test_mid_stream_failure(
    client: openai.OpenAI, upstream: ChatUpstream, style: str, failure: Any
) -> None:
    """After the first byte a failure can only be reported in the stream: as against OpenAI,
    the SDK raises ``APIError`` on the ``error`` event (or ends on ``response.failed``) and
    never a validation error."""
    upstream.enqueue(failure)
    events: list[Any] = []

    with client.responses.create(model=MODEL, input="hi", stream=True) as stream:
        try:
            for event in stream:
                events.append(event)
        except openai.APIResponseValidationError:
            raise
        except openai.APIError as exc:
            assert exc.message
        else:
            assert events[-1].type == "response.failed"
            assert events[-1].response.error is not None
            assert events[-1].response.error.code == "server_error"

    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert events[0].type == "response.created"
    assert not [
        event for event in events if event.type in {"response.completed", "response.incomplete"}
    ]


# ------------------------------------------------------------------------------ incomplete


def test_length_finish_is_incomplete(
    client: openai.OpenAI, upstream: ChatUpstream, style: str
) -> None:
    text = "This answer stops at the token lim"
    upstream.enqueue(*[Text(text, finish_reason="length")] * 3)

    events = raw_stream(client, input="Write a long essay", max_output_tokens=16)

    terminal = check_event_stream(events)
    assert terminal.type == "response.incomplete"
    assert terminal.response.status == "incomplete"
    assert terminal.response.incomplete_details is not None
    assert terminal.response.incomplete_details.reason == "max_output_tokens"
    assert terminal.response.output_text == text

    # The helper raises exactly as it does against OpenAI.
    with client.responses.stream(model=MODEL, input="Write a long essay") as stream:
        helper_events = list(stream)
        with pytest.raises(
            RuntimeError, match=re.escape("Didn't receive a `response.completed` event")
        ):
            stream.get_final_response()
    assert helper_events[-1].type == "response.incomplete"

    response = client.responses.create(model=MODEL, input="Write a long essay")
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == text
