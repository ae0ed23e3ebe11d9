"""The ``ResponseStore`` contract, run against every store: memory, SQLite and Redis."""

from __future__ import annotations

import asyncio
import time

import pytest

from toolwire.errors import RequestError
from toolwire.store import PreviousResponseNotFound, ResponseStore, StoredResponse
from toolwire.store._base import encode_record

from .conftest import StoreFactory
from .records import exchange, response_object, texts


async def test_put_then_get_returns_an_equal_record(store: ResponseStore) -> None:
    record = exchange("resp_1", "hello")
    await store.put(record)
    assert await store.get("resp_1") == record


async def test_get_of_an_unknown_id_is_none(store: ResponseStore) -> None:
    assert await store.get("resp_never") is None


async def test_delete_forgets_and_reports_whether_there_was_a_record(store: ResponseStore) -> None:
    await store.put(exchange("resp_1", "hello"))
    assert await store.delete("resp_1") is True
    assert await store.get("resp_1") is None
    assert await store.delete("resp_1") is False


async def test_put_of_an_existing_id_replaces_it(store: ResponseStore) -> None:
    await store.put(exchange("resp_1", "first"))
    await store.put(exchange("resp_1", "second"))
    stored = await store.get("resp_1")
    assert stored is not None and stored.input_items[0]["content"][0]["text"] == "second"


async def test_what_a_caller_reads_is_a_copy(store: ResponseStore) -> None:
    await store.put(exchange("resp_1", "hello"))
    first = await store.get("resp_1")
    assert first is not None
    first.response["output"].clear()
    first.input_items[0]["content"] = "changed"
    (await store.chain_input("resp_1"))[0]["content"] = "changed too"
    assert await store.get("resp_1") == exchange("resp_1", "hello")


async def test_unicode_and_a_large_record_survive(store: ResponseStore) -> None:
    big = "héllo 🌍 \u2028 \x00 " * 50_000
    record = StoredResponse.from_exchange(response_object("resp_big", big), [{"role": "user", "content": big}])
    await store.put(record)
    assert await store.get("resp_big") == record


async def test_chain_input_of_one_response_is_its_input_then_its_output(store: ResponseStore) -> None:
    record = exchange("resp_1", "hello")
    await store.put(record)
    items = await store.chain_input("resp_1")
    assert items == [*record.input_items, *record.output_items]
    assert texts(items) == ["user: hello", "assistant: re: hello"]
    assert all(item["id"] for item in items)


async def test_chain_input_walks_the_chain_oldest_first(store: ResponseStore) -> None:
    await store.put(exchange("resp_1", "one"))
    await store.put(exchange("resp_2", "two", previous="resp_1"))
    await store.put(exchange("resp_3", "three", previous="resp_2"))
    assert texts(await store.chain_input("resp_3")) == [
        "user: one", "assistant: re: one",
        "user: two", "assistant: re: two",
        "user: three", "assistant: re: three",
    ]  # fmt: skip
    assert texts(await store.chain_input("resp_2"))[-1] == "assistant: re: two"


async def test_chain_input_of_an_unknown_id_is_previous_response_not_found(store: ResponseStore) -> None:
    with pytest.raises(PreviousResponseNotFound) as caught:
        await store.chain_input("resp_never")
    assert caught.value.status == 404
    assert caught.value.code == "previous_response_not_found"
    assert caught.value.param == "previous_response_id"
    assert caught.value.missing_id == "resp_never"


async def test_a_gap_in_the_chain_is_reported_not_skipped(store: ResponseStore) -> None:
    await store.put(exchange("resp_1", "one"))
    await store.put(exchange("resp_2", "two", previous="resp_1"))
    await store.put(exchange("resp_3", "three", previous="resp_2"))
    await store.delete("resp_2")
    with pytest.raises(PreviousResponseNotFound) as caught:
        await store.chain_input("resp_3")
    assert caught.value.missing_id == "resp_2"
    assert "resp_2" in caught.value.message and "resp_3" in caught.value.message


async def test_chain_ids_names_the_chain_oldest_first_and_checks_it_as_chain_input_does(
    store: ResponseStore,
) -> None:
    await store.put(exchange("resp_1", "one"))
    await store.put(exchange("resp_2", "two", previous="resp_1"))
    await store.put(exchange("resp_3", "three", previous="resp_2"))
    assert await store.chain_ids("resp_3") == ("resp_1", "resp_2", "resp_3")
    assert await store.chain_ids("resp_1") == ("resp_1",)
    with pytest.raises(PreviousResponseNotFound) as never:
        await store.chain_ids("resp_never")
    assert never.value.missing_id == "resp_never"
    await store.delete("resp_2")
    with pytest.raises(PreviousResponseNotFound) as gap:
        await store.chain_ids("resp_3")
    assert gap.value.missing_id == "resp_2"


