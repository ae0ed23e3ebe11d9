"""Where continued conversations come from: the store, and a WebSocket connection's own memory."""

from __future__ import annotations

import pytest

from toolwire.errors import RequestError
from toolwire.server._history import CONNECTION_RESPONSES_KEPT, ConnectionHistory, StoreHistory
from toolwire.store import MemoryResponseStore, PreviousResponseNotFound, StoredResponse


def record(n: int, previous: str | None = None) -> StoredResponse:
    response = {"id": f"resp_{n}", "created_at": n, "output": [{"type": "message", "role": "assistant",
                                                                "content": [{"type": "output_text", "text": f"answer {n}"}]}]}
    return StoredResponse.from_exchange(response, f"question {n}", previous_response_id=previous)


def texts(items: list[dict[str, object]]) -> list[str]:
    return [str(part["text"]) for item in items for part in item["content"]]  # type: ignore[attr-defined]


async def test_a_connection_continues_its_own_responses_without_the_store() -> None:
    history = ConnectionHistory(StoreHistory(None))
    await history.keep(record(1), before=[], store_requested=False)
    first = await history.conversation("resp_1", None)
    await history.keep(record(2, "resp_1"), before=first, store_requested=False)
    assert texts(await history.conversation("resp_2", None)) == ["question 1", "answer 1", "question 2", "answer 2"]
    with pytest.raises(PreviousResponseNotFound):
        await history.conversation("resp_elsewhere", None)  # no store: not "needs a store", just unknown


async def test_a_connection_keeps_its_newest_responses_and_forgets_a_failed_one() -> None:
    history = ConnectionHistory(StoreHistory(None))
    for n in range(CONNECTION_RESPONSES_KEPT + 1):
        await history.keep(record(n), before=[], store_requested=False)
    with pytest.raises(PreviousResponseNotFound):
        await history.conversation("resp_0", None)  # the oldest went
    await history.conversation("resp_1", None)  # used: now the newest
    await history.keep(record(99), before=[], store_requested=False)
    assert texts(await history.conversation("resp_1", None)) == ["question 1", "answer 1"]
    history.forget("resp_1")
    with pytest.raises(PreviousResponseNotFound):
        await history.conversation("resp_1", None)
    history.forget("resp_1")  # a failed continuation of a response the connection no longer has (or never had:
    history.forget("resp_stored")  # one from the store): nothing to forget, and the connection goes on
    assert texts(await history.conversation("resp_99", None)) == ["question 99", "answer 99"]


async def test_the_store_keeps_only_what_may_be_stored_and_backs_the_connection() -> None:
    store = MemoryResponseStore(ttl_seconds=None, max_entries=None)
    await ConnectionHistory(StoreHistory(store)).keep(record(1), before=[], store_requested=True)
    await ConnectionHistory(StoreHistory(store)).keep(record(2), before=[], store_requested=False)
    assert await store.get("resp_1") is not None and await store.get("resp_2") is None
    another_connection = ConnectionHistory(StoreHistory(store))
    assert texts(await another_connection.conversation("resp_1", None)) == ["question 1", "answer 1"]
    with pytest.raises(PreviousResponseNotFound):
        await another_connection.conversation("resp_2", None)


async def test_without_a_store_http_continuations_say_so() -> None:
    with pytest.raises(RequestError, match="response store"):
        await StoreHistory(None).conversation("resp_1", None)


async def test_a_stored_response_is_continued_by_its_owner_only() -> None:
    store = MemoryResponseStore(ttl_seconds=None, max_entries=None)
    mine = StoredResponse.from_exchange(
        {"id": "resp_7", "created_at": 7, "output": []}, "question 7", owner="key:alice"
    )
    await store.put(mine)
    history = ConnectionHistory(StoreHistory(store))
    assert texts(await history.conversation("resp_7", "key:alice")) == ["question 7"]
    for stranger in ("key:bob", None):
        with pytest.raises(PreviousResponseNotFound):
            await history.conversation("resp_7", stranger)
        with pytest.raises(PreviousResponseNotFound):
            await StoreHistory(store).conversation("resp_7", stranger)
