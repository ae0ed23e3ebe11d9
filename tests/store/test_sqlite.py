"""The SQLite store: a file created on first use, private, in WAL mode, bounded on write."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from toolwire.store import SQLiteResponseStore, StoreUnavailable, open_store

from .records import exchange


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
        assert db.execute("SELECT id FROM responses").fetchall() == [("resp_1",)]


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
        assert db.execute("SELECT id FROM responses").fetchall() == [("resp_new",)]


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