async def expires(store: ResponseStore, *response_ids: str, within: float = 30) -> bool:
    """Whether every one of ``response_ids`` is gone before ``within`` seconds (a bound
    on the wait, far above the tests' times to live)."""
    async with asyncio.timeout(within):
        while any([await store.get(response_id) is not None for response_id in response_ids]):
            await asyncio.sleep(0.02)
    return True


async def test_a_record_expires_after_its_time_to_live(make_store: StoreFactory) -> None:
    store = make_store(ttl_seconds=0.4)
    await store.put(exchange("resp_1", "hello"))
    assert await store.get("resp_1") is not None
    assert await expires(store, "resp_1")
    with pytest.raises(PreviousResponseNotFound):
        await store.chain_input("resp_1")


async def test_continuing_a_chain_keeps_all_of_it_alive(make_store: StoreFactory) -> None:
    ttl = 1.0
    store = make_store(ttl_seconds=ttl)
    await store.put(exchange("resp_1", "one"))
    await store.put(exchange("resp_2", "two", previous="resp_1"))
    written = time.monotonic()
    while time.monotonic() - written < 1.5 * ttl:  # past the first writes' time to live...
        assert len(await store.chain_input("resp_2")) == 4  # ...read every tenth of it
        await asyncio.sleep(ttl / 10)
    assert await expires(store, "resp_1", "resp_2")  # abandoned: all of it expires


async def test_beyond_max_entries_the_least_recently_used_go(make_store: StoreFactory) -> None:
    store = make_store(max_entries=3)
    for response_id in ("resp_a", "resp_b", "resp_c"):
        await store.put(exchange(response_id, response_id))
    await store.chain_input("resp_a")  # a is used: b is now the least recent
    await store.put(exchange("resp_d", "d"))
    assert await store.get("resp_b") is None
    for kept in ("resp_a", "resp_c", "resp_d"):
        assert await store.get(kept) is not None, kept


async def test_the_store_never_holds_more_than_max_entries(make_store: StoreFactory) -> None:
    store = make_store(max_entries=10, ttl_seconds=None)
    for n in range(100):
        await store.put(exchange(f"resp_{n}", str(n)))
    kept = [n for n in range(100) if await store.get(f"resp_{n}") is not None]
    assert kept == list(range(90, 100))


def size(record: StoredResponse) -> int:
    """What a record weighs against ``max_bytes``: its bytes as stored."""
    return len(encode_record(record))


async def kept(store: ResponseStore, *response_ids: str) -> list[str]:
    """Which of ``response_ids`` the store holds; and it counts their bytes, no more."""
    found = [record for response_id in response_ids if (record := await store.get(response_id)) is not None]
    assert await store.stored_bytes() == sum(size(record) for record in found)  # type: ignore[attr-defined]
    return [record.id for record in found]


async def test_beyond_max_bytes_the_least_recently_used_go(make_store: StoreFactory) -> None:
    records = {name: exchange(name, name) for name in ("resp_a", "resp_b", "resp_c", "resp_d")}
    assert len({size(record) for record in records.values()}) == 1  # all of one size
    store = make_store(max_bytes=3 * size(records["resp_a"]))
    assert await store.stored_bytes() == 0  # type: ignore[attr-defined]
    for name in ("resp_a", "resp_b", "resp_c"):
        await store.put(records[name])
    await store.chain_input("resp_a")  # a is used: b is now the least recent
    await store.put(records["resp_d"])
    assert await kept(store, *records) == ["resp_a", "resp_c", "resp_d"]


async def test_the_store_never_holds_more_than_max_bytes(make_store: StoreFactory) -> None:
    # Records of many sizes: after every write the store holds the newest that fit in
    # the bound together, and none older.
    bound = 4_000
    store = make_store(max_bytes=bound, ttl_seconds=None, max_entries=None)
    written: list[StoredResponse] = []
    for n in range(60):
        record = exchange(f"resp_{n}", "x" * (n * 37 % 700))
        await store.put(record)
        written.append(record)
        newest, total = [], 0
        for earlier in reversed(written):
            total += size(earlier)
            if total > bound:
                break
            newest.append(earlier.id)
        assert await kept(store, *(record.id for record in written)) == newest[::-1], n


