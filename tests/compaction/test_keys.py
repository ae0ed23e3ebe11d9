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
from toolwire.store._redis_server import DEFAULT_SOCKET_TIMEOUT_SECONDS


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


async def test_a_key_file_is_made_in_a_directory_of_its_owners(tmp_path: Path) -> None:
    path = tmp_path / "state" / "toolwire" / "responses.sqlite3.compaction-key"
    key = await FileCompactionKey(path).key()
    assert base64.b64decode(path.read_text()) == key
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    beside = tmp_path / "responses.sqlite3.compaction-key"  # in a directory that exists
    assert len(await FileCompactionKey(beside).key()) == 32
    assert repr(FileCompactionKey(beside)) == f"FileCompactionKey({str(beside)!r})"


async def test_a_key_file_that_cannot_be_made_is_a_clear_503(tmp_path: Path) -> None:
    path = tmp_path / ("k" * 250)  # readable as absent, but no room for the staged file's longer name
    with pytest.raises(StoreUnavailable) as caught:
        await FileCompactionKey(path).key()
    assert caught.value.message == f"The compaction key file {path} cannot be created: File name too long."


async def test_a_key_file_that_is_no_text_is_a_clear_503(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite3.compaction-key"
    path.write_bytes("clé\n".encode())
    with pytest.raises(StoreUnavailable) as caught:
        await FileCompactionKey(path).key()
    assert caught.value.message.startswith(f"The compaction key file {path} cannot be read: 'ascii' codec can't decode")


@pytest.mark.parametrize(
    "content",
    ["not a key\n", base64.b64encode(bytes(31)).decode() + "\n", base64.b64encode(bytes(32)).decode()[:20] + "!" + base64.b64encode(bytes(32)).decode()[20:]],
    ids=["not-base64", "too-short", "base64-with-junk-inside"],
)
async def test_a_damaged_key_file_says_what_to_do(tmp_path: Path, content: str) -> None:
    path = tmp_path / "responses.sqlite3.compaction-key"
    path.write_text(content)
    with pytest.raises(StoreUnavailable) as caught:
        await FileCompactionKey(path).key()
    assert caught.value.message == (
        f"The compaction key file {path} is damaged (not 32 bytes in base64). Remove it and a new key is made; "
        "compactions sealed under the old one can then no longer be opened."
    )


async def test_a_redis_key_made_before_is_never_replaced(fresh_redis: RedisServer) -> None:
    first = RedisCompactionKey(fresh_redis.url)
    try:
        made = await first.key()
    finally:
        await first.aclose()
    later = RedisCompactionKey(fresh_redis.url)  # another gateway, or this one restarted
    try:
        assert await later.key() == made
    finally:
        await later.aclose()


async def test_a_damaged_redis_key_says_what_to_do(fresh_redis: RedisServer) -> None:
    with redis.Redis.from_url(fresh_redis.url) as client:
        client.set("toolwire:compaction-key", b"short")
    source = RedisCompactionKey(fresh_redis.url)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await source.key()
    finally:
        await source.aclose()
    assert caught.value.message == (
        f"The compaction key in Redis at {fresh_redis.url} (toolwire:compaction-key) is damaged: delete it and a "
        "new one is made (compactions sealed under the old one can then no longer be opened)."
    )


async def test_an_unreachable_key_store_is_named_as_such() -> None:
    source = RedisCompactionKey("redis://127.0.0.1:1/0", socket_timeout=0.5)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await source.key()
    finally:
        await source.aclose()
    assert caught.value.message.startswith("The compaction key store redis://127.0.0.1:1/0 is unreachable")
    assert repr(source) == "RedisCompactionKey('redis://127.0.0.1:1/0')"


async def test_a_hung_redis_costs_a_bounded_wait_not_a_hang(fresh_redis: RedisServer) -> None:
    source = RedisCompactionKey(fresh_redis.url, socket_timeout=0.5)
    fresh_redis.pause()
    try:
        with pytest.raises(StoreUnavailable, match="unreachable"):
            async with asyncio.timeout(30):  # the socket timeout ends it; without one it hangs
                await source.key()
    finally:
        fresh_redis.resume()
        await source.aclose()


def test_the_key_store_waits_for_redis_as_long_as_the_response_store() -> None:
    source = RedisCompactionKey("redis://127.0.0.1:6379/0")
    assert source._server.client.connection_pool.connection_kwargs["socket_timeout"] == DEFAULT_SOCKET_TIMEOUT_SECONDS


def test_a_tls_redis_store_keeps_its_key_in_that_redis() -> None:
    assert isinstance(compaction_key_for("rediss://cache.internal:6380/0"), RedisCompactionKey)
