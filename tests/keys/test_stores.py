"""The ``KeyStore`` contract, held by memory, SQLite and Redis alike: keys, revocation,
the limits over time (on a clock the test turns), leases, usage, and two stores on one
database giving a key its limit once."""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import replace
from pathlib import Path

import orjson
import pytest
import redis

from tests.store.redis_server import RedisServer
from tests.support.gateway import free_port
from toolwire.keys import (
    LEASE_SECONDS,
    Admitted,
    ClientKey,
    KeyIdTaken,
    KeyNameTaken,
    KeySpec,
    KeyStore,
    Limits,
    Refused,
    SQLiteKeyStore,
    TokenUsage,
    create_key,
    digest_of,
    key_id_of,
    new_key,
)
from toolwire.keys._redis import RedisKeyStore
from toolwire.protocol import MAX_TOKEN_COUNT
from toolwire.store import StoredResponse, StoreUnavailable, open_store

from .conftest import Clock, KeyStoreFactory, emptied
from .gateways import keys_cli

_created = itertools.count(1)


def make_key(name: str = "alice", limits: Limits | None = None, models: tuple[str, ...] | None = None) -> ClientKey:
    """A key record, each made later than the one before."""
    key_id, key = new_key()
    return ClientKey(key_id, name, digest_of(key), limits or Limits(), models, created_at=float(next(_created)))


async def test_keys_are_kept_found_listed_and_revoked(key_store: KeyStore, clock: Clock) -> None:
    assert not await key_store.has_keys()
    alice = make_key("alice", Limits(requests_per_minute=5, tokens_per_minute=7, max_concurrent=2, budget_tokens=9), models=("m1", "m2"))
    alice = replace(alice, expires_at=clock.now + 86_400.5)  # revoked before it expires: it keeps its expiry
    bob = replace(make_key("bob"), expires_at=clock.now + 3.5)
    await key_store.create(alice)
    await key_store.create(bob)
    assert await key_store.has_keys()
    assert await key_store.find(alice.id) == alice
    assert await key_store.find("nosuchid") is None
    assert await key_store.keys() == [alice, bob]
    revoked = await key_store.revoke("alice")
    assert revoked == replace(alice, revoked_at=clock.now)
    assert await key_store.find(alice.id) == revoked
    assert await key_store.revoke("alice") is None
    assert await key_store.revoke("nobody") is None


async def test_a_name_is_taken_until_its_key_is_revoked(key_store: KeyStore) -> None:
    first = make_key("alice")
    await key_store.create(first)
    with pytest.raises(KeyNameTaken, match=r"^A key named 'alice' is already active;"):
        await key_store.create(make_key("alice"))
    await key_store.revoke("alice")
    second = make_key("alice")
    await key_store.create(second)
    assert [key.id for key in await key_store.keys()] == [first.id, second.id]
    assert await key_store.has_keys()


async def test_a_taken_id_is_refused(key_store: KeyStore) -> None:
    first = make_key("alice")
    await key_store.create(first)
    with pytest.raises(KeyIdTaken) as taken:
        await key_store.create(replace(make_key("bob"), id=first.id))
    assert taken.value.args == (first.id,)


