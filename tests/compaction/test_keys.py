"""The compaction key beside each kind of store: made once, then the same for every
gateway process that shares the store; damaged or unreachable, a clear 503."""

from __future__ import annotations

import asyncio
import base64
import stat
from pathlib import Path

import pytest
import redis

from tests.store.redis_server import RedisServer
from toolwire.compaction import (
    KEY_FILE_SUFFIX,
    FileCompactionKey,
    ProcessCompactionKey,
    RedisCompactionKey,
    compaction_key_for,
)
from toolwire.store import StoreUnavailable


async def test_a_file_key_is_made_once_and_shared(tmp_path: Path) -> None:
    path = tmp_path / "state" / "responses.sqlite3.compaction-key"
    sources = [FileCompactionKey(path) for _ in range(8)]
    keys = await asyncio.gather(*(source.key() for source in sources))  # racing to make it
    assert len(set(keys)) == 1 and len(keys[0]) == 32
    assert base64.b64decode(path.read_text()) == keys[0]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # nothing staged left behind
    assert await FileCompactionKey(path).key() == keys[0]  # a later process reads it


async def test_a_damaged_key_file_is_a_clear_503(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite3.compaction-key"
    path.write_text("not a key\n")
    with pytest.raises(StoreUnavailable) as caught:
        await FileCompactionKey(path).key()
    assert caught.value.status == 503 and str(path) in caught.value.message and "damaged" in caught.value.message


async def test_a_redis_key_is_made_once_and_shared(fresh_redis: RedisServer) -> None:
    sources = [RedisCompactionKey(fresh_redis.url) for _ in range(4)]
    try:
        keys = await asyncio.gather(*(source.key() for source in sources))
        assert len(set(keys)) == 1 and len(keys[0]) == 32
        with redis.Redis.from_url(fresh_redis.url) as client:
            assert client.get("toolwire:compaction-key") == keys[0]
    finally:
        for source in sources:
            await source.aclose()


async def test_redis_gone_is_a_clear_503() -> None:
    source = RedisCompactionKey("redis://:hunter2@127.0.0.1:1/0", socket_timeout=0.5)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await source.key()
        assert "127.0.0.1:1" in caught.value.message and "hunter2" not in caught.value.message
    finally:
        await source.aclose()


async def test_the_key_lives_beside_the_store(tmp_path: Path) -> None:
    beside = compaction_key_for(f"sqlite:///{tmp_path}/db/responses.sqlite3")
    assert isinstance(beside, FileCompactionKey)
    assert beside.path.resolve() == tmp_path / "db" / f"responses.sqlite3{KEY_FILE_SUFFIX}"
    assert isinstance(compaction_key_for("redis://127.0.0.1:6379/0"), RedisCompactionKey)
    for alone in ("memory://", "none"):
        source = compaction_key_for(alone)
        assert isinstance(source, ProcessCompactionKey)
        assert await source.key() == await source.key()
        assert await source.key() != await compaction_key_for(alone).key()
