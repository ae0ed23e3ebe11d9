"""Every declared tool keeps a flat upstream name of its own, through the real gateway.

A Chat backend sees flat names (``[A-Za-z0-9_-]``, 64 characters at most). Each case
below declares tools that two naive flattenings would map to one name: the upstream
must receive as many distinct, valid names as there are callable tools, and a call to
each of those names must come back as a call to the very tool (name, namespace and
type) behind it, so no tool is silently dropped or swapped.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.support.chat_upstream import Call, ChatUpstream, ToolCalls
from tests.support.gateway import GatewayProcess

JSON = dict[str, Any]
VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")
LONG = "a_tool_name_long_enough_that_its_flat_form_must_be_cut_to_sixty_four_characters"


def function(name: str) -> JSON:
    return {"type": "function", "name": name, "parameters": {"type": "object"}}


def custom(name: str) -> JSON:
    return {"type": "custom", "name": name}


def namespace(name: str, *tools: JSON) -> JSON:
    return {"type": "namespace", "name": name, "description": "", "tools": list(tools)}


CASES: dict[str, list[JSON]] = {
    "top-level name that is a namespace's flat name": [
        function("collaboration__list_agents"),
        namespace("collaboration", function("list_agents")),
    ],
    "the same, namespace declared first": [
        namespace("collaboration", function("list_agents")),
        function("collaboration__list_agents"),
    ],
    "a namespace ending in __, and the same without": [
        namespace("mcp__files__", function("read")),
        namespace("mcp__files", function("read")),
        function("mcp__files__read"),
    ],
    "long names sharing their first 64 characters": [
        function(LONG + "_one"),
        function(LONG + "_two"),
        namespace(LONG, function("x")),
        namespace(LONG[:40], function(LONG[40:] + "_one")),
    ],
    "names that differ only in characters a backend refuses": [
        namespace("web.tools", function("fetch")),
        namespace("web:tools", function("fetch")),
        namespace("web_tools", function("fetch")),
        function("web.tools__fetch"),
    ],
    "a declared name equal to the hashed name another tool would get": [
        # sha256("collaboration.list_agents")[:8] is 927c1770: the namespaced tool's name
        # once the top-level one has taken "collaboration__list_agents".
        function("collaboration__list_agents_927c1770"),
        function("collaboration__list_agents"),
        namespace("collaboration", function("list_agents")),
    ],
    "a function and a custom tool in one namespace flattening alike": [
        namespace("functions", custom("exec")),
        function("functions__exec"),
    ],
}


def declared(tools: list[JSON]) -> set[tuple[str | None, str, str]]:
    """(namespace, name, call item type) of every callable tool ``tools`` declare."""
    out: set[tuple[str | None, str, str]] = set()
    for tool in tools:
        if tool["type"] == "namespace":
            out |= {(tool["name"], inner["name"], call_type(inner)) for inner in tool["tools"]}
        else:
            out.add((None, tool["name"], call_type(tool)))
    return out


def call_type(tool: JSON) -> str:
    return "custom_tool_call" if tool["type"] == "custom" else "function_call"


@pytest.mark.parametrize("tools", list(CASES.values()), ids=list(CASES))
def test_colliding_flat_names_stay_distinct_and_each_call_comes_back_to_its_tool(
    gateway: GatewayProcess, upstream: ChatUpstream, tools: list[JSON]
) -> None:
    body = {"model": "m", "input": "call every tool", "tools": tools}
    upstream.responder = lambda request: ToolCalls(
        [Call(tool["function"]["name"], '{"input": "x"}') for tool in request["tools"]]
    )
    response = httpx.post(gateway.base_url + "/responses", json=body, timeout=30)
    assert response.status_code == 200, response.text

    sent = [tool["function"]["name"] for tool in upstream.chat_requests[0]["tools"]]
    assert all(VALID.fullmatch(name) for name in sent), sent
    assert len(set(sent)) == len(sent) == len(declared(tools)), sent

    calls = [item for item in response.json()["output"] if item["type"].endswith("call")]
    restored = [(call.get("namespace"), call["name"], call["type"]) for call in calls]
    assert sorted(restored, key=str) == sorted(declared(tools), key=str)