async def test_a_new_key_whose_id_is_taken_is_drawn_again(key_store: KeyStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids are 8 random characters: a draw may hit one already kept, and is then drawn
    again (five times at most, then a clear error), never kept over the other."""
    from toolwire.keys import _admin

    taken, _ = await create_key(key_store, KeySpec(name="first"))
    draws = iter([(taken.id, "twk_taken_secret"), new_key()])
    monkeypatch.setattr(_admin, "new_key", lambda: next(draws))
    made, key = await create_key(key_store, KeySpec(name="second"))
    assert made.id != taken.id and key_id_of(key) == made.id
    assert [k.name for k in await key_store.keys()] == ["first", "second"]

    monkeypatch.setattr(_admin, "new_key", lambda: (taken.id, "twk_taken_secret"))
    with pytest.raises(RuntimeError) as exhausted:
        await create_key(key_store, KeySpec(name="third"))
    assert str(exhausted.value) == "no free key id after 5 attempts"
    assert [k.name for k in await key_store.keys()] == ["first", "second"]


async def test_requests_per_minute_refill_over_time(key_store: KeyStore, clock: Clock) -> None:
    key = make_key(limits=Limits(requests_per_minute=2))
    await key_store.create(key)
    assert isinstance(await key_store.admit(key, None), Admitted)
    assert isinstance(await key_store.admit(key, None), Admitted)
    refused = await key_store.admit(key, None)
    assert isinstance(refused, Refused) and refused.limit == "requests_per_minute"
    assert refused.retry_after == pytest.approx(30.0)
    clock.advance(29.0)
    assert isinstance(await key_store.admit(key, None), Refused)
    clock.advance(1.0)
    assert isinstance(await key_store.admit(key, None), Admitted)


async def test_tokens_per_minute_are_charged_after_the_request(key_store: KeyStore, clock: Clock) -> None:
    key = make_key(limits=Limits(tokens_per_minute=60))
    await key_store.create(key)
    assert isinstance(await key_store.admit(key, None), Admitted)
    await key_store.settle(key, None, "m", TokenUsage(70, 30))  # 60 - 100: 40 in debt
    refused = await key_store.admit(key, None)
    assert refused == Refused("tokens_per_minute", pytest.approx(41.0))
    clock.advance(41.0)
    assert isinstance(await key_store.admit(key, None), Admitted)
    await key_store.settle(key, None, "m", TokenUsage(20, 0))  # the second within the minute adds to the first
    await key_store.settle(key, None, "m", TokenUsage(30, 0))
    assert await key_store.admit(key, None) == Refused("tokens_per_minute", pytest.approx(50.0))


async def test_concurrent_requests_hold_leases_until_settled(key_store: KeyStore, clock: Clock) -> None:
    key = make_key(limits=Limits(max_concurrent=1))
    await key_store.create(key)
    assert isinstance(await key_store.admit(key, None), Admitted)  # without a lease: no slot taken
    assert isinstance(await key_store.admit(key, "lease-a"), Admitted)
    assert await key_store.admit(key, "lease-b") == Refused("max_concurrent", 1.0)
    await key_store.settle(key, "lease-a", "m", TokenUsage())
    assert isinstance(await key_store.admit(key, "lease-c"), Admitted)


async def test_a_lease_expires_unless_renewed(key_store: KeyStore, clock: Clock) -> None:
    key = make_key(limits=Limits(max_concurrent=1))
    await key_store.create(key)
    assert isinstance(await key_store.admit(key, "held"), Admitted)
    clock.advance(LEASE_SECONDS - 1)
    await key_store.renew([(key.id, "held")])
    clock.advance(2)
    assert isinstance(await key_store.admit(key, "other"), Refused)  # renewed: still held
    clock.advance(LEASE_SECONDS)
    assert isinstance(await key_store.admit(key, "other"), Admitted)  # its gateway died: expired


async def test_a_lease_is_held_for_lease_seconds_exactly(key_store: KeyStore, clock: Clock) -> None:
    key = make_key(limits=Limits(max_concurrent=1))
    await key_store.create(key)
    assert isinstance(await key_store.admit(key, "held"), Admitted)
    clock.advance(LEASE_SECONDS - 0.5)
    assert isinstance(await key_store.admit(key, "other"), Refused)
    clock.advance(0.5)
    assert isinstance(await key_store.admit(key, "other"), Admitted)


async def test_the_budget_counts_every_token_of_the_key(key_store: KeyStore) -> None:
    key = make_key(limits=Limits(budget_tokens=100))
    await key_store.create(key)
    assert isinstance(await key_store.admit(key, None), Admitted)
    await key_store.settle(key, None, "m1", TokenUsage(60, 39))
    assert isinstance(await key_store.admit(key, None), Admitted)
    await key_store.settle(key, None, "m2", TokenUsage(1, 0))
    assert await key_store.admit(key, None) == Refused("budget_tokens", None)


async def test_a_budget_of_one_token_lets_the_first_request_go(key_store: KeyStore) -> None:
    key = make_key(limits=Limits(budget_tokens=1))
    await key_store.create(key)
    assert isinstance(await key_store.admit(key, None), Admitted)
    await key_store.settle(key, None, "m", TokenUsage(1, 0))
    assert await key_store.admit(key, None) == Refused("budget_tokens", None)


async def test_usage_is_kept_per_key_and_model(key_store: KeyStore, clock: Clock) -> None:
    alice, bob = make_key("alice"), make_key("bob")
    await key_store.create(alice)
    await key_store.create(bob)
    await key_store.settle(alice, None, "m1", TokenUsage(10, 5, 4))
    clock.advance(10)
    await key_store.settle(alice, None, "m1", TokenUsage(1, 2, 0))
    await key_store.settle(alice, None, "m|2 with spaces\x1fand a unit separator", TokenUsage(7, 0, 0))
    await key_store.settle(bob, None, "m1", TokenUsage())
    rows = {(row.key_id, row.model): row for row in await key_store.usage()}
    assert set(rows) == {(alice.id, "m1"), (alice.id, "m|2 with spaces\x1fand a unit separator"), (bob.id, "m1")}
    first = rows[(alice.id, "m1")]
    assert (first.requests, first.input_tokens, first.output_tokens, first.cached_tokens) == (2, 11, 7, 4)
    assert first.last_used_at == pytest.approx(clock.now)
    second = rows[(bob.id, "m1")]  # a request that used nothing
    assert (second.requests, second.input_tokens, second.output_tokens, second.cached_tokens) == (1, 0, 0, 0)


async def test_usage_of_the_largest_counts_is_recorded(key_store: KeyStore) -> None:
    """An upstream that reports 2**64 - 1 tokens (orjson reads it) is charged the most one
    count may say, which SQLite and Redis can add up, instead of failing the record."""
    key = make_key(limits=Limits(budget_tokens=5))
    await key_store.create(key)
    usage = TokenUsage.from_response_usage(
        {"input_tokens": 2**64 - 1, "output_tokens": 1.8446744073709552e19, "input_tokens_details": {"cached_tokens": 2**64 - 1}}
    )
    assert usage == TokenUsage(MAX_TOKEN_COUNT, MAX_TOKEN_COUNT, MAX_TOKEN_COUNT)
    for _ in range(3):
        await key_store.settle(key, None, "m", usage)
    [row] = await key_store.usage()
    assert (row.requests, row.input_tokens, row.output_tokens, row.cached_tokens) == (3, *[3 * MAX_TOKEN_COUNT] * 3)
    assert await key_store.admit(key, None) == Refused("budget_tokens", None)


async def test_two_stores_on_one_database_give_a_key_its_limit_once(make_key_store: KeyStoreFactory) -> None:
    first, second = make_key_store(), make_key_store()
    key = make_key(limits=Limits(requests_per_minute=5, max_concurrent=3))
    await first.create(key)
    assert await second.find(key.id) == key
    outcomes = await asyncio.gather(
        *(store.admit(key, f"lease-{n}-{side}") for n in range(10) for side, store in enumerate((first, second)))
    )
    assert sum(isinstance(outcome, Admitted) for outcome in outcomes) == 3
    limits = sorted({outcome.limit for outcome in outcomes if isinstance(outcome, Refused)})
    assert limits == ["max_concurrent"]
    for n in range(10):
        for side in range(2):
            await second.settle(key, f"lease-{n}-{side}", "m", TokenUsage())
    outcomes = await asyncio.gather(*(store.admit(key, None) for _ in range(10) for store in (first, second)))
    assert sum(isinstance(outcome, Admitted) for outcome in outcomes) == 2  # 5 per minute in all


async def test_a_file_shared_with_stored_responses_stays_one_database_for_every_process(tmp_path: Path) -> None:
    """Two stores of one process on one SQLite file, and other processes writing it: each
    sees the others' writes (the stores must not drop each other's file locks)."""
    path = tmp_path / "shared.sqlite3"
    url = f"sqlite:///{path}"
    responses = open_store(url)
    keys = SQLiteKeyStore(path)
    try:
        await keys.has_keys()
        await responses.put(StoredResponse.from_exchange({"id": "resp_1", "created_at": 1, "output": []}, "hi"))
        made = keys_cli("create", "elsewhere", "--store", url)
        assert made.returncode == 0, made.stderr
        assert keys_cli("revoke", "elsewhere", "--store", url).returncode == 0
        assert [key.revoked_at is not None for key in await keys.keys()] == [True]
        await create_key(keys, KeySpec(name="here"))
        await responses.put(StoredResponse.from_exchange({"id": "resp_2", "created_at": 2, "output": []}, "hi"))
        listed = keys_cli("list", "--json", "--store", url)  # while this process's stores are open
        assert [key["name"] for key in orjson.loads(listed.stdout)] == ["elsewhere", "here"]
    finally:
        await keys.aclose()
        await responses.aclose()


async def test_a_lease_that_is_not_held_is_given_back_or_renewed_harmlessly(key_store: KeyStore) -> None:
    """A lease already expired (its gateway was slow) is settled or renewed like any."""
    key = make_key(limits=Limits(max_concurrent=1))
    await key_store.create(key)
    await key_store.renew([(key.id, "long-gone")])
    await key_store.settle(key, "long-gone", "m", TokenUsage(1, 1))
    assert isinstance(await key_store.admit(key, "fresh"), Admitted)
    [row] = await key_store.usage()
    assert (row.key_id, row.model, row.requests) == (key.id, "m", 1)


@pytest.mark.parametrize(
    ("url", "for_cli", "refusal"),
    [
        ("nonsense", False, "'nonsense' is not a store URL: use sqlite://[/path] or redis://host:port/db"),
        ("memory://", True, "a memory:// store lives inside one gateway process: create keys there over the admin API "
                            "(--admin-key-env), or use sqlite:// or redis://"),
        ("redis:///0", False, "redis:// store URL needs a host, e.g. redis://localhost:6379/0"),
        ("rediss:///0", False, "rediss:// store URL needs a host, e.g. rediss://localhost:6379/0"),
        ("ftp://x", False, "unknown store 'ftp': use sqlite://[/path], memory:// or redis://host:port/db"),
    ],
)
def test_a_store_url_that_cannot_hold_keys_is_refused_saying_why(url: str, for_cli: bool, refusal: str) -> None:
    from toolwire.keys import open_key_store

    with pytest.raises(ValueError) as refused:
        open_key_store(url, for_cli=for_cli)
    assert str(refused.value) == refusal


def test_the_store_urls_that_hold_keys(tmp_path: Path) -> None:
    from toolwire.keys import MemoryKeyStore, open_key_store
    from toolwire.keys._redis import RedisKeyStore

    assert isinstance(open_key_store("memory://"), MemoryKeyStore)  # a gateway's own, for_cli not asked
    assert isinstance(open_key_store(f"sqlite:///{tmp_path}/keys.db"), SQLiteKeyStore)
    assert isinstance(open_key_store("rediss://redis.example:6380/0"), RedisKeyStore)  # opening does no I/O


async def test_a_redis_store_on_the_server_s_clock(keys_redis: RedisServer) -> None:
    """As the gateway opens it: no clock of its own, every time read from Redis (``TIME``),
    so that gateways on several machines share one clock."""
    store = RedisKeyStore(emptied(keys_redis))
    try:
        key = make_key("alice", limits=Limits(max_concurrent=1, requests_per_minute=2))
        before = time.time()
        await store.create(key)
        assert isinstance(await store.admit(key, "lease-a"), Admitted)
        assert await store.admit(key, "lease-b") == Refused("max_concurrent", 1.0)
        await store.settle(key, "lease-a", "m", TokenUsage(3, 4, 0))
        assert isinstance(await store.admit(key, None), Admitted)
        assert isinstance(await store.admit(key, None), Refused)  # two requests a minute
        (row,) = await store.usage()
        assert (row.requests, row.input_tokens, row.output_tokens) == (1, 3, 4)
        assert row.last_used_at is not None and before - 1 <= row.last_used_at <= time.time() + 1
    finally:
        await store.aclose()


def test_a_store_names_its_kind_and_place_and_never_a_password(tmp_path: Path) -> None:
    from toolwire.keys import MemoryKeyStore

    assert repr(MemoryKeyStore()) == "MemoryKeyStore()"
    assert repr(SQLiteKeyStore(tmp_path / "keys.db")) == f"SQLiteKeyStore({str(tmp_path / 'keys.db')!r})"
    assert repr(RedisKeyStore("redis://alice:hunter2@127.0.0.1:1/3")) == "RedisKeyStore('redis://alice:***@127.0.0.1:1/3')"


async def test_a_key_store_that_fails_says_it_is_the_key_store_and_where(tmp_path: Path) -> None:
    """Its message reaches the client (503) and the log: it names the key store, not the
    response store that may sit in the same file or server."""
    unopenable = SQLiteKeyStore(tmp_path)  # a folder, not a database file
    with pytest.raises(StoreUnavailable) as failed:
        await unopenable.has_keys()
    assert str(failed.value).startswith(f"The key store {tmp_path} failed: ")
    await unopenable.aclose()

    port = free_port()  # nothing listens there
    nobody = RedisKeyStore(f"redis://:hunter2@127.0.0.1:{port}/0")
    with pytest.raises(StoreUnavailable) as unreachable:
        await nobody.has_keys()
    assert str(unreachable.value).startswith(f"The key store redis://:***@127.0.0.1:{port}/0 is unreachable (")
    assert "hunter2" not in str(unreachable.value)
    await nobody.aclose()


async def test_a_redis_that_never_answers_is_given_up_on_after_the_socket_timeout() -> None:
    """A server that accepts and then says nothing (a hung Redis, a wrong port) costs a
    request ``socket_timeout`` (and one retry), not the client's patience."""
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = RedisKeyStore(f"redis://127.0.0.1:{port}/0", socket_timeout=0.1)
    try:
        with pytest.raises(StoreUnavailable) as silence:  # two tries of 0.1 s, not the default's 2 s
            await asyncio.wait_for(store.has_keys(), timeout=1.5)
        assert str(silence.value).startswith(f"The key store redis://127.0.0.1:{port}/0 is unreachable (TimeoutError: ")
        assert accepted
    finally:
        await store.aclose()
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_redis_stores_under_different_prefixes_keep_apart(keys_redis: RedisServer) -> None:
    """Two teams' gateways on one Redis, each with its ``key_prefix``: neither sees the
    other's keys, limits or usage, and everything of each lies under its prefix."""
    url = emptied(keys_redis)
    ours, theirs = RedisKeyStore(url, key_prefix="ours:"), RedisKeyStore(url, key_prefix="theirs:")
    try:
        key = make_key("alice", Limits(requests_per_minute=1))
        await ours.create(key)
        assert await theirs.keys() == [] and not await theirs.has_keys()
        assert await theirs.find(key.id) is None and await theirs.revoke("alice") is None
        await theirs.create(replace(make_key("alice"), id="other001"))  # the same name, in its own namespace
        assert isinstance(await ours.admit(key, None), Admitted)
        assert isinstance(await theirs.admit(key, None), Admitted)  # its own bucket for the same id
        await ours.settle(key, None, "m", TokenUsage(1, 1))
        assert await theirs.usage() == []
        with redis.Redis.from_url(url) as client:
            names = {name.decode() for name in client.keys("*")}
        assert names and all(name.startswith(("ours:client-key", "theirs:client-key")) for name in names)
        assert f"ours:client-key:{key.id}" in names and "theirs:client-key:other001" in names
    finally:
        await ours.aclose()
        await theirs.aclose()
