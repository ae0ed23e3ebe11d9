"""Store fixtures: every store behind the one ``ResponseStore`` seam, and a real Redis.

``any_store`` runs a test against memory, SQLite (a temporary file) and Redis (a real
``redis-server`` started once per session, flushed before each test). Without a
``redis-server`` binary the Redis tests are skipped, loudly; under CI
(``TOOLWIRE_CI=1``) they fail instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import redis

from toolwire.store import ResponseStore, open_store
from toolwire.store import _sqlite as sqlite_store

from .redis_server import MISSING_REASON, REDIS_SERVER, RedisServer

StoreFactory = Callable[..., ResponseStore]
STORE_KINDS = ["memory", "sqlite", "sqlite-3.37", "redis"]
"""``sqlite-3.37``: SQLite as the store uses a library older than 3.38 (its chain refreshed row by row)."""


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if REDIS_SERVER is None:
        pytest.skip(MISSING_REASON)
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fresh_redis(redis_server: RedisServer) -> RedisServer:
    """The session's Redis, running and empty."""
    if not redis_server.running:
        redis_server.start()
    with redis.Redis.from_url(redis_server.url) as client:
        client.flushdb()
    return redis_server


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
async def make_store(request: pytest.FixtureRequest, store_kind: str, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """Opens stores of one kind (``open_store(url, ttl_seconds=..., max_entries=..., max_bytes=...)``);
    every store it opened is closed after the test. Two stores from one factory share
    their data, as two gateway processes would (except memory, which cannot)."""
    kind = store_kind
    if kind == "memory":
        url = "memory://"
    elif kind.startswith("sqlite"):
        url = f"sqlite://{tmp_path / 'responses.sqlite3'}"
        if kind == "sqlite-3.37":
            request.getfixturevalue("monkeypatch").setattr(sqlite_store, "REFRESH_IN_ONE_STATEMENT", False)
    else:
        url = request.getfixturevalue("fresh_redis").url
    opened: list[ResponseStore] = []

    def make(
        ttl_seconds: float | None = 3600.0, max_entries: int | None = 1000, max_bytes: int | None = None
    ) -> ResponseStore:
        store = open_store(url, ttl_seconds=ttl_seconds, max_entries=max_entries, max_bytes=max_bytes)
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.aclose()


@pytest.fixture
def store(make_store: StoreFactory) -> ResponseStore:
    return make_store()
