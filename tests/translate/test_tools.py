"""What both wires know about the client's tools, once (``translate/_tools``).

Each behaviour is checked through both wires' public surfaces, ``translate_request``
(a Chat backend) and ``downgrade_request`` (a V1-only Responses backend), so that the
two cannot drift apart again: the listing of what a tool search loaded, a custom tool
offered as a function, and the guess of which tool a bare name means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from toolwire.protocol import parse_request
from toolwire.translate import (
    ChatStreamTranslator,
    ResponsesCapabilities,
    ResponsesStreamRestorer,
    downgrade_request,
    translate_request,
)

from .test_custom_input import APPLY_PATCH_GRAMMAR

JSON = dict[str, Any]
TOOL_SEARCH = {
    "type": "tool_search",
    "execution": "client",
    "description": "Search for tools.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
}
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": APPLY_PATCH_GRAMMAR},
}


def chat_listing(body: JSON) -> JSON:
    """What a Chat backend is told a tool search loaded: the last tool message."""
    content = translate_request(parse_request(body)).chat["messages"][-1]["content"]
    assert isinstance(content, str)
    return orjson.loads(content)


def responses_listing(body: JSON) -> JSON:
    """What a V1 Responses backend is told a tool search loaded: the search's output."""
    sent = downgrade_request(parse_request(body), ResponsesCapabilities()).body
    outputs = [item for item in sent["input"] if item.get("type") == "function_call_output"]
    return orjson.loads(outputs[-1]["output"])


WIRES = [
    pytest.param(chat_listing, id="chat"),
    pytest.param(responses_listing, id="responses"),
]


def searched(loaded: JSON) -> JSON:
    return {
        "model": "gpt-5.5",
        "tools": [TOOL_SEARCH],
        "input": [
            {"role": "user", "content": "spawn"},
            {
                "type": "tool_search_call",
                "call_id": "call_s",
                "execution": "client",
                "arguments": {"query": "spawn"},
            },
            {
                "type": "tool_search_output",
                "call_id": "call_s",
                "execution": "client",
                "tools": [loaded],
            },
        ],
    }


# ---------------------------------------------------------------- what a tool search loaded


@pytest.mark.parametrize("listing", WIRES)
@pytest.mark.parametrize(
    ("description", "line"),
    [
        ("Spawn a sub-agent.\nLong details...", "Spawn a sub-agent."),
        ("\n\n   Starts after blank lines.  \n more", "Starts after blank lines."),
        ("\r\n\t\r\nWindows lines\r\nsecond", "Windows lines"),
        ("\u2028Unicode separator\u2029second\x85third", "Unicode separator"),
        ("form\x0cfeed", "form"),
        ("unit\x1fseparator is no line break\nsecond", "unit\x1fseparator is no line break"),
        ("x" * 300, "x" * 199 + "…"),
        ("x" * 200 + "   \nsecond", "x" * 200),
    ],
)
def test_a_loaded_tool_is_listed_with_the_first_line_of_its_description(
    listing: Callable[[JSON], JSON], description: str, line: str
) -> None:
    loaded = {"type": "function", "name": "spawn_agent", "description": description, "parameters": {"type": "object"}}
    assert listing(searched(loaded)) == {"loaded_tools": [{"name": "spawn_agent", "description": line}]}


@pytest.mark.parametrize("listing", WIRES)
def test_a_description_of_blank_lines_lists_no_description(listing: Callable[[JSON], JSON]) -> None:
    loaded = {"type": "function", "name": "spawn_agent", "description": " \n\t\n", "parameters": {"type": "object"}}
    assert listing(searched(loaded)) == {"loaded_tools": [{"name": "spawn_agent", "description": ""}]}


@pytest.mark.parametrize("listing", WIRES)
def test_a_loaded_namespace_is_listed_by_the_flat_names_of_its_tools(
    listing: Callable[[JSON], JSON],
) -> None:
    loaded = {
        "type": "namespace",
        "name": "multi_agent",
        "description": "Sub-agents.",
        "tools": [
            {"type": "function", "name": "spawn", "description": "\nSpawn one.", "parameters": {"type": "object"}},
            {"type": "function", "name": "close", "parameters": {"type": "object"}},
        ],
    }
    assert listing(searched(loaded)) == {
        "loaded_tools": [
            {"name": "multi_agent__spawn", "description": "Spawn one."},
            {"name": "multi_agent__close"},
        ]
    }


# ---------------------------------------------------------------- a custom tool as a function


def test_both_wires_offer_a_custom_tool_as_the_same_function() -> None:
    body = {"model": "m", "input": "hi", "tools": [APPLY_PATCH]}
    (chat_tool,) = translate_request(parse_request(body)).chat["tools"]
    (responses_tool,) = downgrade_request(parse_request(body), ResponsesCapabilities()).body["tools"]
    assert responses_tool == {"type": "function", **chat_tool["function"]}
    assert responses_tool["parameters"]["required"] == ["input"]
    assert APPLY_PATCH_GRAMMAR in responses_tool["description"]


def test_both_wires_send_a_custom_call_in_the_history_with_the_same_arguments() -> None:
    body = {
        "model": "m",
        "tools": [APPLY_PATCH],
        "input": [
            {"role": "user", "content": "patch"},
            {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch\n"},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "done"},
        ],
    }
    messages = translate_request(parse_request(body)).chat["messages"]
    chat_arguments = messages[1]["tool_calls"][0]["function"]["arguments"]
    sent = downgrade_request(parse_request(body), ResponsesCapabilities()).body["input"]
    assert sent[1]["arguments"] == chat_arguments
    assert orjson.loads(chat_arguments) == {"input": "*** Begin Patch\n"}


# ---------------------------------------------------------------- the guess of a bare name


def namespaced(*namespaces: str) -> JSON:
    return {
        "model": "m",
        "input": "hi",
        "tools": [
            {
                "type": "namespace",
                "name": namespace,
                "description": "",
                "tools": [{"type": "function", "name": "list", "parameters": {"type": "object"}}],
            }
            for namespace in namespaces
        ],
    }


def chat_call(body: JSON, name: str) -> JSON:
    request = parse_request(body)
    translator = ChatStreamTranslator(
        request, translate_request(request).tools, response_id="resp_1", created_at=1, model="m"
    )
    call = {"index": 0, "id": "call_1", "function": {"name": name, "arguments": "{}"}}
    return translator.translate_whole(
        {"choices": [{"index": 0, "message": {"tool_calls": [call]}, "finish_reason": "tool_calls"}]}
    )["output"][0]


def responses_call(body: JSON, name: str) -> JSON:
    request = parse_request(body)
    downgraded = downgrade_request(request, ResponsesCapabilities())
    restorer = ResponsesStreamRestorer(downgraded, response_id="resp_1", created_at=1, model="m")
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": name, "arguments": "{}"}
    return restorer.translate_whole({"id": "resp_up", "output": [call]})["output"][0]


CALLS = [pytest.param(chat_call, id="chat"), pytest.param(responses_call, id="responses")]


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("name", ["list", "tasks.list"])
def test_a_bare_or_dotted_name_means_the_one_tool_that_fits(
    call: Callable[[JSON, str], JSON], name: str
) -> None:
    item = call(namespaced("tasks"), name)
    assert (item.get("namespace"), item["name"]) == ("tasks", "list")


@pytest.mark.parametrize("call", CALLS)
def test_a_bare_name_that_fits_two_tools_means_none(call: Callable[[JSON, str], JSON]) -> None:
    item = call(namespaced("tasks", "files"), "list")
    assert ("namespace" in item, item["name"]) == (False, "list")
