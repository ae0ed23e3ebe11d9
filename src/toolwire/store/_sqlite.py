"""``SQLiteResponseStore``: responses in one SQLite file, shared by processes on one host.

Two tables, in WAL mode, so readers never wait for the writer and several gateway
processes may share the file: ``response_chain(id, previous_response_id, used_at, size)``,
small rows, and ``response_records(id, record)``, the records (``size`` is the record's
length in bytes). ``used_at`` (wall-clock seconds) drives every limit: a response older
than the time to live is expired (ignored by reads, deleted on the next write), and beyond
``max_entries``, or ``max_bytes`` of records in all, the least recently used are deleted on
write (the one just written stays, whatever its size). A write or a continuation sets
``used_at``, so a conversation still in use keeps its beginning. A continuation refreshes
every response of its chain, so those rows are kept apart from the records: refreshing 800
of them rewrites a few pages, not the 800 records (about 3 MB into the write-ahead log per
turn when they shared a row). The bytes of all the records are counted in
``response_bytes(total)``, by triggers on the chain's rows, so that every writer of the file
keeps the count, and a write over the bound finds that out without summing the rows.

A file written before that layout (one table, ``responses``, whose rows held the records)
is moved over when the store first opens it. Gateways sharing a file must then all be of
this layout: an older one no longer finds its table and answers 503. A file written before
the sizes were kept gets its ``size`` column, filled from the records; a gateway of that
time may go on sharing the file, but what it writes counts against the bound only once a
newer store opens the file again.

The column ``previous_response_id`` holds a record's link (``StoredResponse.link``): its
previous response, or the record its input builds on, which is what a walk follows.
Deleting a record finds those building on it by reading every chain row (deletions are
rare; an index would cost every write). A gateway older than those records (2026-12-04)
sharing the file would list only the new items of one building on another.

Every call runs on the store's ``SQLiteFile`` (one worker thread owning one connection).
The file and its directory are created on first use, readable by the owner only
(responses hold conversations).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ._base import (
    MAX_CHAIN_LENGTH,
    PreviousResponseNotFound,
    check_chain_length,
    decode_record,
    spliced_encoded,
)
from ._encoded import EncodedStore
from ._sqlite_file import SQLiteFile, write_transaction

_SCHEMA = """
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS response_chain (
    id TEXT PRIMARY KEY,
    previous_response_id TEXT,
    used_at REAL NOT NULL,
    size INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS response_chain_by_use ON response_chain (used_at);
CREATE TABLE IF NOT EXISTS response_records (
    id TEXT PRIMARY KEY,
    record BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    previous_response_id TEXT,
    used_at REAL NOT NULL,
    record BLOB NOT NULL
);
INSERT OR IGNORE INTO response_chain (id, previous_response_id, used_at)
    SELECT id, previous_response_id, used_at FROM responses;
INSERT OR IGNORE INTO response_records (id, record) SELECT id, record FROM responses;
DROP TABLE responses;
COMMIT;
"""
"""The layout, and the move from the one before (``responses``: empty in a new file);
``_count_bytes`` then adds what a script cannot."""

_COUNTING = (
    "CREATE TABLE IF NOT EXISTS response_bytes (total INTEGER NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS response_bytes_added AFTER INSERT ON response_chain "
    "BEGIN UPDATE response_bytes SET total = total + new.size; END",
    "CREATE TRIGGER IF NOT EXISTS response_bytes_removed AFTER DELETE ON response_chain "
    "BEGIN UPDATE response_bytes SET total = total - old.size; END",
    "CREATE TRIGGER IF NOT EXISTS response_bytes_resized AFTER UPDATE OF size ON response_chain "
    "BEGIN UPDATE response_bytes SET total = total - old.size + new.size; END",
)
"""The count of the records' bytes, kept by every write of a chain row: an insert, a
delete, or an upsert's update (``INSERT OR REPLACE`` would delete without telling the
triggers, which is why writes here never use it)."""

# The chain from a response back to its first ancestor, one row per response, newest
# first. It stops at a gap (an ancestor that is gone or expired): the oldest row found
# then still names a previous response, which is how a gap is told from a chain's start.
_CHAIN_IDS = """
WITH RECURSIVE chain (depth, id, previous_response_id) AS (
    SELECT 0, id, previous_response_id FROM response_chain WHERE id = :id AND used_at > :oldest
    UNION ALL
    SELECT chain.depth + 1, r.id, r.previous_response_id
    FROM chain JOIN response_chain AS r ON r.id = chain.previous_response_id
    WHERE r.used_at > :oldest AND chain.depth < :limit
)
SELECT chain.id, chain.previous_response_id FROM chain ORDER BY depth
"""
_CHAIN = _CHAIN_IDS.replace(
    "SELECT chain.id, chain.previous_response_id FROM chain ORDER BY depth",
    "SELECT chain.id, chain.previous_response_id, records.record FROM chain "
    "LEFT JOIN response_records AS records ON records.id = chain.id ORDER BY depth",
)
"""The same walk with each response's record (``chain_input``)."""


