"""A Response made whole (``complete_response``, ``complete_usage``): every field the Open
Responses specification requires, from the request's echo or the specified defaults,
while what the Response says of its own is kept.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import orjson
import pytest

from toolwire.protocol import parse_request
from toolwire.translate import ResponsesEventWriter, complete_response, complete_usage, dumps_event

JSON = dict[str, Any]

DEFAULTS: JSON = {
    "id": None,
    "object": "response",
    "created_at": 0,
    "completed_at": None,
    "status": "completed",
    "incomplete_details": None,
    "model": "",
    "previous_response_id": None,
    "instructions": None,
    "output": [],
    "error": None,
    "tools": [],
    "tool_choice": "auto",
    "truncation": "disabled",
    "parallel_tool_calls": True,
    "text": {"format": {"type": "text"}},
    "top_p": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "top_logprobs": 0,
    "temperature": 1.0,
    "reasoning": None,
    "usage": None,
    "max_output_tokens": None,
    "max_tool_calls": None,
    "store": True,
    "background": False,
    "service_tier": "default",
    "metadata": {},
    "safety_identifier": None,
    "prompt_cache_key": None,
    "user": None,
}


def echo_of(body: JSON) -> JSON:
    request = parse_request(orjson.dumps({"model": "m", "input": "hi", **body}))
    return ResponsesEventWriter(request, response_id="resp_e", created_at=1, model="m").echo


ECHO = echo_of(
    {
        "instructions": "Be brief.",
        "temperature": 0.3,
        "tool_choice": "required",
        "text": {"format": {"type": "json_object"}},
        "truncation": "auto",
        "user": "u1",
        "metadata": {"k": "v"},
    }
)


def test_an_empty_response_gets_every_default() -> None:
    assert complete_response({}) == DEFAULTS


def test_what_the_response_says_is_kept_and_what_is_wrong_comes_from_the_request() -> None:
    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 5,
        "completed_at": "later",
        "status": "failed",
        "model": "gpt",
        "output": [{"type": "message"}],
        "instructions": [{"type": "message", "role": "developer", "content": "x"}],
        "tool_choice": {"type": "function", "name": "f"},
        "error": {"message": "went wrong", "param": None},
        "temperature": None,
        "top_p": True,
        "text": {"verbosity": "low"},
        "truncation": "sometimes",
        "user": 7,
        "reasoning": {"effort": "high"},
        "incomplete_details": "no",
        "usage": {"input_tokens": 3.7, "output_tokens": -2, "input_tokens_details": {"cached_tokens": 1, "x": 2}, "output_tokens_details": "junk", "extra": 1},
        "extra_field": "kept",
    }
    assert complete_response(response, ECHO) == {
        **DEFAULTS,
        "id": "resp_1",
        "created_at": 5,
        "status": "failed",
        "model": "gpt",
        "output": [{"type": "message"}],
        "instructions": [{"type": "message", "role": "developer", "content": "x"}],
        "tool_choice": {"type": "function", "name": "f"},
        "error": {"message": "went wrong", "param": None, "code": "server_error"},
        "temperature": 0.3,
        "text": {"format": {"type": "json_object"}},
        "truncation": "auto",
        "user": "u1",
        "reasoning": {"effort": "high"},
        "metadata": {"k": "v"},
        "usage": {
            "input_tokens": 3,
            "input_tokens_details": {"cached_tokens": 1, "x": 2, "cache_write_tokens": 0},
            "output_tokens": 0,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 3,
            "extra": 1,
        },
        "extra_field": "kept",
    }


@pytest.mark.parametrize(
    ("error", "completed"),
    [
        ({"code": 5}, {"code": "server_error", "message": "The response failed."}),
        ({"code": "rate_limit_exceeded", "message": 3}, {"code": "rate_limit_exceeded", "message": "The response failed."}),
        ({"code": "timeout", "message": "slow"}, {"code": "timeout", "message": "slow"}),
        ("broken", None),
    ],
)
def test_an_error_is_kept_with_a_code_and_a_message(error: Any, completed: JSON | None) -> None:
    assert complete_response({"error": error})["error"] == completed


def test_fields_that_are_of_their_kind_are_kept() -> None:
    response = {
        **DEFAULTS,
        "id": "resp_k",
        "completed_at": 9,
        "incomplete_details": {"reason": "max_output_tokens"},
        "previous_response_id": "resp_0",
        "max_output_tokens": 100,
        "max_tool_calls": 3,
        "safety_identifier": "s",
        "prompt_cache_key": "p",
        "user": "me",
        "text": {"format": {"type": "text"}, "verbosity": "high"},
        "truncation": "auto",
        "parallel_tool_calls": False,
        "top_logprobs": 2,
        "service_tier": "flex",
        "metadata": {"a": "b"},
        "tools": [{"type": "web_search"}],
        "store": False,
        "background": True,
        "presence_penalty": 0.5,
    }
    assert complete_response(response, ECHO) == response


@pytest.mark.parametrize(
    ("usage", "completed"),
    [
        (None, {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}, "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 0}),
        (
            {"input_tokens": 2, "output_tokens": 3, "total_tokens": 99, "input_tokens_details": [1], "output_tokens_details": {"reasoning_tokens": 2.9}},
            {"input_tokens": 2, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}, "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 99},
        ),
        (
            {"input_tokens": 2, "output_tokens": 3, "total_tokens": "many", "input_tokens_details": {"cached_tokens": "1", "cache_write_tokens": 2.5}},
            {"input_tokens": 2, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 2}, "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 0},
        ),
        (
            {"input_tokens": 2, "output_tokens": 3, "total_tokens": None},
            {"input_tokens": 2, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}, "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 5},
        ),
        (  # counts past 64 bits (orjson reads 2**64 as a float) are clamped so that their sum can be written
            {"input_tokens": 1.8446744073709552e19, "output_tokens": 2**64 - 1, "total_tokens": None},
            {"input_tokens": 10**12, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}, "output_tokens": 10**12, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 2 * 10**12},
        ),
    ],
)
def test_usage_made_whole(usage: JSON | None, completed: JSON) -> None:
    assert complete_usage(usage) == completed


def test_the_echo_repeats_what_the_request_set() -> None:
    echo = echo_of(
        {
            "tool_choice": "none",
            "parallel_tool_calls": False,
            "temperature": 0.5,
            "top_p": 0.9,
            "presence_penalty": 0.1,
            "frequency_penalty": 0.2,
            "top_logprobs": 3,
            "max_output_tokens": 50,
            "max_tool_calls": 4,
            "previous_response_id": "resp_p",
            "reasoning": {"effort": "low"},
            "text": {"verbosity": "high"},
            "truncation": "auto",
            "metadata": {"a": "b"},
            "store": False,
            "background": True,
            "service_tier": "flex",
            "safety_identifier": "sid",
            "prompt_cache_key": "pk",
            "user": "u",
            "prompt_cache_retention": "24h",
            "tools": [{"type": "function", "name": "f"}, {"type": "web_search"}],
        }
    )
    assert echo == {
        "instructions": None,
        "tools": [{"type": "function", "name": "f", "description": None, "parameters": None, "strict": True}, {"type": "web_search"}],
        "tool_choice": "none",
        "parallel_tool_calls": False,
        "temperature": 0.5,
        "top_p": 0.9,
        "presence_penalty": 0.1,
        "frequency_penalty": 0.2,
        "top_logprobs": 3,
        "max_output_tokens": 50,
        "max_tool_calls": 4,
        "previous_response_id": "resp_p",
        "reasoning": {"effort": "low", "summary": None},
        "text": {"verbosity": "high", "format": {"type": "text"}},
        "truncation": "auto",
        "metadata": {"a": "b"},
        "store": False,
        "background": True,
        "service_tier": "flex",
        "safety_identifier": "sid",
        "prompt_cache_key": "pk",
        "user": "u",
        "prompt_cache_retention": "24h",
    }


def test_values_of_the_wrong_kind_are_echoed_as_the_defaults() -> None:
    echo = echo_of(
        {"presence_penalty": True, "top_logprobs": True, "max_tool_calls": 2.5, "truncation": "x", "background": "yes", "service_tier": 5, "safety_identifier": 3, "text": {"format": "x"}}
    )
    assert echo == {key: DEFAULTS[key] for key in echo}


# ------------------------------------------------------------ events with the echo, written


def stream_events(body: JSON) -> list[JSON]:
    writer = ResponsesEventWriter(parse_request(orjson.dumps(body)), response_id="resp_1", created_at=1, model="m")
    writer.begin()
    writer.lifecycle("response.completed", writer.response("completed", output=[], completed_at=2))
    return writer.take()


TOOLS = [
    {"type": "function", "name": "shell", "description": "Runs a command \u00e9\n", "parameters": {"type": "object"}},
    {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "a: b"}},
    {"type": "web_search"},
]


@pytest.mark.parametrize("tools", [TOOLS, []], ids=["tools", "no tools"])
def test_an_event_is_written_as_orjson_writes_it(tools: list[JSON]) -> None:
    events = stream_events({"model": "m", "input": "hi", "tools": tools})
    assert [event["type"] for event in events] == ["response.created", "response.in_progress", "response.completed"]
    for event in events:
        assert dumps_event(event) == orjson.dumps(event)
    assert dumps_event({"type": "response.output_text.delta", "delta": "x"}) == b'{"type":"response.output_text.delta","delta":"x"}'


def test_a_resent_tool_list_is_echoed_by_one_list_written_once() -> None:
    first = stream_events({"model": "m", "input": "hi", "tools": TOOLS})
    again = stream_events({"model": "m", "input": "yo", "tools": TOOLS})
    echoed = {id(event["response"]["tools"]) for event in first + again}
    assert len(echoed) == 1  # one list, shared by every Response of both streams
    tools = first[0]["response"]["tools"]
    assert isinstance(tools, list) and tools == [{**TOOLS[0], "strict": True}, TOOLS[1], TOOLS[2]]
    written = [dumps_event(event) for event in first + again]
    assert tools.json() is tools.json()  # its JSON written once, then kept
    assert all(orjson.dumps(tools) in event for event in written)


def test_an_echoed_tool_list_copies_and_pickles_as_a_plain_list() -> None:
    [created, *_] = stream_events({"model": "m", "input": "hi", "tools": TOOLS})
    tools = created["response"]["tools"]
    tools.json()
    for made in (copy.copy(tools), copy.deepcopy(tools), pickle.loads(pickle.dumps(tools))):
        assert type(made) is list and made == tools
    response = copy.deepcopy(created["response"])
    assert response == created["response"] and type(response["tools"]) is list


def test_an_event_carries_the_json_its_tool_list_kept() -> None:
    [created, *_] = stream_events({"model": "m", "input": "hi", "tools": TOOLS})
    tools = created["response"]["tools"]
    written = orjson.dumps(tools)
    tools.json()
    # Never done to an echo (it is read-only): here, it shows which JSON an event carries.
    tools.append({"type": "web_search"})
    try:
        assert written in dumps_event(created) and orjson.dumps(tools) not in dumps_event(created)
    finally:
        tools.pop()


@pytest.mark.parametrize(
    "event",
    [
        {"type": "response.created", "response": {"id": "resp_1", "tools": [{"type": "web_search"}]}},
        {"type": "response.created", "response": {"id": "resp_1", "tools": []}},
        {"type": "response.created", "response": None},
        {"type": "error", "error": {"message": "no"}},
    ],
    ids=["a plain tool list", "no tools", "no response", "no response key"],
)
def test_an_event_whose_tools_kept_no_json_is_written_as_it_is(event: JSON) -> None:
    assert dumps_event(event) == orjson.dumps(event)
