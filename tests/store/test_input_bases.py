"""Records that build on the input of an earlier one (``input_base``), in every store.

A client resending its whole history with ``store`` true has each response's record hold
only the items after the previous request's input; every store gives the whole input
back, keeps what a record builds on for as long as the record, and loses nothing when
one of them is deleted.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.store import InputNotWhole, PreviousResponseNotFound, ResponseStore, StoredResponse
from toolwire.store._base import encode_record

from .conftest import StoreFactory
from .records import exchange, resent, texts

whole: dict[str, list[dict[str, Any]]] = {}
"""The whole input each record of a test's ``session`` was made from, by id."""


async def session(store: ResponseStore, turns: int) -> list[StoredResponse]:
    """``turns`` records of one resending client: the first whole, each next building on
    the one before."""
    first = exchange("resp_1", "q1")
    assert await store.put(first)
    whole.clear()
    whole["resp_1"] = list(first.input_items)
    records = [first]
    for n in range(2, turns + 1):
        record = resent(f"resp_{n}", f"q{n}", on=records[-1], items_before=len(whole[records[-1].id]))
        assert await store.put(record)
        whole[record.id] = [*whole[records[-1].id], *record.input_items]
        records.append(record)
    return records


async def test_a_record_building_on_another_holds_its_new_items_and_lists_the_whole_input(
    store: ResponseStore,
) -> None:
    records = await session(store, 4)
    last = await store.get("resp_4")
    assert last == records[-1] and last.input_base == "resp_3" and len(last.input_items) == 2
    assert texts(await store.input_of(last)) == [
        "user: q1", "assistant: re: q1", "user: q2", "assistant: re: q2", "user: q3", "assistant: re: q3", "user: q4",
    ]  # fmt: skip
    assert await store.input_of(last) == whole["resp_4"]
    assert await store.input_of(records[0]) == list(records[0].input_items)


async def test_continued_by_id_its_conversation_is_its_whole_input_then_its_output(
    store: ResponseStore,
) -> None:
    await session(store, 3)
    await store.put(exchange("resp_by_id", "by id", previous="resp_3"))
    assert await store.chain_ids("resp_by_id") == ("resp_1", "resp_2", "resp_3", "resp_by_id")
    assert texts(await store.chain_input("resp_3")) == [
        "user: q1", "assistant: re: q1", "user: q2", "assistant: re: q2", "user: q3", "assistant: re: q3",
    ]  # fmt: skip
    assert texts(await store.chain_input("resp_by_id"))[-2:] == ["user: by id", "assistant: re: by id"]


async def test_a_record_whose_input_base_is_gone_is_refused_and_nothing_is_written(
    store: ResponseStore,
) -> None:
    first = exchange("resp_1", "q1")
    orphan = resent("resp_2", "q2", on=first, items_before=1)
    assert await store.put(orphan) is False  # never stored
    assert await store.get("resp_2") is None
    assert await store.stored_bytes() == 0
    await store.put(first)
    await store.put(exchange("resp_0", "older"))
    await store.delete("resp_1")
    assert await store.put(orphan) is False  # deleted
    assert await store.get("resp_2") is None


async def test_deleting_a_record_others_build_on_gives_them_its_items_first(store: ResponseStore) -> None:
    await session(store, 4)
    second = await store.get("resp_2")
    assert second is not None
    by_id = exchange("resp_by_id", "by id", previous="resp_2")  # continues resp_2's conversation, not its input
    assert await store.put(by_id)
    retried = resent("resp_3b", "q3 again", on=second, items_before=3)  # a turn retried: two build on resp_2
    assert await store.put(retried)
    assert await store.delete("resp_2") is True
    assert await store.get("resp_2") is None
    third, again = await store.get("resp_3"), await store.get("resp_3b")
    assert third is not None and third.input_base == "resp_1" and len(third.input_items) == 4
    assert again is not None and again.input_base == "resp_1"
    assert await store.input_of(third) == whole["resp_3"]
    assert texts(await store.input_of(again))[-1] == "user: q3 again"
    assert await store.input_of(await store.get("resp_4")) == whole["resp_4"]
    with pytest.raises(PreviousResponseNotFound):  # as for any chain of previous responses
        await store.chain_input("resp_by_id")
    assert await store.delete("resp_1") is True  # the first: the next holds the whole input now
    third = await store.get("resp_3")
    assert third is not None and third.input_base is None and third.input_items == tuple(whole["resp_3"])
    assert await store.input_of(await store.get("resp_4")) == whole["resp_4"]


async def test_deleting_the_newest_leaves_the_rest(store: ResponseStore) -> None:
    await session(store, 3)
    assert await store.delete("resp_3") is True
    assert await store.input_of(await store.get("resp_2")) == whole["resp_2"]


async def test_the_store_counts_the_bytes_of_what_each_record_holds(store: ResponseStore) -> None:
    await session(store, 4)

    async def held(*response_ids: str) -> int:
        records = [await store.get(response_id) for response_id in response_ids]
        return sum(len(encode_record(record)) for record in records if record is not None)

    assert await store.stored_bytes() == await held("resp_1", "resp_2", "resp_3", "resp_4")
    assert await store.delete("resp_2")  # resp_3 grows by resp_2's items
    assert await store.stored_bytes() == await held("resp_1", "resp_3", "resp_4")
    assert await store.delete("resp_1")
    assert await store.stored_bytes() == await held("resp_3", "resp_4")


async def test_the_records_a_record_builds_on_are_evicted_after_it(make_store: StoreFactory) -> None:
    store = make_store(max_entries=3)
    await session(store, 2)  # resp_1, then resp_2 building on it: resp_1 used after resp_2
    await store.put(exchange("resp_x", "x"))
    await store.put(exchange("resp_y", "y"))  # one too many: the least recently used goes
    assert await store.get("resp_2") is None
    first = await store.get("resp_1")
    assert first is not None and await store.input_of(first) == whole["resp_1"]


async def test_a_bound_never_takes_what_the_record_just_written_builds_on(make_store: StoreFactory) -> None:
    store = make_store(max_entries=1)
    await session(store, 3)
    last = await store.get("resp_3")
    assert last is not None and await store.input_of(last) == whole["resp_3"]


async def test_reading_a_whole_input_refreshes_what_it_builds_on(make_store: StoreFactory) -> None:
    store = make_store(max_entries=4)
    await session(store, 2)
    await store.put(exchange("resp_x", "x"))
    await store.put(exchange("resp_y", "y"))
    second = await store.get("resp_2")
    assert second is not None
    await store.input_of(second)  # resp_1 used after resp_x and resp_y now
    await store.put(exchange("resp_z", "z"))  # evicts resp_2, the least recently used
    assert await store.get("resp_x") is not None
    assert await store.get("resp_1") is not None


def test_a_missing_part_of_an_input_says_which_and_is_not_found() -> None:
    gone = InputNotWhole("resp_3", "resp_1")
    assert (gone.status, gone.code, gone.param) == (404, "response_input_not_found", "response_id")
    assert gone.message == (
        "The input of response 'resp_3' is no longer whole: the earlier response 'resp_1' it was "
        "stored with expired or was deleted."
    )
