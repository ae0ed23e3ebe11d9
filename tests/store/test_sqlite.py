"""The SQLite store: a file created on first use, private, in WAL mode, bounded on write."""

from __future__ import annotations

import contextlib
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from tests.support.descriptors import open_descriptors_of
from toolwire.store import (
    PreviousResponseNotFound,
    SQLiteResponseStore,
    StoredResponse,
    StoreUnavailable,
    connect_sqlite,
    open_store,
)
from toolwire.store._base import encode_record

from .records import exchange, resent, texts


async def test_the_file_is_created_on_first_use_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "state" / "toolwire" / "responses.sqlite3"
    store = open_store(f"sqlite://{path}", ttl_seconds=60, max_entries=10)
    try:
        assert not path.parent.exists()
        await store.put(exchange("resp_1", "hello"))
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    finally:
        await store.aclose()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT id FROM response_chain").fetchall() == [("resp_1",)]
        assert db.execute("SELECT id FROM response_records").fetchall() == [("resp_1",)]


async def test_expired_rows_are_deleted_on_the_next_write(tmp_path: Path) -> None:
    now = [1000.0]
    store = SQLiteResponseStore(tmp_path / "r.db", ttl_seconds=10, max_entries=None, clock=lambda: now[0])
    try:
        for n in range(5):
            await store.put(exchange(f"resp_{n}", str(n)))
        now[0] += 11
        assert await store.get("resp_0") is None
        await store.put(exchange("resp_new", "new"))
    finally:
        await store.aclose()
    with sqlite3.connect(tmp_path / "r.db") as db:
        assert db.execute("SELECT id FROM response_chain").fetchall() == [("resp_new",)]
        assert db.execute("SELECT id FROM response_records").fetchall() == [("resp_new",)]  # records go too


async def test_what_a_record_builds_on_is_refreshed_by_its_write_as_used_then(tmp_path: Path) -> None:
    # Just after the record, in the eviction order, but at the same time for the time to live.
    now = [1000.0]
    store = SQLiteResponseStore(tmp_path / "r.db", ttl_seconds=10, max_entries=None, clock=lambda: now[0])
    try:
        first = exchange("resp_1", "q1")
        await store.put(first)
        now[0] += 5
        await store.put(resent("resp_2", "q2", on=first, items_before=1))
        now[0] += 9.9
        assert await store.get("resp_1") is not None
        now[0] += 0.2
        assert await store.get("resp_1") is None and await store.get("resp_2") is None
    finally:
        await store.aclose()


