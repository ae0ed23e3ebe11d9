"""Key store fixtures: every store behind the one ``KeyStore`` seam, on a clock the test
turns, and a real ``redis-server`` of this package's own (tests here stop it).

Without a ``redis-server`` binary the Redis tests are skipped, loudly; under CI
(``TOOLWIRE_CI=1``) every skip fails instead (``tests/support/no_skips.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.store.redis_server import MISSING_REASON, REDIS_SERVER, RedisServer
from toolwire.keys import KeyStore, MemoryKeyStore, SQLiteKeyStore
from toolwire.keys._redis import RedisKeyStore

KeyStoreFactory = Callable[[], KeyStore]


class Clock:
    """Seconds since the epoch, moved by hand."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def start_redis(directory: Path) -> RedisServer:
    if REDIS_SERVER is None:
        pytest.skip(MISSING_REASON)
    server = RedisServer(directory)
    server.start()
    return server


@pytest.fixture(scope="session")
def keys_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_redis(tmp_path_factory.mktemp("keys-redis"))
    try:
        yield server
    finally:
        server.stop()


def emptied(server: RedisServer) -> str:
    """``server`` running (a test may have stopped it) and holding nothing; its URL."""
    if not server.running:
        server.start()
    with redis.Redis.from_url(server.url) as client:
        client.flushdb()
    return server.url


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def make_key_store(request: pytest.FixtureRequest, clock: Clock, tmp_path: Path) -> AsyncIterator[KeyStoreFactory]:
    """Opens stores of one kind on ``clock``; two stores from one factory share their
    data, as two gateway processes would (memory: one store, since it cannot)."""
    kind: str = request.param
    opened: list[KeyStore] = []
    memory = MemoryKeyStore(clock=clock)
    if kind == "redis":
        emptied(request.getfixturevalue("keys_redis"))

    def make() -> KeyStore:
        store: KeyStore
        if kind == "memory":
            return memory
        if kind == "sqlite":
            store = SQLiteKeyStore(tmp_path / "keys.sqlite3", clock=clock)
        else:
            store = RedisKeyStore(request.getfixturevalue("keys_redis").url, clock=clock)
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.aclose()


@pytest.fixture
def key_store(make_key_store: KeyStoreFactory) -> KeyStore:
    return make_key_store()
