"""``SQLiteResponseStore``: responses in one SQLite file, shared by processes on one host.

One table, ``responses(id, previous_response_id, used_at, record)``, in WAL mode, so
readers never wait for the writer and several gateway processes may share the file.
``used_at`` (wall-clock seconds) drives both limits: a row older than the time to live
is expired (ignored by reads, deleted on the next write), and beyond ``max_entries``
the least recently used rows are deleted on write. A write or a continuation sets
``used_at``, so a conversation still in use keeps its beginning.

The stdlib ``sqlite3`` driver is blocking: every call runs on one worker thread owned
by the store, which also owns the single connection. The file and its directory are
created on first use, readable by the owner only (responses hold conversations).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from ._base import (
    MAX_CHAIN_LENGTH,
    ItemDict,
    PreviousResponseNotFound,
    StoredResponse,
    StoreUnavailable,
    check_chain_length,
    conversation_of,
    decode_record,
    encode_record,
)

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    previous_response_id TEXT,
    used_at REAL NOT NULL,
    record BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_by_use ON responses (used_at);
"""

# The chain from a response back to its first ancestor, one row per response, newest
# first. It stops at a gap (an ancestor that is gone or expired): the oldest row found
# then still names a previous response, which is how a gap is told from a chain's start.
_CHAIN = """
WITH RECURSIVE chain (depth, id, previous_response_id, record) AS (
    SELECT 0, id, previous_response_id, record FROM responses WHERE id = :id AND used_at > :oldest
    UNION ALL
    SELECT chain.depth + 1, r.id, r.previous_response_id, r.record
    FROM chain JOIN responses AS r ON r.id = chain.previous_response_id
    WHERE r.used_at > :oldest AND chain.depth < :limit
)
SELECT id, previous_response_id, record FROM chain ORDER BY depth
"""

_BUSY_TIMEOUT_SECONDS = 10.0
_OPENING = threading.Lock()


class SQLiteResponseStore:
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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self._clock = clock
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="toolwire-sqlite")

    def __repr__(self) -> str:
        return f"SQLiteResponseStore({str(self.path)!r})"

    async def put(self, record: StoredResponse) -> None:
        data = encode_record(record)

        def put(db: sqlite3.Connection) -> None:
            with _transaction(db):
                now = self._now(db)
                db.execute(
                    "INSERT OR REPLACE INTO responses (id, previous_response_id, used_at, record) VALUES (?, ?, ?, ?)",
                    (record.id, record.previous_response_id, now, data),
                )
                if self.ttl_seconds is not None:
                    db.execute("DELETE FROM responses WHERE used_at <= ?", (now - self.ttl_seconds,))
                if self.max_entries is not None:
                    db.execute(
                        "DELETE FROM responses WHERE id IN "
                        "(SELECT id FROM responses ORDER BY used_at DESC LIMIT -1 OFFSET ?)",
                        (self.max_entries,),
                    )

        await self._run(put)

    async def get(self, response_id: str) -> StoredResponse | None:
        def get(db: sqlite3.Connection) -> bytes | None:
            row = db.execute(
                "SELECT record FROM responses WHERE id = ? AND used_at > ?",
                (response_id, self._oldest_live(self._clock())),
            ).fetchone()
            return None if row is None else bytes(row[0])

        data = await self._run(get)
        return None if data is None else decode_record(data)

    async def delete(self, response_id: str) -> bool:
        def delete(db: sqlite3.Connection) -> bool:
            with _transaction(db):
                return db.execute("DELETE FROM responses WHERE id = ?", (response_id,)).rowcount > 0

        return await self._run(delete)

    async def chain_input(self, previous_response_id: str) -> list[ItemDict]:
        def chain(db: sqlite3.Connection) -> list[bytes]:
            with _transaction(db):
                now = self._now(db)
                rows = db.execute(
                    _CHAIN,
                    {"id": previous_response_id, "oldest": self._oldest_live(now), "limit": MAX_CHAIN_LENGTH},
                ).fetchall()
                if not rows:
                    raise PreviousResponseNotFound(previous_response_id)
                check_chain_length(previous_response_id, len(rows))
                oldest_gone = rows[-1][1]
                if oldest_gone is not None:
                    raise PreviousResponseNotFound(previous_response_id, oldest_gone)
                # Newest first, each a little later: the oldest is evicted last.
                db.executemany(
                    "UPDATE responses SET used_at = ? WHERE id = ?",
                    [(now + depth * 1e-6, row[0]) for depth, row in enumerate(rows)],
                )
                return [bytes(row[2]) for row in rows]

        newest_first = await self._run(chain)
        return conversation_of([decode_record(data) for data in reversed(newest_first)])

    async def aclose(self) -> None:
        def close(db: sqlite3.Connection | None) -> None:
            if db is not None:
                db.close()

        if self._closed:
            return
        self._closed = True
        connection, self._connection = self._connection, None
        await asyncio.get_running_loop().run_in_executor(self._worker, close, connection)
        self._worker.shutdown(wait=True)

    async def _run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        def call() -> T:
            return operation(self._connect())

        try:
            return await asyncio.get_running_loop().run_in_executor(self._worker, call)
        except sqlite3.ProgrammingError:
            raise  # our bug, not the store's state
        except (sqlite3.DatabaseError, OSError) as exc:
            raise StoreUnavailable(
                f"The response store {self.path} failed: {str(exc).rstrip('.')}."
            ) from exc

    def _connect(self) -> sqlite3.Connection:
        """The connection (on the worker thread), opening the file on first use."""
        if self._connection is None:
            self._connection = connect_sqlite(self.path, _SCHEMA)
        return self._connection

    def _now(self, db: sqlite3.Connection) -> float:
        """The clock, but never before the latest use: the eviction order is strict."""
        latest = db.execute("SELECT max(used_at) FROM responses").fetchone()[0]
        now = self._clock()
        return now if latest is None or now > latest else latest + 1e-6

    def _oldest_live(self, now: float) -> float:
        return now - self.ttl_seconds if self.ttl_seconds is not None else float("-inf")


def connect_sqlite(path: Path, schema: str) -> sqlite3.Connection:
    """A connection to the SQLite file at ``path``, in WAL mode, with ``schema`` applied;
    the file and its directory are created readable by their owner only.

    Several stores may share one file (stored responses and client keys do), each with a
    connection of its own in the same process. So the file is never opened here once it
    exists: closing any descriptor of a file drops every POSIX lock the process holds on
    it, SQLite's included, and another process would then take itself for the file's last
    user and reset the write-ahead log under the live connections, whose later writes
    nobody else would see. Creating and connecting hold one lock, so two stores of a
    process opening the same new file cannot interleave.
    """
    with _OPENING:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
        db = sqlite3.connect(path, timeout=_BUSY_TIMEOUT_SECONDS, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            db.executescript(schema)
        except BaseException:
            db.close()
            raise
        return db


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """A write transaction, taking the write lock at once (no upgrade deadlocks)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