async def test_a_single_byte_over_max_bytes_is_over(make_store: StoreFactory) -> None:
    tiny, first, second = exchange("resp_t", "t"), exchange("resp_1", "same"), exchange("resp_2", "same")
    assert size(tiny) < size(first) == size(second)
    store = make_store(max_bytes=size(first) + size(second) - 1)
    await store.put(tiny)
    await store.put(first)
    # One byte over once resp_t is gone too: resp_1 goes as well, and resp_2 stays alone.
    await store.put(second)
    assert await kept(store, "resp_t", "resp_1", "resp_2") == ["resp_2"]
    await store.put(exchange("resp_3", "same"))  # one byte over again, with nothing else to free
    assert await kept(store, "resp_2", "resp_3") == ["resp_3"]


async def test_records_that_expired_unread_are_let_go_by_the_next_write(make_store: StoreFactory) -> None:
    ttl = 0.3
    records = [exchange(f"resp_{n}", "same") for n in range(3)]
    store = make_store(ttl_seconds=ttl, max_bytes=10 * size(records[0]))
    await store.put(records[0])
    await store.put(records[1])
    await asyncio.sleep(3 * ttl)  # expired, and not read since
    await store.put(records[2])
    assert await kept(store, "resp_0", "resp_1", "resp_2") == ["resp_2"]


async def test_a_record_larger_than_max_bytes_is_kept_alone_until_the_next(make_store: StoreFactory) -> None:
    small, large = exchange("resp_small", "hi"), exchange("resp_large", "x" * 5_000)
    store = make_store(max_bytes=size(large) - 1)
    await store.put(small)
    await store.put(large)  # over the bound alone: kept (it was just answered), all else goes
    assert await kept(store, "resp_small", "resp_large") == ["resp_large"]
    await store.put(exchange("resp_next", "next"))
    assert await kept(store, "resp_large", "resp_next") == ["resp_next"]


async def test_a_record_deleted_or_replaced_counts_no_more(make_store: StoreFactory) -> None:
    records = [exchange(f"resp_{n}", "same") for n in range(4)]
    store = make_store(max_bytes=3 * size(records[0]))
    await store.put(records[0])
    await store.put(records[0])  # written twice: counted once
    await store.put(records[1])
    await store.put(records[2])
    assert await kept(store, "resp_0", "resp_1", "resp_2") == ["resp_0", "resp_1", "resp_2"]
    assert await store.delete("resp_1")
    await store.put(records[3])  # in the room resp_1 left
    assert await kept(store, "resp_0", "resp_2", "resp_3") == ["resp_0", "resp_2", "resp_3"]


async def test_expired_records_count_no_more(make_store: StoreFactory) -> None:
    records = [exchange(f"resp_{n}", "same") for n in range(4)]
    store = make_store(ttl_seconds=0.4, max_bytes=2 * size(records[0]))
    await store.put(records[0])
    await store.put(records[1])
    assert await expires(store, "resp_0", "resp_1")
    await store.put(records[2])
    await store.put(records[3])
    assert await kept(store, "resp_2", "resp_3") == ["resp_2", "resp_3"]


async def test_a_record_written_again_after_it_expired_is_kept_and_counted(make_store: StoreFactory) -> None:
    store = make_store(ttl_seconds=0.4, max_bytes=10_000)
    await store.put(exchange("resp_1", "once"))
    assert await expires(store, "resp_1")
    await store.put(exchange("resp_1", "again"))
    assert await kept(store, "resp_1") == ["resp_1"]
    assert texts(await store.chain_input("resp_1")) == ["user: again", "assistant: re: again"]


async def test_a_store_knows_its_bytes_as_of_its_last_write(make_store: StoreFactory) -> None:
    first, second, third = (exchange(f"resp_{n}", "same") for n in range(3))
    store = make_store(max_bytes=2 * size(first))
    assert store.bytes_seen in (None, 0)  # nothing written yet (memory: nothing held)
    await store.put(first)
    assert store.bytes_seen == size(first)
    await store.put(second)
    await store.put(third)  # resp_0 goes
    assert store.bytes_seen == size(second) + size(third) == await store.stored_bytes()  # type: ignore[attr-defined]
    assert await store.delete("resp_1")
    assert store.bytes_seen == size(third)


@pytest.mark.parametrize("store_kind", ["sqlite", "redis"])  # a memory store is one process's own
async def test_gateways_sharing_a_store_share_its_bytes(make_store: StoreFactory) -> None:
    records = [exchange(f"resp_{n}", "same") for n in range(4)]
    bound = 3 * size(records[0])
    gateway_a, gateway_b = make_store(max_bytes=bound), make_store(max_bytes=bound)
    await gateway_a.put(records[0])
    await gateway_b.put(records[1])
    await gateway_a.put(records[2])
    assert await gateway_b.delete("resp_2")
    await gateway_b.put(records[3])
    assert await kept(gateway_a, "resp_0", "resp_1", "resp_3") == ["resp_0", "resp_1", "resp_3"]
    await gateway_a.put(exchange("resp_4", "same"))
    assert await kept(gateway_b, "resp_0", "resp_1", "resp_3", "resp_4") == ["resp_1", "resp_3", "resp_4"]
    assert await gateway_a.delete("resp_4")
    assert gateway_a.bytes_seen == 2 * size(records[0])  # as of its own last write
    assert gateway_b.bytes_seen == bound  # as of its own: it has not seen the other's since


