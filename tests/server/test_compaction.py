"""Compaction through the real gateway in front of the scripted Chat upstream: the
backend's model writes the summary, the gateway seals it into one ``compaction`` item,
and later requests that carry the item give the backend the summary in its place.

``POST /v1/responses/compact`` (Codex's V1 and other clients) and a ``compaction_trigger``
item (Codex's V2), streamed and not; stored responses; and every way an item can fail to
open (altered, another provider's), each a 400 that says so.
"""

from __future__ import annotations

from typing import Any, cast

import httpx
import openai
import orjson
import pytest

from tests.support.chat_upstream import ChatUpstream, Cut, HttpError, Text
from tests.support.gateway import GatewayProcess
from toolwire.compaction import COMPACTION_PROMPT, SEALED_PREFIX, SUMMARY_HEADING
from toolwire.protocol import SSEDecoder

JSON = dict[str, Any]

TOOLS = [
    {"type": "function", "name": "exec_command", "description": "Runs a command.", "parameters": {"type": "object"}},
    {"type": "custom", "name": "apply_patch", "description": "Edits files."},
]
HISTORY: list[JSON] = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]},
    {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": '{"cmd":"pytest"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "1 failed: test_parse"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "test_parse fails."}]},
]
TRIGGER: JSON = {"type": "compaction_trigger"}
SUMMARY = "The user wants test_parse fixed; pytest shows it failing; next: read parse.py."
USAGE = {"prompt_tokens": 4321, "completion_tokens": 55, "total_tokens": 4376}


def post(gateway: GatewayProcess, path: str, body: JSON) -> httpx.Response:
    return httpx.post(gateway.base_url + path, json=body, timeout=30)


def stream(gateway: GatewayProcess, body: JSON) -> list[JSON]:
    decoder = SSEDecoder()
    with httpx.stream("POST", gateway.base_url + "/responses", json={**body, "stream": True}, timeout=30) as answer:
        assert answer.status_code == 200, answer.read()
        return [orjson.loads(event.data) for chunk in answer.iter_raw() for event in decoder.feed(chunk)]


def compaction_items(output: list[JSON]) -> list[JSON]:
    return [item for item in output if item["type"] == "compaction"]


def compact_by_trigger(gateway: GatewayProcess, upstream: ChatUpstream, summary: str = SUMMARY, **fields: Any) -> JSON:
    """A streamed ``compaction_trigger`` exchange: its one compaction item."""
    upstream.enqueue(Text(summary, usage=USAGE))
    events = stream(gateway, {"model": "m", "input": [*HISTORY, TRIGGER], "tools": TOOLS, **fields})
    [item] = compaction_items(events[-1]["response"]["output"])
    return item


def messages_sent(upstream: ChatUpstream, index: int = -1) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in upstream.chat_requests[index]["messages"]]


# ---------------------------------------------------------------- POST /v1/responses/compact


def test_compact_endpoint_answers_a_compaction_object(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text(SUMMARY, usage=USAGE))
    answer = post(
        gateway,
        "/responses/compact",
        {"model": "m", "input": HISTORY, "instructions": "You are a coding agent.", "tools": TOOLS, "parallel_tool_calls": True},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["object"] == "response.compaction" and body["id"].startswith("resp_")
    assert isinstance(body["created_at"], int)
    *kept, last = body["output"]
    assert last["type"] == "compaction" and last["id"].startswith("cmp_")
    assert last["encrypted_content"].startswith(SEALED_PREFIX) and SUMMARY not in last["encrypted_content"]
    assert compaction_items(kept) == []
    # The user's own messages stay beside it, in full form with ids.
    assert [(m["role"], m["content"][0]["text"]) for m in kept] == [("user", "Fix the failing test.")]
    assert all(m["id"].startswith("msg_") and m["status"] == "completed" for m in kept)
    assert body["usage"]["input_tokens"] == 4321 and body["usage"]["output_tokens"] == 55
    assert body["usage"]["input_tokens_details"]["cached_tokens"] == 0
    # The backend's model was asked for the summary: the conversation, our prompt, no tools.
    [sent] = upstream.chat_requests
    assert "tools" not in sent and "tool_choice" not in sent and sent.get("stream") is not True
    assert sent["messages"][0] == {"role": "system", "content": "You are a coding agent."}
    assert sent["messages"][-1] == {"role": "user", "content": COMPACTION_PROMPT}
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "tool", "assistant", "user"]


