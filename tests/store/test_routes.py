"""``stored_routes``: the stored-response endpoints on a tiny app over a store, called
through real HTTP clients (httpx, and the openai SDK in strict validation mode)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest
from starlette.applications import Starlette

from toolwire.server._stored import PageQuery, page_of, stored_routes
from toolwire.store import (
    ItemDict,
    MemoryResponseStore,
    SQLiteResponseStore,
    StoredResponse,
    StoreUnavailable,
)

from .records import exchange, resent, response_object

ITEMS = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"item {n}"}], "id": f"msg_{n}"}
    for n in range(5)
]


@pytest.fixture
async def store() -> AsyncIterator[MemoryResponseStore]:
    store = MemoryResponseStore(ttl_seconds=60, max_entries=100)
    await store.put(StoredResponse.from_exchange(response_object("resp_many", "answer"), ITEMS))
    await store.put(StoredResponse.from_exchange(response_object("resp_long", "answer"), [{"role": "user", "content": str(n)} for n in range(25)]))
    await store.put(exchange("resp_1", "hello"))
    yield store
    await store.aclose()


@pytest.fixture
async def client(store: MemoryResponseStore) -> AsyncIterator[httpx.AsyncClient]:
    app = Starlette(routes=stored_routes(store))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
        yield client


class DownStore:
    """A store whose server is gone."""

    async def put(self, record: StoredResponse) -> None:
        raise StoreUnavailable("The response store redis://cache:6379/0 is unreachable.")

    async def get(self, response_id: str) -> StoredResponse | None:
        raise StoreUnavailable("The response store redis://cache:6379/0 is unreachable.")

    async def delete(self, response_id: str) -> bool:
        raise StoreUnavailable("The response store redis://cache:6379/0 is unreachable.")

    async def chain_input(self, previous_response_id: str) -> list[ItemDict]:
        raise StoreUnavailable("The response store redis://cache:6379/0 is unreachable.")

    async def aclose(self) -> None:
        pass


def ids(page: dict[str, Any]) -> list[str]:
    return [item["id"] for item in page["data"]]


async def test_get_returns_the_stored_response_object(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/responses/resp_1")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    stored = response_object("resp_1", "re: hello")
    body = response.json()
    assert {key: body[key] for key in stored} == stored


async def test_get_makes_an_older_record_whole(client: httpx.AsyncClient) -> None:
    """A record stored without the fields the specification requires gets them, as
    defaults, numbers where numbers are required."""
    body = (await client.get("/v1/responses/resp_1")).json()
    assert (body["temperature"], body["top_p"], body["presence_penalty"], body["frequency_penalty"]) == (1.0, 1.0, 0.0, 0.0)
    assert (body["top_logprobs"], body["background"], body["service_tier"]) == (0, False, "default")
    assert body["tools"] == [] and body["text"] == {"format": {"type": "text"}} and body["error"] is None


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/responses/resp_nope"),
        ("DELETE", "/v1/responses/resp_nope"),
        ("GET", "/v1/responses/resp_nope/input_items"),
    ],
)
async def test_an_unknown_id_is_an_openai_shaped_404(client: httpx.AsyncClient, method: str, path: str) -> None:
    response = await client.request(method, path)
    assert response.status_code == 404
    assert response.json() == {
        "error": {
            "message": "Response with id 'resp_nope' not found.",
            "type": "not_found_error",
            "param": "response_id",
            "code": "response_not_found",
        }
    }


async def test_delete_answers_deleted_and_forgets(client: httpx.AsyncClient) -> None:
    response = await client.delete("/v1/responses/resp_1")
    assert response.status_code == 200
    assert response.json() == {"id": "resp_1", "object": "response", "deleted": True}
    assert (await client.get("/v1/responses/resp_1")).status_code == 404
    assert (await client.delete("/v1/responses/resp_1")).status_code == 404


async def test_input_items_default_to_the_newest_twenty_first(client: httpx.AsyncClient) -> None:
    page = (await client.get("/v1/responses/resp_long/input_items")).json()
    texts = [item["content"][0]["text"] for item in page["data"]]
    assert texts == [str(n) for n in range(24, 4, -1)]
    assert page["has_more"] is True
    assert page["first_id"] == page["data"][0]["id"] and page["last_id"] == page["data"][-1]["id"]
    page = (await client.get("/v1/responses/resp_many/input_items")).json()
    assert page == {
        "object": "list",
        "data": ITEMS[::-1],
        "first_id": "msg_4",
        "last_id": "msg_0",
        "has_more": False,
    }


async def test_input_items_page_forward_with_after(client: httpx.AsyncClient) -> None:
    seen: list[str] = []
    after: str | None = None
    while True:
        params = {"limit": "2", "order": "asc", **({"after": after} if after else {})}
        page = (await client.get("/v1/responses/resp_many/input_items", params=params)).json()
        seen += ids(page)
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert seen == ["msg_0", "msg_1", "msg_2", "msg_3", "msg_4"]


async def test_input_items_page_backward_with_before(client: httpx.AsyncClient) -> None:
    params = {"limit": "2", "order": "asc", "before": "msg_4"}
    page = (await client.get("/v1/responses/resp_many/input_items", params=params)).json()
    assert ids(page) == ["msg_2", "msg_3"] and page["has_more"] is True
    page = (await client.get("/v1/responses/resp_many/input_items", params={**params, "before": "msg_2"})).json()
    assert ids(page) == ["msg_0", "msg_1"] and page["has_more"] is False


@pytest.mark.parametrize(
    ("query", "expected_ids", "has_more"),
    [
        (PageQuery(), ["msg_4", "msg_3", "msg_2", "msg_1", "msg_0"], False),
        (PageQuery(limit=2), ["msg_4", "msg_3"], True),
        (PageQuery(limit=2, after="msg_3"), ["msg_2", "msg_1"], True),
        (PageQuery(limit=2, after="msg_1"), ["msg_0"], False),
        (PageQuery(limit=2, after="msg_0"), [], False),
        (PageQuery(limit=5, order="asc"), ["msg_0", "msg_1", "msg_2", "msg_3", "msg_4"], False),
        (PageQuery(limit=4, order="asc"), ["msg_0", "msg_1", "msg_2", "msg_3"], True),
        (PageQuery(limit=2, before="msg_1"), ["msg_3", "msg_2"], True),
        (PageQuery(limit=2, before="msg_4"), [], False),
        (PageQuery(limit=1, order="asc", before="msg_3"), ["msg_2"], True),
        (PageQuery(limit=10, after="msg_4", before="msg_1"), ["msg_3", "msg_2"], False),
        (PageQuery(limit=1, after="msg_4", before="msg_1"), ["msg_3"], True),
    ],
)
def test_page_of(query: PageQuery, expected_ids: list[str], has_more: bool) -> None:
    page = page_of(ITEMS, query)
    assert ids(page) == expected_ids
    assert page["has_more"] is has_more
    assert page["first_id"] == (expected_ids[0] if expected_ids else None)
    assert page["last_id"] == (expected_ids[-1] if expected_ids else None)


LIMIT_MESSAGE = "Invalid 'limit': {!r}; expected an integer from 1 to 100."


@pytest.mark.parametrize(
    ("params", "param", "message"),
    [
        ({"limit": "0"}, "limit", LIMIT_MESSAGE.format("0")),
        ({"limit": "101"}, "limit", LIMIT_MESSAGE.format("101")),
        ({"limit": "ten"}, "limit", LIMIT_MESSAGE.format("ten")),
        ({"order": "newest"}, "order", "Invalid 'order': 'newest'; expected 'asc' or 'desc'."),
        ({"after": "msg_unknown"}, "after", "Invalid 'after': no input item with id 'msg_unknown' in this response."),
        ({"before": "msg_unknown"}, "before", "Invalid 'before': no input item with id 'msg_unknown' in this response."),
    ],
)
async def test_bad_paging_parameters_are_a_400_naming_them(
    client: httpx.AsyncClient, params: dict[str, str], param: str, message: str
) -> None:
    response = await client.get("/v1/responses/resp_many/input_items", params=params)
    assert response.status_code == 400
    assert response.json() == {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": "invalid_value"}
    }


@pytest.mark.parametrize(("limit", "count"), [("1", 1), ("100", 25)])
async def test_the_limit_takes_1_to_100(client: httpx.AsyncClient, limit: str, count: int) -> None:
    response = await client.get("/v1/responses/resp_long/input_items", params={"limit": limit})
    assert response.status_code == 200 and len(response.json()["data"]) == count


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/responses/r"), ("DELETE", "/v1/responses/r"),
                                              ("GET", "/v1/responses/r/input_items")])  # fmt: skip
async def test_an_unreachable_store_is_a_503(method: str, path: str) -> None:
    app = Starlette(routes=stored_routes(DownStore()))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
        response = await client.request(method, path)
    assert response.status_code == 503
    assert response.json()["error"] == {
        "message": "The response store redis://cache:6379/0 is unreachable.",
        "type": "service_unavailable",
        "param": None,
        "code": "store_unavailable",
    }


async def test_the_openai_sdk_reads_pages_and_deletes(store: MemoryResponseStore) -> None:
    app = Starlette(routes=stored_routes(store))
    http_client = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app))
    sdk = openai.AsyncOpenAI(
        base_url="http://gateway/v1", api_key="unused", http_client=http_client, _strict_response_validation=True
    )
    async with sdk:
        listed = [item.id async for item in sdk.responses.input_items.list("resp_many", limit=2, order="asc")]
        assert listed == ["msg_0", "msg_1", "msg_2", "msg_3", "msg_4"]
        [item] = (await sdk.responses.input_items.list("resp_1")).data
        assert item.type == "message" and item.role == "user"
        await sdk.responses.delete("resp_1")
        with pytest.raises(openai.NotFoundError):
            await sdk.responses.input_items.list("resp_1")


async def test_a_record_building_on_another_lists_its_whole_input_and_pages_across_both(tmp_path: Path) -> None:
    store = SQLiteResponseStore(tmp_path / "responses.sqlite3", ttl_seconds=60, max_entries=100)
    first = StoredResponse.from_exchange(response_object("resp_a", "answer"), ITEMS[:3])
    await store.put(first)
    await store.put(resent("resp_b", "and then?", on=first, items_before=3))
    app = Starlette(routes=stored_routes(store))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
        page = (await client.get("/v1/responses/resp_b/input_items", params={"order": "asc", "limit": 2})).json()
        rest = await client.get("/v1/responses/resp_b/input_items", params={"order": "asc", "after": page["last_id"]})
        assert [item["id"] for item in page["data"]] == ["msg_0", "msg_1"] and page["has_more"]
        assert [item["role"] for item in rest.json()["data"]] == ["user", "assistant", "user"]
        assert rest.json()["data"][-1]["content"] == [{"type": "input_text", "text": "and then?"}]
        # Another process (or a crash) took the record it builds on from under it:
        with contextlib.closing(sqlite3.connect(tmp_path / "responses.sqlite3")) as db, db:
            db.execute("DELETE FROM response_chain WHERE id = 'resp_a'")
        broken = await client.get("/v1/responses/resp_b/input_items")
        retrieved = await client.get("/v1/responses/resp_b")
    await store.aclose()
    assert broken.status_code == 404
    assert broken.json()["error"] == {
        "message": "The input of response 'resp_b' is no longer whole: the earlier response 'resp_a' it was "
        "stored with expired or was deleted.",
        "type": "not_found_error",
        "param": "response_id",
        "code": "response_input_not_found",
    }
    assert retrieved.status_code == 200  # the response itself is whole
