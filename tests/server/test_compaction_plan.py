"""The pipeline's compaction step with the gateway served in this process: the gateway
compacting for a Chat backend (``/v1/responses/compact``, a ``compaction_trigger``), the
summary opened in later requests, and a Responses backend that compacts by itself.
tests/server/test_compaction*.py run the same through the real gateway process."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV
from tests.support.responses_upstream import ResponsesUpstream, Whole, answer, message
from tests.support.served import chat_config, gateway_client, sse_events
from tests.support.transport import KeptTransport
from toolwire.compaction import COMPACTION_PROMPT, SEALED_PREFIX, SUMMARY_HEADING
from toolwire.config import GatewayConfig
from toolwire.keys import Principal
from toolwire.server import GatewaySettings, build_router
from toolwire.server._pipeline import ExchangePipeline

JSON = dict[str, Any]
TOOLS = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]
HISTORY: list[JSON] = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]},
    {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": '{"cmd":"pytest"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "1 failed: test_parse"},
]
TRIGGER: JSON = {"type": "compaction_trigger"}
SUMMARY = "The user wants test_parse fixed; next: read parse.py."
USAGE = {"prompt_tokens": 4321, "completion_tokens": 55, "total_tokens": 4376}


@pytest.fixture(autouse=True)
def upstream_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UPSTREAM_KEY_ENV, UPSTREAM_KEY)


async def test_the_compact_endpoint_seals_the_models_summary(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text(SUMMARY, usage=USAGE))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        body = {"model": "m", "input": HISTORY, "instructions": "You are a coding agent.", "tools": TOOLS, "stream": True}
        reply = await client.post("/v1/responses/compact", json=body)
    assert reply.status_code == 200, reply.text
    compacted = reply.json()  # whole, though the request said stream
    assert compacted["object"] == "response.compaction" and compacted["id"].startswith("resp_")
    *kept, item = compacted["output"]
    assert [(m["role"], m["content"][0]["text"]) for m in kept] == [("user", "Fix the failing test.")]
    assert item["type"] == "compaction" and item["encrypted_content"].startswith(SEALED_PREFIX)
    assert (compacted["usage"]["input_tokens"], compacted["usage"]["output_tokens"]) == (4321, 55)
    [sent] = upstream.chat_requests
    assert "tools" not in sent and sent.get("stream") is not True
    assert sent["messages"][0] == {"role": "system", "content": "You are a coding agent."}
    assert sent["messages"][-1] == {"role": "user", "content": COMPACTION_PROMPT}


async def test_a_trigger_compacts_and_the_item_opens_in_a_later_request(
    upstream: ChatUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    upstream.enqueue(Text(SUMMARY, usage=USAGE), Text("Reading parse.py."))
    caplog.set_level(logging.INFO, logger="toolwire.exchange")
    async with gateway_client(chat_config(upstream.base_url)) as client:
        streamed = await client.post(
            "/v1/responses", json={"model": "m", "input": [*HISTORY, TRIGGER], "tools": TOOLS, "stream": True, "store": False}
        )
        events = sse_events(streamed.content)
        [item] = events[-1]["response"]["output"]
        later = [HISTORY[0], item, {"type": "message", "role": "user", "content": "Go on."}]
        reply = await client.post("/v1/responses", json={"model": "m", "input": later, "tools": TOOLS, "store": False})
    assert item["type"] == "compaction"
    created = events[0]["response"]
    assert (created["model"], type(created["created_at"])) == ("m", int)
    assert upstream.chat_requests[0]["stream"] is True, "the summary streams as the client asked"
    assert reply.status_code == 200, reply.text
    logged = [orjson.loads(r.getMessage()) for r in caplog.records if r.name == "toolwire.exchange"]
    assert [line["conversions"] for line in logged] == [
        ["compaction summary written by the backend's model"],
        ["compaction items opened into their summaries", "consecutive user messages merged"],
    ]
    [user] = [m for m in upstream.chat_requests[1]["messages"] if m["role"] == "user"]
    assert user["content"] == f"Fix the failing test.\n\n{SUMMARY_HEADING}\n\n{SUMMARY}\n\nGo on."
    assert [tool["function"]["name"] for tool in upstream.chat_requests[1]["tools"]] == ["exec_command"]


async def test_an_input_that_is_only_a_compaction_item_is_opened(upstream: ChatUpstream) -> None:
    """Nothing but the summary to go on (the whole input one compaction item): it is
    opened like any other, never sent upstream sealed."""
    upstream.enqueue(Text(SUMMARY, usage=USAGE), Text("Reading parse.py."))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        compacted = (await client.post("/v1/responses/compact", json={"model": "m", "input": HISTORY})).json()
        item = compacted["output"][-1]
        reply = await client.post("/v1/responses", json={"model": "m", "input": [item], "store": False})
    assert reply.status_code == 200, reply.text
    [user] = [m for m in upstream.chat_requests[1]["messages"] if m["role"] == "user"]
    assert user["content"] == f"{SUMMARY_HEADING}\n\n{SUMMARY}"
    assert SEALED_PREFIX not in orjson.dumps(upstream.chat_requests[1]).decode()


async def test_a_stored_compaction_continues_and_its_spent_trigger_does_not_compact_again(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text(SUMMARY, usage=USAGE), Text("Continuing."))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        first = (await client.post("/v1/responses", json={"model": "m", "input": [*HISTORY, TRIGGER], "tools": TOOLS})).json()
        assert [item["type"] for item in first["output"]] == ["compaction"]
        then = await client.post(
            "/v1/responses", json={"model": "m", "previous_response_id": first["id"], "input": "Go on.", "tools": TOOLS}
        )
    assert then.json()["output"][0]["content"][0]["text"] == "Continuing."
    sent = upstream.chat_requests[1]
    assert "tools" in sent and sent["messages"][0]["content"].endswith("Go on.")
    assert "1 failed" not in orjson.dumps(sent["messages"]).decode()


async def test_an_item_that_cannot_be_opened_names_where_it_is(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text(SUMMARY))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        stored = (await client.post("/v1/responses", json={"model": "m", "input": [*HISTORY, TRIGGER]})).json()
        [item] = stored["output"]
        sealed = item["encrypted_content"]
        altered = {**item, "encrypted_content": sealed[:-6] + ("AAAAAA" if not sealed.endswith("AAAAAA") else "BBBBBB")}
        own = await client.post("/v1/responses", json={"model": "m", "input": [HISTORY[0], altered]})
    assert own.status_code == 400
    assert (own.json()["error"]["param"], own.json()["error"]["code"]) == ("input[1].encrypted_content", "invalid_encrypted_content")
    assert len(upstream.requests) == 1
    # After a stored history, the place is counted in the request's own input.
    upstream.enqueue(Text("Stored."))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        before = (await client.post("/v1/responses", json={"model": "m", "input": HISTORY[0]["content"][0]["text"]})).json()
        continued = await client.post(
            "/v1/responses", json={"model": "m", "previous_response_id": before["id"], "input": ["Go on.", altered][1:]}
        )
    assert continued.status_code == 400
    assert continued.json()["error"]["param"] == "input[0].encrypted_content"


async def test_a_stored_item_whose_key_is_lost_is_named_by_the_id_that_continues_it(
    upstream: ChatUpstream, tmp_path: Path
) -> None:
    store = tmp_path / "toolwire.sqlite3"
    upstream.enqueue(Text(SUMMARY))
    async with gateway_client(chat_config(upstream.base_url, store=f"sqlite:///{store}")) as client:
        first = (await client.post("/v1/responses", json={"model": "m", "input": [*HISTORY, TRIGGER]})).json()
    [key_file] = [path for path in tmp_path.iterdir() if path.name != store.name and path.name.startswith(store.name + ".")]
    key_file.unlink()  # the key beside the store is gone: a new one is made
    async with gateway_client(chat_config(upstream.base_url, store=f"sqlite:///{store}")) as client:
        then = await client.post("/v1/responses", json={"model": "m", "previous_response_id": first["id"], "input": "on"})
    assert then.status_code == 400
    assert (then.json()["error"]["param"], then.json()["error"]["code"]) == ("previous_response_id", "invalid_encrypted_content")


# ---------------------------------------------------------------- a Responses backend that compacts itself


@pytest.fixture
def native(responses_upstream: ResponsesUpstream) -> ResponsesUpstream:
    return responses_upstream


def native_config(native: ResponsesUpstream) -> GatewayConfig:
    return GatewayConfig.model_validate(
        {
            "server": {"store": "memory://"},
            "upstreams": [
                {"name": "native", "kind": "responses", "base_url": native.base_url, "supports_compaction": True,
                 "default": True},
            ],
        }
    )  # fmt: skip


BACKENDS_OWN = {"id": "cmp_native_1", "type": "compaction", "encrypted_content": "gAAAAABnative-opaque-blob"}


async def test_a_trigger_and_the_backends_own_items_pass_through(native: ResponsesUpstream) -> None:
    native.enqueue(answer([message("compacted by the backend")]), answer([message("went on")]))
    async with gateway_client(native_config(native)) as client:
        first = await client.post("/v1/responses", json={"model": "m", "input": [*HISTORY, TRIGGER], "stream": True})
        second = await client.post(
            "/v1/responses", json={"model": "m", "input": [HISTORY[0], BACKENDS_OWN, {"role": "user", "content": "on"}]}
        )
    assert sse_events(first.content)[-1]["type"] == "response.completed" and second.status_code == 200
    sent_first, sent_second = native.bodies
    assert [item["type"] for item in sent_first["input"]][-1] == "compaction_trigger"
    assert sum(item["type"] == "compaction_trigger" for item in sent_first["input"]) == 1
    assert BACKENDS_OWN in sent_second["input"]
    assert "compaction_trigger" not in [item.get("type") for item in sent_second["input"]], "no trigger the client did not send"


async def test_the_compact_endpoint_goes_to_the_backends_own(native: ResponsesUpstream) -> None:
    native.enqueue(Whole({"object": "response.compaction", "id": "theirs", "output": [BACKENDS_OWN], "created_at": 12,
                          "usage": {"input_tokens": 9, "output_tokens": 2, "total_tokens": 11}}),
                   Whole({"object": "response", "created_at": "not a number", "output": "not a list"}))  # fmt: skip
    async with gateway_client(native_config(native)) as client:
        reply = await client.post("/v1/responses/compact", json={"model": "m", "input": HISTORY, "stream": True})
        odd = await client.post("/v1/responses/compact", json={"model": "m", "input": HISTORY})
    compacted = reply.json()
    assert compacted["id"].startswith("resp_") and compacted["id"] != "theirs"
    assert (compacted["object"], compacted["created_at"], compacted["output"]) == ("response.compaction", 12, [BACKENDS_OWN])
    assert compacted["usage"]["input_tokens"] == 9 and compacted["usage"]["input_tokens_details"] == {"cached_tokens": 0, "cache_write_tokens": 0}
    assert native.compact_bodies[0]["model"] == "m" and "stream" not in native.compact_bodies[0]
    assert native.compact_bodies[0]["input"] == HISTORY, "the backend's own compaction gets the input as it is"
    assert native.bodies == []
    weird = odd.json()
    assert weird["object"] == "response.compaction"  # whatever the backend labels it
    assert isinstance(weird["created_at"], int) and weird["output"] == []
    assert weird["usage"]["input_tokens"] == 0


async def test_a_compaction_opens_only_for_the_owner_it_was_made_for(upstream: ChatUpstream) -> None:
    """Sealed for the key owner who asked for it: another owner's request cannot open it."""
    upstream.enqueue(Text(SUMMARY), Text("Going on."))
    pipeline = ExchangePipeline(build_router(chat_config(upstream.base_url)), GatewaySettings())
    alice, bob = Principal("alice-key", "alice"), Principal("bob-key", "bob")
    made, by_bob, by_alice = KeptTransport(), KeptTransport(), KeptTransport()
    try:
        await pipeline.serve(orjson.dumps({"model": "m", "input": [*HISTORY, TRIGGER]}), made, principal=alice)
        [(_, response)] = made.deliveries
        [item] = response["output"]
        later = orjson.dumps({"model": "m", "input": [HISTORY[0], item, {"role": "user", "content": "Go on."}]})
        await pipeline.serve(later, by_bob, principal=bob)
        await pipeline.serve(later, by_alice, principal=alice)
    finally:
        await pipeline.router.aclose()
    [(kind, refused)] = by_bob.deliveries
    assert (kind, refused.status, refused.body["error"]["code"]) == ("error", 400, "invalid_encrypted_content")
    [(kind, answered)] = by_alice.deliveries
    assert (kind, answered["output"][0]["content"][0]["text"]) == ("response", "Going on.")
    assert len(upstream.requests) == 2