REFRESH_IN_ONE_STATEMENT = sqlite3.sqlite_version_info >= (3, 38, 0)
"""``UPDATE ... FROM`` came with SQLite 3.33, and ``json_each`` is built in from 3.38: older
libraries (RHEL 8's 3.26, which Python 3.11 there links) refresh a chain row by row."""

_BEYOND_THE_BOUND = (
    "SELECT id FROM response_chain WHERE used_at < ? ORDER BY used_at "
    "LIMIT max(0, (SELECT count(*) FROM response_chain) - ?)"
)
"""The least recently used responses beyond ``max_entries`` (its second parameter), found
from the oldest end (``count(*)`` reads the chain's pages, where an ``OFFSET`` from the
newest end walked every row of a full store on every write), but none used at or after its
first (the record just written, and the records it builds on, refreshed after it)."""

_OLDEST_FIRST = "SELECT id, size FROM response_chain WHERE used_at < ? ORDER BY used_at"
"""Every response used before its one parameter (the record just written: so neither it nor
what it builds on), least recently used first, with its record's bytes: read only as far as
the bytes over ``max_bytes`` take."""


class SQLiteResponseStore(EncodedStore):
    """A ``ResponseStore`` in the SQLite file at ``path`` (created on first use).

    ``clock`` (seconds since the epoch) is injectable for tests; processes sharing a
    file compare their clocks' readings, so it must be the wall clock in production.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ttl_seconds: float | None,
        max_entries: int | None,
        max_bytes: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._clock = clock
        self._file = SQLiteFile(self.path, _SCHEMA, what="response store", prepare=_count_bytes)

    def __repr__(self) -> str:
        return f"SQLiteResponseStore({str(self.path)!r})"

    async def _put_encoded(self, response_id: str, link: str | None, data: bytes, *, builds_on: bool) -> bool:
        def put(db: sqlite3.Connection) -> bool:
            with write_transaction(db):
                now = self._now(db)
                base_chain: list[str] = []
                if builds_on and link is not None:
                    try:
                        base_chain = [row[0] for row in self._walk(db, link, now, records=False)]
                    except PreviousResponseNotFound:
                        return False
                db.execute(
                    "INSERT INTO response_chain (id, previous_response_id, used_at, size) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (id) DO UPDATE SET previous_response_id = excluded.previous_response_id, "
                    "used_at = excluded.used_at, size = excluded.size",
                    (response_id, link, now, len(data)),
                )
                db.execute("INSERT OR REPLACE INTO response_records (id, record) VALUES (?, ?)", (response_id, data))
                if base_chain:
                    _refresh(base_chain, now + 1e-6, db)  # after the record: evicted after it
                if self.ttl_seconds is not None:
                    _delete(db, "SELECT id FROM response_chain WHERE used_at <= ?", (now - self.ttl_seconds,))
                if self.max_entries is not None:
                    _delete(db, _BEYOND_THE_BOUND, (now, self.max_entries))
                if self.max_bytes is not None:
                    _free_bytes(db, stored_bytes(db) - self.max_bytes, used_before=now)
                self._bytes_seen = stored_bytes(db)
                return True

        return await self._file.run(put)

    async def _get_encoded(self, response_id: str) -> bytes | None:
        def get(db: sqlite3.Connection) -> bytes | None:
            row = db.execute(
                "SELECT records.record FROM response_chain AS chain JOIN response_records AS records "
                "ON records.id = chain.id WHERE chain.id = ? AND chain.used_at > ?",
                (response_id, self._oldest_live(self._clock())),
            ).fetchone()
            return None if row is None else bytes(row[0])

        return await self._file.run(get)

    async def delete(self, response_id: str) -> bool:
        def delete(db: sqlite3.Connection) -> bool:
            with write_transaction(db):
                _splice_into_later(db, response_id)
                db.execute("DELETE FROM response_records WHERE id = ?", (response_id,))
                deleted = db.execute("DELETE FROM response_chain WHERE id = ?", (response_id,)).rowcount > 0
                self._bytes_seen = stored_bytes(db)
                return deleted

        return await self._file.run(delete)

    async def _chain_encoded(self, previous_response_id: str, *, records: bool = True) -> list[Any]:
        def chain(db: sqlite3.Connection) -> list[Any]:
            with write_transaction(db):
                now = self._now(db)
                rows = self._walk(db, previous_response_id, now, records=records)
                ids = [row[0] for row in rows]
                _refresh(ids, now, db)
                return [bytes(row[2]) for row in rows] if records else ids

        return await self._file.run(chain)

    def _walk(self, db: sqlite3.Connection, response_id: str, now: float, *, records: bool) -> list[Any]:
        """The rows of the chain ending at ``response_id``, newest first: (id, link), and
        its record with ``records``; ``PreviousResponseNotFound`` names a gap."""
        rows = db.execute(
            _CHAIN if records else _CHAIN_IDS,
            {"id": response_id, "oldest": self._oldest_live(now), "limit": MAX_CHAIN_LENGTH},
        ).fetchall()
        if not rows:
            raise PreviousResponseNotFound(response_id)
        check_chain_length(response_id, len(rows))
        oldest_gone = rows[-1][1]
        if oldest_gone is not None:
            raise PreviousResponseNotFound(response_id, oldest_gone)
        if records and (lost := next((row[0] for row in rows if row[2] is None), None)) is not None:
            raise PreviousResponseNotFound(response_id, lost)  # written half by a crash
        return rows

    async def stored_bytes(self) -> int:
        """The bytes of the records in the file, as its count keeps them."""
        return await self._file.run(stored_bytes)

    async def aclose(self) -> None:
        await self._file.aclose()

    def _now(self, db: sqlite3.Connection) -> float:
        """The clock, but never before the latest use: the eviction order is strict."""
        latest = db.execute("SELECT max(used_at) FROM response_chain").fetchone()[0]
        now = self._clock()
        return now if latest is None or now > latest else latest + 1e-6

    def _oldest_live(self, now: float) -> float:
        return now - self.ttl_seconds if self.ttl_seconds is not None else float("-inf")


def stored_bytes(db: sqlite3.Connection) -> int:
    """The bytes of every record in the file (``response_bytes``)."""
    total: int = db.execute("SELECT total FROM response_bytes").fetchone()[0]
    return total


def _count_bytes(db: sqlite3.Connection) -> None:
    """Count the records' bytes in a file that does not yet: the ``size`` column, the
    triggers and the total; then size the rows that have none (moved from an older layout,
    or written by a gateway of that time). In one write transaction, so that processes
    opening the file at once do it once."""
    with write_transaction(db):
        if "size" not in {row[1] for row in db.execute("PRAGMA table_info(response_chain)")}:
            db.execute("ALTER TABLE response_chain ADD COLUMN size INTEGER NOT NULL DEFAULT 0")
        for statement in _COUNTING:
            db.execute(statement)
        if db.execute("SELECT count(*) FROM response_bytes").fetchone()[0] == 0:
            db.execute("INSERT INTO response_bytes (total) SELECT coalesce(sum(size), 0) FROM response_chain")
        db.execute(
            "UPDATE response_chain SET size = coalesce((SELECT length(record) FROM response_records "
            "WHERE response_records.id = response_chain.id), 0) WHERE size = 0"
        )


def _refresh(newest_first: list[str], now: float, db: sqlite3.Connection) -> None:
    """Mark a chain's responses used: the newest at ``now``, each older one a microsecond
    later, so that the oldest, without which the chain is broken, is evicted last."""
    if REFRESH_IN_ONE_STATEMENT:
        # The ids as a JSON array (text: SQLite 3.45+ reads a BLOB as JSONB): 800 responses
        # refreshed in about half the time of one statement each.
        db.execute(
            "UPDATE response_chain SET used_at = :now + chain.key * 1e-6 "
            "FROM json_each(:ids) AS chain WHERE response_chain.id = chain.value",
            {"now": now, "ids": orjson.dumps(newest_first).decode()},
        )
    else:
        db.executemany(
            "UPDATE response_chain SET used_at = ? WHERE id = ?",
            [(now + depth * 1e-6, response_id) for depth, response_id in enumerate(newest_first)],
        )


def _splice_into_later(db: sqlite3.Connection, response_id: str) -> None:
    """Give the records building on ``response_id``'s input its items (``spliced``)."""
    row = db.execute("SELECT record FROM response_records WHERE id = ?", (response_id,)).fetchone()
    if row is None:
        return
    base = decode_record(bytes(row[0]))
    later = db.execute(
        "SELECT records.record FROM response_chain AS chain JOIN response_records AS records "
        "ON records.id = chain.id WHERE chain.previous_response_id = ?",
        (response_id,),
    ).fetchall()
    for (data,) in later:
        built = spliced_encoded(bytes(data), base)
        if built is None:
            continue
        whole, data = built
        db.execute("UPDATE response_records SET record = ? WHERE id = ?", (data, whole.id))
        db.execute(
            "UPDATE response_chain SET previous_response_id = ?, size = ? WHERE id = ?",
            (whole.link, len(data), whole.id),
        )


def _free_bytes(db: sqlite3.Connection, excess: int, *, used_before: float) -> None:
    """Delete the least recently used responses of those used before ``used_before``, as
    many as it takes to free ``excess`` bytes (nothing if it is not positive)."""
    if excess <= 0:
        return
    doomed: list[tuple[str]] = []
    with contextlib.closing(db.execute(_OLDEST_FIRST, (used_before,))) as oldest_first:
        for response_id, size in oldest_first:
            doomed.append((response_id,))
            excess -= size
            if excess <= 0:
                break
    db.executemany("DELETE FROM response_records WHERE id = ?", doomed)
    db.executemany("DELETE FROM response_chain WHERE id = ?", doomed)


def _delete(db: sqlite3.Connection, ids: str, parameters: tuple[Any, ...]) -> None:
    """Delete the responses the query ``ids`` selects, their records first."""
    db.execute(f"DELETE FROM response_records WHERE id IN ({ids})", parameters)
    db.execute(f"DELETE FROM response_chain WHERE id IN ({ids})", parameters)
