"""``SQLiteFile``: one SQLite file behind one worker thread, for the stores that live in it.

The stdlib ``sqlite3`` driver is blocking: every operation of a store runs on one worker
thread owned by its ``SQLiteFile``, which also owns the store's single connection,
opened on first use by ``connect_sqlite``. Stored responses and client keys may share a
file (each store with a ``SQLiteFile`` of its own). A failure of the file is
``StoreUnavailable`` (503), naming the store and the file; a misuse of the driver is our
bug and stays what it is.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from ._base import StoreUnavailable

T = TypeVar("T")

_BUSY_TIMEOUT_SECONDS = 10.0
_OPENING = threading.Lock()


class SQLiteFile:
    """The file at ``path`` with ``schema`` applied, then ``prepare`` (what a script cannot
    say, such as a column added only if missing); ``what`` names its store in errors."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        schema: str,
        *,
        what: str,
        prepare: Callable[[sqlite3.Connection], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self._schema = schema
        self._prepare = prepare
        self._what = what
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="toolwire-sqlite")

    async def run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """``operation(connection)`` on the worker thread."""

        def call() -> T:
            if self._connection is None:
                connection = connect_sqlite(self.path, self._schema)
                try:
                    if self._prepare is not None:
                        self._prepare(connection)
                except BaseException:
                    connection.close()
                    raise
                self._connection = connection
            return operation(self._connection)

        try:
            return await asyncio.get_running_loop().run_in_executor(self._worker, call)
        except sqlite3.ProgrammingError:
            raise  # our bug, not the store's state
        except (sqlite3.DatabaseError, OSError) as exc:
            raise StoreUnavailable(f"The {self._what} {self.path} failed: {str(exc).rstrip('.')}.") from exc

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
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except FileExistsError as exc:  # a file where a directory of the path goes
            raise NotADirectoryError(errno.ENOTDIR, "Not a directory", exc.filename) from exc
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
def write_transaction(db: sqlite3.Connection) -> Iterator[None]:
    """A write transaction, taking the write lock at once (no upgrade deadlocks)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
