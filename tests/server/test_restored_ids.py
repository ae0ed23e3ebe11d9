"""Ids a Chat backend gives its tool calls reach the client only when safe and unique.

Backends send call ids of every kind (``call 1``, ``functions.exec:0`` from Kimi, the
same id twice); the client pairs each call with its output by ``call_id`` and may use
ids in URLs and file names, so what it gets must be ``[A-Za-z0-9_-]`` and distinct.
"""

from __future__ import annotations

import re

import httpx
import orjson
import pytest

from tests.support.chat_upstream import Call, ChatUpstream, ToolCalls
from tests.support.gateway import GatewayProcess
from toolwire.protocol import SSEDecoder

SAFE = re.compile(r"[A-Za-z0-9_-]{1,64}")
TOOLS = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(
    "upstream_ids",
    [("call 1/x", "call 2/x"), ("functions.exec_command:0", "functions.exec_command:1"), ("dup", "dup"), ('"q"', "<b>")],
    ids=["spaces-slashes", "kimi-style", "duplicate", "quotes-markup"],
)
def test_each_call_gets_a_safe_distinct_call_id_and_item_id(
    gateway: GatewayProcess, upstream: ChatUpstream, upstream_ids: tuple[str, str], streaming: bool
) -> None:
    upstream.enqueue(ToolCalls([Call("exec_command", '{"cmd": "ls"}', upstream_ids[0]), Call("exec_command", '{"cmd": "pwd"}', upstream_ids[1])]))
    body = {"model": "m", "input": "run two", "tools": TOOLS, "stream": streaming}
    with httpx.stream("POST", gateway.base_url + "/responses", json=body, timeout=30) as response:
        text = response.read().decode()
    assert response.status_code == 200, text
    if streaming:
        [completed] = [orjson.loads(e.data) for e in SSEDecoder().feed(text.encode()) if e.event == "response.completed"]
        output = completed["response"]["output"]
    else:
        output = orjson.loads(text)["output"]
    calls = [item for item in output if item["type"] == "function_call"]
    assert [call["arguments"] for call in calls] == ['{"cmd": "ls"}', '{"cmd": "pwd"}']
    for key in ("call_id", "id"):
        values = [call[key] for call in calls]
        assert all(SAFE.fullmatch(value) for value in values) and len(set(values)) == 2, (key, values)
