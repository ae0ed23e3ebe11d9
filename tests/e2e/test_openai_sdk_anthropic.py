"""The official ``openai`` SDK in strict mode through the gateway, in front of the scripted
Messages API (kind ``anthropic``).

Every response object and stream event is validated by the SDK's own pydantic models
(``_strict_response_validation=True``); ``check_event_stream`` adds the ordering and
identity rules. The upstream enforces the Messages API's rules, so every follow-up here
is also a valid Messages request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.e2e.test_openai_sdk import (
    CUSTOM_TOOL,
    NAMESPACE_TOOL,
    RAW_INPUT,
    WEATHER_TOOL,
    check_event_stream,
    wire,
)
from tests.support.gateway import GatewayProcess
from tests.support.messages_upstream import (
    Answer,
    HttpError,
    MessagesUpstream,
    Redacted,
    Said,
    Search,
    StreamError,
    Thinking,
    Use,
    sign,
)

pytestmark = pytest.mark.e2e

MODEL = "claude-sonnet-4-5"


@pytest.fixture
def client(anthropic_gateway: GatewayProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=anthropic_gateway.base_url,
        api_key="test",
        _strict_response_validation=True,
        max_retries=0,
        timeout=30,
    ) as sdk_client:
        yield sdk_client


def raw_stream(client: openai.OpenAI, **params: Any) -> list[Any]:
    with client.responses.create(model=MODEL, stream=True, **params) as stream:
        return list(stream)


def of_type(events: list[Any], kind: str) -> list[Any]:
    return [event for event in events if event.type == kind]


# ------------------------------------------------------------------------------ text


def test_text_whole_and_streamed_agree(client: openai.OpenAI, messages_upstream: MessagesUpstream) -> None:
    text = "Hello there, friend."
    messages_upstream.enqueue(Answer([Said(text)]), Answer([Said(text)]))
    whole = client.responses.create(model=MODEL, input="Say hello", instructions="Be brief.")
    events = raw_stream(client, input="Say hello", instructions="Be brief.")
    terminal = check_event_stream(events)
    assert whole.status == terminal.response.status == "completed"
    assert whole.output_text == terminal.response.output_text == text
    assert "".join(e.delta for e in of_type(events, "response.output_text.delta")) == text
    first, second = messages_upstream.message_requests
    assert first.get("stream") is not True and second["stream"] is True
    assert first["system"][0]["text"] == "Be brief."
    assert first["messages"][0]["content"][0]["text"] == "Say hello"
    assert isinstance(first["max_tokens"], int)


def test_usage_counts_cached_input(client: openai.OpenAI, messages_upstream: MessagesUpstream) -> None:
    """The second request with the same long prefix reads it from the prompt cache, and the
    Response says so in ``input_tokens_details.cached_tokens``."""
    messages_upstream.enqueue(Answer([Said("one")]), Answer([Said("two")]))
    params: dict[str, Any] = {"instructions": "You are a careful assistant. " * 50, "tools": [WEATHER_TOOL]}
    first = check_event_stream(raw_stream(client, input="first", **params)).response.usage
    second = check_event_stream(raw_stream(client, input="second", **params)).response.usage
    assert first.input_tokens_details.cache_write_tokens > 0 and first.input_tokens_details.cached_tokens == 0
    assert second.input_tokens_details.cached_tokens > 0
    assert second.input_tokens >= second.input_tokens_details.cached_tokens
    assert second.total_tokens == second.input_tokens + second.output_tokens


# ------------------------------------------------------------------------------ tools


def test_strict_function_tool_streamed_and_parsed(client: openai.OpenAI, messages_upstream: MessagesUpstream) -> None:
    messages_upstream.enqueue(Answer([Use("get_weather", {"city": "Paris"})]))
    events = raw_stream(client, input="Weather in Paris?", tools=[WEATHER_TOOL])
    terminal = check_event_stream(events)
    [call] = terminal.response.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert "".join(e.delta for e in of_type(events, "response.function_call_arguments.delta")) == call.arguments
    [sent] = messages_upstream.message_requests
    [tool] = sent["tools"]
    assert tool["name"] == "get_weather" and tool["input_schema"] == WEATHER_TOOL["parameters"]


def test_custom_tool_gets_its_raw_input(client: openai.OpenAI, messages_upstream: MessagesUpstream) -> None:
    messages_upstream.enqueue(Answer([Use("my_custom_tool", {"input": RAW_INPUT})]))
    events = raw_stream(client, input="Run it", tools=[CUSTOM_TOOL])
    [call] = check_event_stream(events).response.output
    assert call.type == "custom_tool_call" and call.input == RAW_INPUT
    [done] = of_type(events, "response.custom_tool_call_input.done")
    assert done.input == RAW_INPUT
    [tool] = messages_upstream.message_requests[0]["tools"]
    assert tool["input_schema"]["properties"]["input"]["type"] == "string"


def test_namespaced_and_parallel_calls(client: openai.OpenAI, messages_upstream: MessagesUpstream) -> None:
    messages_upstream.enqueue(
        Answer([Said("Both."), Use("collaboration__list_agents", {"state": "idle"}), Use("get_weather", {"city": "Oslo"})])
    )
    response = client.responses.create(model=MODEL, input="Go", tools=[NAMESPACE_TOOL, WEATHER_TOOL])
    message, agents, weather = response.output
    assert message.type == "message" and message.content[0].text == "Both."
    assert (agents.type, agents.name, agents.namespace) == ("function_call", "list_agents", "collaboration")
    assert weather.name == "get_weather" and agents.call_id != weather.call_id


def test_parallel_tool_calls_false_is_disable_parallel_tool_use(
    client: openai.OpenAI, messages_upstream: MessagesUpstream
) -> None:
    messages_upstream.enqueue(Answer([Said("ok")]), Answer([Said("ok")]))
    client.responses.create(model=MODEL, input="Go", tools=[WEATHER_TOOL], parallel_tool_calls=False)
    client.responses.create(model=MODEL, input="Go", tools=[WEATHER_TOOL], tool_choice="required")
    first, second = messages_upstream.message_requests
    assert first["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert second["tool_choice"] == {"type": "any"}


def test_follow_up_pairs_results_and_returns_thinking(client: openai.OpenAI, messages_upstream: MessagesUpstream) -> None:
    """A whole tool loop through the SDK: the second request carries the thinking blocks
    unchanged, the calls, then their results first in the next user message."""
    messages_upstream.enqueue(
        Answer([Thinking("Two cities: two calls."), Use("get_weather", {"city": "Paris"}), Use("get_weather", {"city": "Rome"})]),
        Answer([Said("Paris is sunny, Rome is rainy.")]),
    )
    params: dict[str, Any] = {"tools": [WEATHER_TOOL], "reasoning": {"effort": "low"}}
    first = client.responses.create(model=MODEL, input="Weather in Paris and Rome?", **params)
    reasoning, paris, rome = first.output
    assert reasoning.type == "reasoning" and reasoning.encrypted_content
    history = [{"role": "user", "content": "Weather in Paris and Rome?"}, *wire(first.output)]
    outputs = [
        {"type": "function_call_output", "call_id": rome.call_id, "output": "rainy"},
        {"type": "function_call_output", "call_id": paris.call_id, "output": "sunny"},
    ]
    second = client.responses.create(model=MODEL, input=history + outputs, **params)
    assert second.output_text == "Paris is sunny, Rome is rainy."
    sent = messages_upstream.message_requests[1]
    assistant, results = sent["messages"][1], sent["messages"][2]
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "Two cities: two calls.",
        "signature": sign("Two cities: two calls."),
    }
    uses = [block["id"] for block in assistant["content"] if block["type"] == "tool_use"]
    assert [(b["tool_use_id"], b["content"]) for b in results["content"]] == [(uses[0], "sunny"), (uses[1], "rainy")]


def test_reasoning_streamed(client: openai.OpenAI, messages_upstream: MessagesUpstream) -> None:
    messages_upstream.enqueue(Answer([Thinking("Let me think about it."), Redacted(), Said("42")]))
    events = raw_stream(client, input="Answer?", reasoning={"effort": "high"})
    terminal = check_event_stream(events)
    thinking, redacted, message = terminal.response.output
    assert thinking.type == redacted.type == "reasoning"
    assert thinking.content[0].text == "Let me think about it."
    assert "".join(e.delta for e in of_type(events, "response.reasoning_text.delta")) == "Let me think about it."
    assert redacted.content == [] and redacted.encrypted_content
    assert message.content[0].text == "42"
    [sent] = messages_upstream.message_requests
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 16384}


# ------------------------------------------------------------------------------ web search


def test_hosted_web_search_runs_on_the_backend(client: openai.OpenAI, messages_upstream: MessagesUpstream) -> None:
    urls = ["https://example.org/a", "https://example.org/b"]
    messages_upstream.enqueue(Answer([Search("toolwire gateway", urls), Said("Found two pages.")]))
    events = raw_stream(client, input="Search the web", tools=[{"type": "web_search"}])
    search, message = check_event_stream(events).response.output
    assert search.type == "web_search_call" and search.status == "completed"
    assert search.action.query == "toolwire gateway"
    assert [source.url for source in search.action.sources] == urls
    assert message.content[0].text == "Found two pages."
    [sent] = messages_upstream.message_requests
    assert {"type": "web_search_20250305", "name": "web_search"} in sent["tools"]


def test_cached_only_web_search_is_not_offered(client: openai.OpenAI, messages_upstream: MessagesUpstream) -> None:
    """Codex's default asks for no live web access: Anthropic's search is live, so it is withheld."""
    messages_upstream.enqueue(Answer([Said("No search.")]))
    client.responses.create(model=MODEL, input="Hi", tools=[{"type": "web_search", "external_web_access": False}])
    [sent] = messages_upstream.message_requests
    assert "tools" not in sent


# ------------------------------------------------------------------------------ errors and ends


def test_upstream_400_is_bad_request_with_its_message(client: openai.OpenAI, messages_upstream: MessagesUpstream) -> None:
    messages_upstream.enqueue(HttpError(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"))
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model=MODEL, input="Hi")
    assert "prompt is too long" in str(raised.value)


@pytest.mark.parametrize(
    ("status", "error_type", "exception"),
    [(429, "rate_limit_error", openai.RateLimitError), (529, "overloaded_error", openai.InternalServerError)],
)
def test_429_and_529_keep_retry_after(
    client: openai.OpenAI, messages_upstream: MessagesUpstream, status: int, error_type: str, exception: type[Exception]
) -> None:
    messages_upstream.responder = lambda _request: HttpError(status, error_type, f"{error_type}: slow down", {"retry-after": "7"})
    with pytest.raises(exception) as raised:
        client.responses.create(model=MODEL, input="Hi")
    error = raised.value
    assert isinstance(error, openai.APIStatusError)
    assert error.status_code == status
    assert error.response.headers["retry-after"] == "7"
    assert f"{error_type}: slow down" in str(error)


def test_mid_stream_error_event_fails_the_response(client: openai.OpenAI, messages_upstream: MessagesUpstream) -> None:
    """An ``error`` event after the first byte: as against OpenAI, the SDK raises
    ``APIError`` with the upstream's message on the gateway's ``error`` event, never a
    validation error, and nothing completed came before it."""
    messages_upstream.enqueue(StreamError(after_events=5, message="Overloaded mid-stream"))
    events: list[Any] = []
    with client.responses.create(model=MODEL, input="Hi", stream=True) as stream, pytest.raises(openai.APIError) as raised:
        for event in stream:
            events.append(event)
    assert not isinstance(raised.value, openai.APIResponseValidationError)
    assert "Overloaded mid-stream" in raised.value.message
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert not [e for e in events if e.type in {"response.completed", "response.incomplete"}]


def test_max_tokens_stop_is_incomplete(client: openai.OpenAI, messages_upstream: MessagesUpstream) -> None:
    messages_upstream.enqueue(Answer([Said("This answer was cut at the tok")], stop_reason="max_tokens"))
    events = raw_stream(client, input="Hi", max_output_tokens=16)
    terminal = check_event_stream(events)
    assert terminal.type == "response.incomplete"
    assert terminal.response.incomplete_details.reason == "max_output_tokens"
    assert messages_upstream.message_requests[0]["max_tokens"] == 16
