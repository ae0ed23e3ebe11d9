"""``SQLiteKeyStore``: keys, their limits and their usage in one SQLite file.

The file may be the one that holds stored responses (``--store sqlite:///path``): the
tables are apart from theirs. WAL mode lets every gateway process on the host share it;
each admission and settlement is one ``BEGIN IMMEDIATE`` transaction, so processes take
turns and a key's limits hold across them. Keys are kept as their visible id, a salt and
a digest (``_format``), never whole. Like ``SQLiteResponseStore``, every call runs on a
``SQLiteFile`` (one worker thread owning one connection).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import orjson

from toolwire.store import SQLiteFile, write_transaction

from ._base import KeyIdTaken
from ._errors import KeyNameTaken
from ._format import KeyDigest
from ._limits import (
    LEASE_SECONDS,
    Admitted,
    Bucket,
    Limits,
    LimitState,
    Refused,
    TokenUsage,
    charge_tokens,
    decide,
)
from ._model import ClientKey, UsageRow

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS client_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    salt BLOB NOT NULL,
    digest BLOB NOT NULL,
    models TEXT,
    rpm INTEGER,
    tpm INTEGER,
    max_concurrent INTEGER,
    budget_tokens INTEGER,
    created_at REAL NOT NULL,
    expires_at REAL,
    revoked_at REAL
);
CREATE UNIQUE INDEX IF NOT EXISTS client_keys_active_name ON client_keys (name) WHERE revoked_at IS NULL;
CREATE TABLE IF NOT EXISTS client_key_limits (
    key_id TEXT PRIMARY KEY,
    requests_level REAL,
    requests_at REAL,
    tokens_level REAL,
    tokens_at REAL,
    used_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS client_key_leases (
    key_id TEXT NOT NULL,
    lease_id TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (key_id, lease_id)
);
CREATE TABLE IF NOT EXISTS client_key_usage (
    key_id TEXT NOT NULL,
    model TEXT NOT NULL,
    requests INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    last_used_at REAL,
    PRIMARY KEY (key_id, model)
);
"""
_KEY_COLUMNS = "id, name, salt, digest, models, rpm, tpm, max_concurrent, budget_tokens, created_at, expires_at, revoked_at"