async def test_a_file_of_the_layout_before_is_moved_over_and_continued(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    with contextlib.closing(sqlite3.connect(path)) as db, db:  # as a toolwire of 2026-12-02 wrote it
        db.executescript(
            "CREATE TABLE responses (id TEXT PRIMARY KEY, previous_response_id TEXT, used_at REAL NOT NULL, "
            "record BLOB NOT NULL); CREATE INDEX responses_by_use ON responses (used_at);"
        )
        for used_at, (record, previous) in enumerate([(exchange("resp_1", "one"), None),
                                                      (exchange("resp_2", "two", previous="resp_1"), "resp_1")]):
            db.execute("INSERT INTO responses VALUES (?, ?, ?, ?)", (record.id, previous, 1e9 + used_at,
                                                                       encode_record(record)))
    store = SQLiteResponseStore(path, ttl_seconds=None, max_entries=None)
    try:
        assert await store.get("resp_1") == exchange("resp_1", "one")
        assert texts(await store.chain_input("resp_2")) == ["user: one", "assistant: re: one",
                                                              "user: two", "assistant: re: two"]
        assert await store.chain_ids("resp_2") == ("resp_1", "resp_2")
        await store.put(exchange("resp_3", "three", previous="resp_2"))
        assert len(await store.chain_input("resp_3")) == 6
    finally:
        await store.aclose()
    with sqlite3.connect(path) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert tables == {"response_chain", "response_records", "response_bytes"}
        sizes = dict(db.execute("SELECT chain.id, chain.size - length(records.record) FROM response_chain AS chain "
                                "JOIN response_records AS records ON records.id = chain.id"))
        assert sizes == {"resp_1": 0, "resp_2": 0, "resp_3": 0}  # the records moved over are counted
        assert db.execute("SELECT total FROM response_bytes").fetchone() == db.execute(
            "SELECT sum(length(record)) FROM response_records").fetchone()


async def test_a_file_written_before_the_sizes_gets_them_and_counts_what_older_gateways_write(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.db"
    earlier = [exchange("resp_1", "one"), exchange("resp_2", "two", previous="resp_1"), exchange("resp_3", "three")]

    def write_as_before(db: sqlite3.Connection, record: StoredResponse, used_at: float) -> None:
        db.execute("INSERT OR REPLACE INTO response_chain (id, previous_response_id, used_at) VALUES (?, ?, ?)",
                   (record.id, record.previous_response_id, used_at))
        db.execute("INSERT OR REPLACE INTO response_records (id, record) VALUES (?, ?)", (record.id, encode_record(record)))

    with contextlib.closing(sqlite3.connect(path)) as db, db:  # as a toolwire of 2026-12-04 wrote it
        db.executescript(
            "CREATE TABLE response_chain (id TEXT PRIMARY KEY, previous_response_id TEXT, used_at REAL NOT NULL); "
            "CREATE INDEX response_chain_by_use ON response_chain (used_at); "
            "CREATE TABLE response_records (id TEXT PRIMARY KEY, record BLOB NOT NULL);"
        )
        write_as_before(db, earlier[0], 1e9)
        write_as_before(db, earlier[1], 1e9 + 1)
    sizes = [len(encode_record(record)) for record in earlier]
    store = SQLiteResponseStore(path, ttl_seconds=None, max_entries=None, max_bytes=sum(sizes))
    try:
        assert await store.stored_bytes() == sizes[0] + sizes[1]
        assert texts(await store.chain_input("resp_2"))[-1] == "assistant: re: two"
        with contextlib.closing(sqlite3.connect(path)) as db, db:  # a gateway of that time, sharing the file
            write_as_before(db, earlier[2], 1e9 + 2)
        assert await store.stored_bytes() == sizes[0] + sizes[1]  # its row has no size...
    finally:
        await store.aclose()
    store = SQLiteResponseStore(path, ttl_seconds=None, max_entries=None, max_bytes=sum(sizes))
    try:
        assert await store.stored_bytes() == sum(sizes)  # ...until a store opens the file again
        await store.put(exchange("resp_4", "four"))  # over the bound: the least recently used goes
        assert [await store.get(f"resp_{n}") is not None for n in range(1, 5)] == [True, True, False, True]
        assert await store.stored_bytes() == sizes[0] + sizes[1] + len(encode_record(exchange("resp_4", "four")))
    finally:
        await store.aclose()


async def test_a_store_that_cannot_create_its_file_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "not-a-directory").write_text("")
    store = open_store(f"sqlite://{tmp_path}/not-a-directory/r.db", ttl_seconds=60, max_entries=10)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await store.get("resp_1")
        assert caught.value.status == 503
        assert "not-a-directory" in caught.value.message
    finally:
        await store.aclose()


async def test_closing_twice_is_harmless(tmp_path: Path) -> None:
    store = open_store(f"sqlite://{tmp_path}/r.db", ttl_seconds=60, max_entries=10)
    await store.put(exchange("resp_1", "hello"))
    await store.aclose()
    await store.aclose()


async def test_a_failing_file_is_named_with_what_went_wrong(tmp_path: Path) -> None:
    (tmp_path / "not-a-directory").write_text("")
    store = open_store(f"sqlite://{tmp_path}/not-a-directory/r.db", ttl_seconds=60, max_entries=10)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await store.get("resp_1")
    finally:
        await store.aclose()
    parent = tmp_path / "not-a-directory"
    assert caught.value.message == f"The response store {parent}/r.db failed: [Errno 20] Not a directory: '{parent}'."
    (tmp_path / "text.db").write_text("not a database " * 100)
    store = open_store(f"sqlite://{tmp_path}/text.db", ttl_seconds=60, max_entries=10)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await store.get("resp_1")
    finally:
        await store.aclose()
    assert caught.value.message == f"The response store {tmp_path}/text.db failed: file is not a database."
    assert repr(store) == f"SQLiteResponseStore({str(tmp_path / 'text.db')!r})"


async def test_the_eviction_order_is_strict_while_the_clock_stands_still(tmp_path: Path) -> None:
    # Two writes in one tick of a coarse clock, or a continuation in it, still order.
    store = SQLiteResponseStore(tmp_path / "r.db", ttl_seconds=None, max_entries=3, clock=lambda: 1000.0)
    try:
        for name in ("resp_a", "resp_b", "resp_c"):
            await store.put(exchange(name, name))
        await store.chain_input("resp_a")  # resp_a is now the most recently used
        await store.put(exchange("resp_d", "d"))
        assert [await store.get(name) is not None for name in ("resp_a", "resp_b", "resp_c", "resp_d")] == [
            True,
            False,
            True,
            True,
        ]
    finally:
        await store.aclose()


async def test_a_clock_that_goes_back_does_not_reorder_the_eviction(tmp_path: Path) -> None:
    # Processes sharing a file compare their clocks; one that is behind writes "earlier".
    readings = iter([1000.0, 990.0, 995.0, 0.0, 0.0, 0.0])  # three writes, then three reads
    store = SQLiteResponseStore(tmp_path / "r.db", ttl_seconds=None, max_entries=2, clock=lambda: next(readings))
    try:
        for name in ("resp_a", "resp_b", "resp_c"):
            await store.put(exchange(name, name))
        assert [await store.get(name) is not None for name in ("resp_a", "resp_b", "resp_c")] == [False, True, True]
    finally:
        await store.aclose()


def sqlite_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("toolwire-sqlite")]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to list open files (Linux)")
async def test_closing_the_store_closes_its_file_and_stops_its_thread(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    before = set(sqlite_threads())
    store = SQLiteResponseStore(path, ttl_seconds=60, max_entries=10)
    await store.put(exchange("resp_1", "hello"))
    assert open_descriptors_of(path) and len(set(sqlite_threads()) - before) == 1  # named for thread dumps
    await store.aclose()
    assert open_descriptors_of(path) == []
    assert set(sqlite_threads()) - before == set()


def test_a_connection_waits_for_another_writer_and_commits_each_statement(tmp_path: Path) -> None:
    # Gateway processes sharing the file take turns: a write waits up to ten seconds for
    # another's lock instead of failing at once, and a statement outside write_transaction
    # is committed by itself, so no transaction is left open holding the lock.
    path = tmp_path / "r.db"
    db = connect_sqlite(path, "CREATE TABLE IF NOT EXISTS notes (text TEXT);")
    try:
        assert db.execute("PRAGMA busy_timeout").fetchone() == (10_000,)
        db.execute("INSERT INTO notes VALUES ('seen at once')")
        assert not db.in_transaction
        with sqlite3.connect(path) as other:
            assert other.execute("SELECT text FROM notes").fetchall() == [("seen at once",)]
    finally:
        db.close()


async def test_a_chain_whose_record_is_missing_is_not_found_at_that_response(tmp_path: Path) -> None:
    store = SQLiteResponseStore(tmp_path / "r.db", ttl_seconds=None, max_entries=None)
    try:
        await store.put(exchange("resp_1", "one"))
        await store.put(exchange("resp_2", "two", previous="resp_1"))
        with contextlib.closing(sqlite3.connect(tmp_path / "r.db")) as db, db:  # as a damaged file would have it
            db.execute("DELETE FROM response_records WHERE id = 'resp_1'")
        with pytest.raises(PreviousResponseNotFound) as caught:
            await store.chain_input("resp_2")
        assert (caught.value.previous_response_id, caught.value.missing_id) == ("resp_2", "resp_1")
    finally:
        await store.aclose()
