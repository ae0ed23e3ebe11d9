"""Stored responses through real gateways: previous_response_id, GET, DELETE, input_items,
and several gateway processes sharing one real Redis (which restarts mid-test)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from pathlib import Path

import httpx
import openai
import pytest

from tests.store.redis_server import RedisServer
from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import GatewayProcess
from toolwire.store import SQLiteResponseStore, StoredResponse


def client_for(gateway: GatewayProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key="test", _strict_response_validation=True, max_retries=0)


def texts(chat_request: dict) -> list[tuple[str, str]]:
    return [(m["role"], m["content"] if isinstance(m["content"], str) else str(m["content"])) for m in chat_request["messages"]]


@pytest.mark.parametrize("stream", [False, True])
def test_previous_response_id_continues_the_stored_conversation(
    gateway: GatewayProcess, upstream: ChatUpstream, stream: bool
) -> None:
    upstream.enqueue(Text("Paris."), Text("About two million."))
    with client_for(gateway) as client:
        if stream:
            with client.responses.stream(model="m", input="Capital of France?") as events:
                first = events.get_final_response()
        else:
            first = client.responses.create(model="m", input="Capital of France?")
        second = client.responses.create(model="m", input="How many people live there?", previous_response_id=first.id)
        assert second.previous_response_id == first.id
        assert second.output_text == "About two million."
    assert texts(upstream.chat_requests[1]) == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
        ("user", "How many people live there?"),
    ]


def test_retrieve_list_input_items_and_delete(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("Hi there."))
    with client_for(gateway) as client:
        created = client.responses.create(model="m", input=[{"role": "user", "content": "hello"}])
        fetched = client.responses.retrieve(created.id)
        assert fetched.id == created.id and fetched.output_text == "Hi there."
        items = client.responses.input_items.list(created.id)
        assert [item.type for item in items.data] == ["message"]
        deleted = httpx.delete(f"{gateway.base_url}/responses/{created.id}").json()
        assert deleted == {"id": created.id, "object": "response", "deleted": True}
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(created.id)
        with pytest.raises(openai.NotFoundError) as caught:
            client.responses.create(model="m", input="again", previous_response_id=created.id)
        assert caught.value.code == "previous_response_not_found"
    assert len(upstream.chat_requests) == 1


def test_store_false_keeps_nothing(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("ephemeral"))
    with client_for(gateway) as client:
        created = client.responses.create(model="m", input="hi", store=False)
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(created.id)


def test_two_continuations_of_one_response_at_once(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("root answer"))
    upstream_answers = {"left": "L", "right": "R"}
    with client_for(gateway) as client:
        root = client.responses.create(model="m", input="root")
        upstream.responder = lambda body: Text(upstream_answers[body["messages"][-1]["content"]])
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            futures = {side: pool.submit(client.responses.create, model="m", input=side, previous_response_id=root.id)
                       for side in upstream_answers}
            children = {side: future.result() for side, future in futures.items()}
        for side, child in children.items():
            assert child.output_text == upstream_answers[side]
            upstream.responder = lambda body: Text("leaf")
            client.responses.create(model="m", input="and then?", previous_response_id=child.id)
            last = upstream.chat_requests[-1]
            assert texts(last) == [
                ("user", "root"), ("assistant", "root answer"), ("user", side),
                ("assistant", upstream_answers[side]), ("user", "and then?"),
            ]


def test_gateways_share_responses_through_redis_and_ride_out_a_restart(
    _session_upstream: ChatUpstream, upstream: ChatUpstream, redis_server: RedisServer, tmp_path: Path
) -> None:
    args = ("--store", redis_server.url)
    with GatewayProcess(upstream.base_url, tmp_path / "a.log", *args) as first, \
         GatewayProcess(upstream.base_url, tmp_path / "b.log", *args) as second:
        upstream.enqueue(Text("one"), Text("two"), Text("three"))
        with client_for(first) as on_first, client_for(second) as on_second:
            created = on_first.responses.create(model="m", input="start")
            continued = on_second.responses.create(model="m", input="go on", previous_response_id=created.id)
            assert continued.output_text == "two"

            redis_server.stop()
            with pytest.raises(openai.APIStatusError) as caught:
                on_second.responses.create(model="m", input="during outage", previous_response_id=continued.id)
            assert caught.value.status_code == 503
            assert "store" in caught.value.message.lower()

            redis_server.start()  # same port, empty: the gateway reconnects by itself
            again = on_first.responses.create(model="m", input="after restart")
            assert again.output_text == "three"
            assert on_second.responses.retrieve(again.id).id == again.id


def test_the_openai_sdk_resending_its_history_has_each_record_hold_its_new_items_only(
    upstream: ChatUpstream, tmp_path: Path
) -> None:
    # The SDK's way when a program keeps the conversation itself: the whole history as the
    # input of every request, store left true. Each record builds on the one before; the
    # SDK lists the whole input all the same.
    path = tmp_path / "responses.sqlite3"
    with GatewayProcess(upstream.base_url, tmp_path / "gateway.log", "--store", f"sqlite://{path}") as gateway, \
            client_for(gateway) as client:  # fmt: skip
        history: list[dict] = [{"role": "user", "content": "Hi."}]
        created = []
        for turn in range(4):
            upstream.enqueue(Text(f"Answer {turn}."))
            created.append(client.responses.create(model="m", input=history))
            history += [item.model_dump(exclude_none=True) for item in created[-1].output]
            history.append({"role": "user", "content": f"Turn {turn + 2}."})
        listed = client.responses.input_items.list(created[-1].id, order="asc", limit=100).data
    assert [(item.role, item.content[0].text) for item in listed if item.type == "message"] == [
        ("user", "Hi."), ("assistant", "Answer 0."), ("user", "Turn 2."), ("assistant", "Answer 1."),
        ("user", "Turn 3."), ("assistant", "Answer 2."), ("user", "Turn 4."),
    ]  # fmt: skip

    async def stored() -> list[StoredResponse | None]:
        store = SQLiteResponseStore(path, ttl_seconds=None, max_entries=None)
        try:
            return [await store.get(response.id) for response in created]
        finally:
            await store.aclose()

    assert [(r.input_base, len(r.input_items)) for r in asyncio.run(stored()) if r is not None] == [
        (None, 1), (created[0].id, 2), (created[1].id, 2), (created[2].id, 2)
    ]