def test_compact_endpoint_needs_a_model(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    answer = post(gateway, "/responses/compact", {"input": HISTORY})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "model" and "model" in error["message"]
    assert upstream.requests == []


def test_compact_endpoint_when_the_backend_fails(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(*[HttpError(500, {"error": {"message": "model crashed"}})] * 2)
    answer = post(gateway, "/responses/compact", {"model": "m", "input": HISTORY})
    assert answer.status_code == 502 and "model crashed" in answer.json()["error"]["message"]
    upstream.enqueue(Text("   "))
    answer = post(gateway, "/responses/compact", {"model": "m", "input": HISTORY})
    assert answer.status_code == 502 and "no summary" in answer.json()["error"]["message"]


# ---------------------------------------------------------------- compaction_trigger


def test_a_trigger_streams_exactly_one_compaction_item(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text(SUMMARY, reasoning="Summarise.", usage=USAGE))
    additional = {"type": "additional_tools", "role": "developer", "tools": [{"type": "function", "name": "extra"}]}
    events = stream(gateway, {"model": "m", "input": [additional, *HISTORY, TRIGGER], "tools": TOOLS})
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    final = events[-1]["response"]
    [item] = final["output"]
    assert item["type"] == "compaction" and item == events[3]["item"]
    assert final["status"] == "completed" and final["usage"]["total_tokens"] == 4376
    assert [tool["name"] for tool in final["tools"]] == ["exec_command", "apply_patch"]  # the client's, echoed
    [sent] = upstream.chat_requests
    assert "tools" not in sent  # none offered: not the top-level ones, nor additional_tools
    assert sent["messages"][-1] == {"role": "user", "content": COMPACTION_PROMPT}
    assert "compaction_trigger" not in orjson.dumps(sent).decode()


def test_a_trigger_not_streamed(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text(SUMMARY, usage=USAGE))
    answer = post(gateway, "/responses", {"model": "m", "input": [*HISTORY, TRIGGER], "tools": TOOLS, "store": False})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["object"] == "response" and body["status"] == "completed"
    assert [item["type"] for item in body["output"]] == ["compaction"]


def test_a_later_request_gives_the_backend_the_summary_in_its_place(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    item = compact_by_trigger(gateway, upstream)
    upstream.enqueue(Text("Reading parse.py now."))
    later = [HISTORY[0], item, {"type": "message", "role": "user", "content": "Go on."}]
    answer = post(gateway, "/responses", {"model": "m", "input": later, "tools": TOOLS, "store": False})
    assert answer.status_code == 200, answer.text
    assert answer.json()["output"][0]["content"][0]["text"] == "Reading parse.py now."
    sent = upstream.chat_requests[-1]
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["exec_command", "apply_patch"]  # a normal turn
    [user] = [m for m in sent["messages"] if m["role"] == "user"]  # the generic preset merges user messages
    assert user["content"] == f"Fix the failing test.\n\n{SUMMARY_HEADING}\n\n{SUMMARY}\n\nGo on."


def test_a_compact_endpoint_item_opens_too(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("Summary by V1."))
    compacted = post(gateway, "/responses/compact", {"model": "m", "input": HISTORY}).json()
    upstream.enqueue(Text("ok"))
    answer = post(gateway, "/responses", {"model": "m", "input": [*compacted["output"], {"role": "user", "content": "next"}]})
    assert answer.status_code == 200, answer.text
    assert "Summary by V1." in orjson.dumps(upstream.chat_requests[-1]["messages"]).decode()


@pytest.mark.parametrize("stream_it", [False, True])
def test_a_backend_failure_fails_the_compaction(gateway: GatewayProcess, upstream: ChatUpstream, stream_it: bool) -> None:
    body = {"model": "m", "input": [*HISTORY, TRIGGER], "store": False}
    upstream.enqueue(Cut(after_chunks=3, reply=Text("The user wants")))
    if not stream_it:
        assert post(gateway, "/responses", body).status_code == 502
        return
    events = stream(gateway, body)
    assert [e["type"] for e in events][-2:] == ["error", "response.failed"]
    assert events[-1]["response"]["output"] == []
    assert not any(e["type"] == "response.output_item.added" for e in events)


def test_a_model_that_writes_no_summary_fails_the_compaction(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text(""))
    events = stream(gateway, {"model": "m", "input": [*HISTORY, TRIGGER], "store": False})
    assert events[-1]["type"] == "response.failed"
    assert "no summary" in events[-1]["response"]["error"]["message"]


# ---------------------------------------------------------------- stored responses


def test_a_stored_compaction_continues_from_its_summary(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    """A compaction stored with its response, continued by previous_response_id: the
    backend sees the user's messages and the summary, not what it summarised, and the
    spent trigger in the stored history does not compact again."""
    upstream.enqueue(Text(SUMMARY, usage=USAGE))
    events = stream(gateway, {"model": "m", "input": [*HISTORY, TRIGGER], "tools": TOOLS})
    first_id = events[-1]["response"]["id"]
    fetched = httpx.get(f"{gateway.base_url}/responses/{first_id}", timeout=30).json()
    assert [i["type"] for i in fetched["output"]] == ["compaction"] and fetched["status"] == "completed"
    upstream.enqueue(Text("Continuing."))
    answer = post(gateway, "/responses", {"model": "m", "previous_response_id": first_id, "input": "Go on.", "tools": TOOLS})
    assert answer.status_code == 200, answer.text
    assert answer.json()["output"][0]["content"][0]["text"] == "Continuing."
    sent = upstream.chat_requests[-1]
    assert "tools" in sent  # an ordinary turn, not another compaction
    assert [m["role"] for m in sent["messages"]] == ["user"]
    assert sent["messages"][0]["content"].startswith("Fix the failing test.\n\n" + SUMMARY_HEADING)
    assert sent["messages"][0]["content"].endswith("Go on.")
    assert "1 failed" not in orjson.dumps(sent["messages"]).decode()  # the call it summarised is left out


# ---------------------------------------------------------------- items that cannot be opened


def refused(gateway: GatewayProcess, upstream: ChatUpstream, item: JSON) -> JSON:
    before = len(upstream.requests)
    answer = post(gateway, "/responses", {"model": "m", "input": [HISTORY[0], item, {"role": "user", "content": "next"}]})
    assert answer.status_code == 400, answer.text
    assert len(upstream.requests) == before  # nothing reached the backend
    error: JSON = answer.json()["error"]
    assert error["param"] == "input[1].encrypted_content" and error["code"] == "invalid_encrypted_content"
    return error


def test_an_altered_compaction_is_a_400(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    item = compact_by_trigger(gateway, upstream)
    sealed = item["encrypted_content"]
    middle = len(sealed) // 2
    altered = sealed[:middle] + ("A" if sealed[middle] != "A" else "B") + sealed[middle + 1 :]
    error = refused(gateway, upstream, {**item, "encrypted_content": altered})
    assert "altered" in error["message"]


def test_another_providers_compaction_is_a_400(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    foreign = {"type": "compaction", "id": "cmp_openai", "encrypted_content": "gAAAAABpM0Yj-Zx8v1Q2" + "q" * 120}
    error = refused(gateway, upstream, foreign)
    assert "not made by toolwire" in error["message"] and "another provider" in error["message"]
    error = refused(gateway, upstream, {**foreign, "type": "compaction_summary"})  # Codex's alias
    assert "another provider" in error["message"]


# ---------------------------------------------------------------- the openai SDK, strict


def test_the_openai_sdk_reads_compactions(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    """The SDK in strict mode reads a compaction streamed for a trigger, and sends the item
    back. Its ``CompactedResponse`` (3.51.0) cannot hold the user messages a compaction
    object keeps (its output items are output items: an assistant's messages only), as the
    Responses API's own answer has them, so ``responses.compact`` is read unvalidated."""
    upstream.enqueue(Text(SUMMARY, usage=USAGE), Text(SUMMARY, usage=USAGE), Text("Going on."))
    options: Any = {"base_url": gateway.base_url, "api_key": "x", "max_retries": 0}
    with openai.OpenAI(**options) as loose:
        compacted = loose.responses.compact(model="gpt-5.4", input=cast(Any, HISTORY), safety_identifier="user-7")
        assert compacted.object == "response.compaction" and compacted.usage.input_tokens == 4321
        assert compacted.safety_identifier == "user-7" and compacted.service_tier is None
        assert compacted.output[-1].type == "compaction"
    with openai.OpenAI(**options, _strict_response_validation=True) as client:
        trigger: Any = [*HISTORY, TRIGGER]
        with client.responses.stream(model="m", input=trigger, tools=cast(Any, TOOLS)) as events:
            final = events.get_final_response()
        [item] = final.output
        assert item.type == "compaction"
        later: Any = [item.model_dump(exclude_none=True), {"role": "user", "content": "Go on."}]
        assert client.responses.create(model="m", input=later).output_text == "Going on."