class SQLiteKeyStore:
    """A ``KeyStore`` in the SQLite file at ``path``; ``clock`` is injectable for tests
    (processes sharing the file compare readings, so it is the wall clock in production)."""

    def __init__(self, path: str | os.PathLike[str], *, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self._clock = clock
        self._file = SQLiteFile(self.path, _SCHEMA, what="key store")

    def __repr__(self) -> str:
        return f"SQLiteKeyStore({str(self.path)!r})"

    async def create(self, key: ClientKey) -> None:
        def create(db: sqlite3.Connection) -> None:
            with write_transaction(db):
                taken = db.execute("SELECT 1 FROM client_keys WHERE name = ? AND revoked_at IS NULL", (key.name,))
                if taken.fetchone() is not None:
                    raise KeyNameTaken(key.name)
                if db.execute("SELECT 1 FROM client_keys WHERE id = ?", (key.id,)).fetchone() is not None:
                    raise KeyIdTaken(key.id)
                db.execute(f"INSERT INTO client_keys ({_KEY_COLUMNS}) VALUES ({', '.join('?' * 12)})", _row_of(key))

        await self._file.run(create)

    async def find(self, key_id: str) -> ClientKey | None:
        def find(db: sqlite3.Connection) -> ClientKey | None:
            row = db.execute(f"SELECT {_KEY_COLUMNS} FROM client_keys WHERE id = ?", (key_id,)).fetchone()
            return None if row is None else _key_of(row)

        return await self._file.run(find)

    async def keys(self) -> list[ClientKey]:
        def keys(db: sqlite3.Connection) -> list[ClientKey]:
            rows = db.execute(f"SELECT {_KEY_COLUMNS} FROM client_keys ORDER BY created_at, id").fetchall()
            return [_key_of(row) for row in rows]

        return await self._file.run(keys)

    async def revoke(self, name: str) -> ClientKey | None:
        def revoke(db: sqlite3.Connection) -> ClientKey | None:
            with write_transaction(db):
                row = db.execute(
                    f"SELECT {_KEY_COLUMNS} FROM client_keys WHERE name = ? AND revoked_at IS NULL", (name,)
                ).fetchone()
                if row is None:
                    return None
                now = self._clock()
                db.execute("UPDATE client_keys SET revoked_at = ? WHERE id = ?", (now, row[0]))
                key = _key_of(row)
                return ClientKey(key.id, key.name, key.digest, key.limits, key.models, key.created_at, key.expires_at, now)

        return await self._file.run(revoke)

    async def has_keys(self) -> bool:
        def has_keys(db: sqlite3.Connection) -> bool:
            return bool(db.execute("SELECT EXISTS (SELECT 1 FROM client_keys)").fetchone()[0])

        return await self._file.run(has_keys)

    async def admit(self, key: ClientKey, lease_id: str | None) -> Admitted | Refused:
        def admit(db: sqlite3.Connection) -> Admitted | Refused:
            with write_transaction(db):
                now = self._clock()
                db.execute("DELETE FROM client_key_leases WHERE key_id = ? AND expires_at <= ?", (key.id, now))
                active = db.execute("SELECT count(*) FROM client_key_leases WHERE key_id = ?", (key.id,)).fetchone()[0]
                state = _limit_state(db, key.id, active)
                decision = decide(key.limits, state, now)
                if isinstance(decision, Admitted):
                    if decision.requests is not None:
                        _ensure_limits_row(db, key.id)
                        db.execute(
                            "UPDATE client_key_limits SET requests_level = ?, requests_at = ? WHERE key_id = ?",
                            (decision.requests.level, decision.requests.at, key.id),
                        )
                    if lease_id is not None:
                        db.execute(
                            "INSERT INTO client_key_leases (key_id, lease_id, expires_at) VALUES (?, ?, ?)",
                            (key.id, lease_id, now + LEASE_SECONDS),
                        )
                return decision

        return await self._file.run(admit)

    async def settle(self, key: ClientKey, lease_id: str | None, model: str, usage: TokenUsage) -> None:
        def settle(db: sqlite3.Connection) -> None:
            with write_transaction(db):
                now = self._clock()
                if lease_id is not None:
                    db.execute("DELETE FROM client_key_leases WHERE key_id = ? AND lease_id = ?", (key.id, lease_id))
                _ensure_limits_row(db, key.id)
                tokens = charge_tokens(key.limits, _limit_state(db, key.id, 0).tokens, usage.total, now)
                if tokens is not None:
                    db.execute(
                        "UPDATE client_key_limits SET tokens_level = ?, tokens_at = ? WHERE key_id = ?",
                        (tokens.level, tokens.at, key.id),
                    )
                db.execute(
                    "UPDATE client_key_limits SET used_tokens = used_tokens + ? WHERE key_id = ?", (usage.total, key.id)
                )
                db.execute(
                    "INSERT INTO client_key_usage "
                    "(key_id, model, requests, input_tokens, output_tokens, cached_tokens, last_used_at) "
                    "VALUES (?, ?, 1, ?, ?, ?, ?) ON CONFLICT (key_id, model) DO UPDATE SET "
                    "requests = requests + 1, input_tokens = input_tokens + excluded.input_tokens, "
                    "output_tokens = output_tokens + excluded.output_tokens, "
                    "cached_tokens = cached_tokens + excluded.cached_tokens, last_used_at = excluded.last_used_at",
                    (key.id, model, usage.input_tokens, usage.output_tokens, usage.cached_tokens, now),
                )

        await self._file.run(settle)

    async def renew(self, leases: Sequence[tuple[str, str]]) -> None:
        def renew(db: sqlite3.Connection) -> None:
            with write_transaction(db):
                expires_at = self._clock() + LEASE_SECONDS
                db.executemany(
                    "UPDATE client_key_leases SET expires_at = ? WHERE key_id = ? AND lease_id = ?",
                    [(expires_at, key_id, lease_id) for key_id, lease_id in leases],
                )

        await self._file.run(renew)

    async def usage(self) -> list[UsageRow]:
        def usage(db: sqlite3.Connection) -> list[UsageRow]:
            rows = db.execute(
                "SELECT key_id, model, requests, input_tokens, output_tokens, cached_tokens, last_used_at "
                "FROM client_key_usage ORDER BY key_id, model"
            ).fetchall()
            return [UsageRow(*row) for row in rows]

        return await self._file.run(usage)

    async def aclose(self) -> None:
        await self._file.aclose()


def _row_of(key: ClientKey) -> tuple[Any, ...]:
    limits = key.limits
    return (
        key.id,
        key.name,
        key.digest.salt,
        key.digest.digest,
        None if key.models is None else orjson.dumps(list(key.models)).decode(),
        limits.requests_per_minute,
        limits.tokens_per_minute,
        limits.max_concurrent,
        limits.budget_tokens,
        key.created_at,
        key.expires_at,
        key.revoked_at,
    )


def _key_of(row: Sequence[Any]) -> ClientKey:
    key_id, name, salt, digest, models, rpm, tpm, max_concurrent, budget, created_at, expires_at, revoked_at = row
    return ClientKey(
        id=key_id,
        name=name,
        digest=KeyDigest(bytes(salt), bytes(digest)),
        limits=Limits(rpm, tpm, max_concurrent, budget),
        models=None if models is None else tuple(orjson.loads(models)),
        created_at=created_at,
        expires_at=expires_at,
        revoked_at=revoked_at,
    )


def _limit_state(db: sqlite3.Connection, key_id: str, active_leases: int) -> LimitState:
    row = db.execute(
        "SELECT requests_level, requests_at, tokens_level, tokens_at, used_tokens FROM client_key_limits WHERE key_id = ?",
        (key_id,),
    ).fetchone()
    if row is None:
        return LimitState(active_leases=active_leases)
    requests_level, requests_at, tokens_level, tokens_at, used_tokens = row
    return LimitState(
        None if requests_level is None else Bucket(requests_level, requests_at),
        None if tokens_level is None else Bucket(tokens_level, tokens_at),
        used_tokens,
        active_leases,
    )


def _ensure_limits_row(db: sqlite3.Connection, key_id: str) -> None:
    db.execute("INSERT OR IGNORE INTO client_key_limits (key_id) VALUES (?)", (key_id,))
