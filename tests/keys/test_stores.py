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

from tests.store.redis_server import RedisServer
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
    new_key,
)
from toolwire.keys._redis import RedisKeyStore
from toolwire.protocol import MAX_TOKEN_COUNT
from toolwire.store import StoredResponse, open_store

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
        ("ftp://x", False, "unknown store 'ftp' in 'ftp://x': use sqlite://[/path], memory:// or redis://host:port/db"),
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