@pytest.mark.parametrize("walk", ["chain_input", "chain_ids"])  # reading the ids refreshes as reading it all
async def test_continuing_a_chain_evicts_its_newest_member_before_its_oldest(make_store: StoreFactory, walk: str) -> None:
    store = make_store(max_entries=3)
    await store.put(exchange("resp_1", "one"))
    await store.put(exchange("resp_2", "two", previous="resp_1"))
    await store.put(exchange("resp_x", "other"))
    await getattr(store, walk)("resp_2")
    await store.put(exchange("resp_y", "another"))
    # resp_x was least recent; then, of the chain, resp_2 goes before resp_1 (whose
    # loss would break every continuation of the conversation).
    assert await store.get("resp_x") is None
    await store.put(exchange("resp_z", "more"))
    assert await store.get("resp_2") is None and await store.get("resp_1") is not None


@pytest.mark.parametrize("walk", ["chain_input", "chain_ids"])
async def test_a_long_chain_walked_is_evicted_newest_first_all_along(make_store: StoreFactory, walk: str) -> None:
    # Long enough that a store refreshing the chain in batches (Redis: 500 members to a
    # command) must carry the order across them.
    length = 1_200
    store = make_store(max_entries=length + 1, ttl_seconds=None)
    for n in range(length):
        await store.put(exchange(f"resp_{n}", str(n), previous=f"resp_{n - 1}" if n else None))
    await store.put(exchange("resp_x", "other"))
    await getattr(store, walk)(f"resp_{length - 1}")  # resp_x is now the least recent
    gone = 502
    for n in range(gone + 1):
        await store.put(exchange(f"resp_new_{n}", "new"))
    assert await store.get("resp_x") is None
    kept = [n for n in range(length) if await store.get(f"resp_{n}") is not None]
    assert kept == list(range(length - gone))


async def test_concurrent_continuations_of_one_response_both_keep_their_chains(make_store: StoreFactory) -> None:
    # Two gateways (two store clients; one store when in memory) continue resp_0 at once.
    first = make_store()
    second = make_store()
    await first.put(exchange("resp_0", "start"))
    await first.put(exchange("resp_1", "next", previous="resp_0"))

    async def continue_from(store: ResponseStore, previous: str, branch: int) -> None:
        history = await store.chain_input(previous)
        assert texts(history)[-1] == "assistant: re: next"
        await store.put(exchange(f"resp_branch_{branch}", f"branch {branch}", previous=previous))

    stores = [first, second] if await second.get("resp_0") is not None else [first, first]
    await asyncio.gather(*(continue_from(stores[n % 2], "resp_1", n) for n in range(20)))
    for n in range(20):
        assert texts(await stores[(n + 1) % 2].chain_input(f"resp_branch_{n}")) == [
            "user: start", "assistant: re: start",
            "user: next", "assistant: re: next",
            f"user: branch {n}", f"assistant: re: branch {n}",
        ]  # fmt: skip
    assert texts(await first.chain_input("resp_1"))[-1] == "assistant: re: next"


@pytest.mark.parametrize("store_kind", ["sqlite", "redis"])  # a memory store is one process's own
async def test_a_response_created_through_one_client_is_continued_through_another(make_store: StoreFactory) -> None:
    gateway_a, gateway_b = make_store(), make_store()
    await gateway_a.put(exchange("resp_1", "one"))
    history = await gateway_b.chain_input("resp_1")
    await gateway_b.put(exchange("resp_2", "two", previous="resp_1"))
    assert texts(await gateway_a.chain_input("resp_2")) == [*texts(history), "user: two", "assistant: re: two"]
    assert await gateway_a.delete("resp_2") and await gateway_b.get("resp_2") is None


@pytest.mark.parametrize("walk", ["chain_input", "chain_ids"])
async def test_a_corrupt_cycle_is_refused_not_walked_forever(store: ResponseStore, walk: str) -> None:
    await store.put(exchange("resp_a", "a", previous="resp_b"))
    await store.put(exchange("resp_b", "b", previous="resp_a"))
    with pytest.raises(RequestError) as caught:
        await getattr(store, walk)("resp_a")
    assert caught.value.code == "previous_response_chain_too_long"
    assert caught.value.message.startswith("The chain of previous responses ending at 'resp_a' is longer than")
