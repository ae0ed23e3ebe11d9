"""``KeyGate`` over the memory store: who a caller is, what it may do, and the lease
an admitted request holds until its usage is recorded."""

from __future__ import annotations

import asyncio
import datetime
import gc
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.descriptors import open_descriptors_of
from tests.support.waiting import until
from toolwire.keys import (
    InvalidKey,
    KeyGate,
    KeySpec,
    MemoryKeyStore,
    ModelNotAllowed,
    QuotaExceeded,
    RateLimited,
    SQLiteKeyStore,
    TokenUsage,
    create_key,
    revoke_key,
)

from .conftest import Clock

STATIC = (b"static-key-one-0001", b"static-key-two-0002")
ADMIN = b"admin-key-0003"


def bearer(key: str | bytes) -> bytes:
    return b"Bearer " + (key if isinstance(key, bytes) else key.encode())


async def test_a_gateway_without_keys_lets_anyone_in_until_its_store_has_one(clock: Clock) -> None:
    store = MemoryKeyStore(clock=clock)
    gate = KeyGate(store, clock=clock)
    assert await gate.authenticate(None) is None
    assert await gate.authenticate(b"Bearer whatever") is None
    await create_key(store, KeySpec(name="alice"), now=clock.now)
    await revoke_key(store, "alice")
    fresh = KeyGate(store, clock=clock)  # a revoked key still means the gateway has keys
    with pytest.raises(InvalidKey):
        await fresh.authenticate(None)


async def test_static_keys_are_keys_without_limits_each_its_own_owner(clock: Clock) -> None:
    gate = KeyGate(MemoryKeyStore(clock=clock), static_keys=STATIC, clock=clock)
    first = await gate.authenticate(bearer(STATIC[0]))
    second = await gate.authenticate(bearer(STATIC[1]))
    assert first is not None and second is not None
    assert first.name == second.name == "static"
    assert first.owner != second.owner
    assert STATIC[0].decode() not in first.owner
    again = await KeyGate(static_keys=STATIC).authenticate(bearer(STATIC[0]))
    assert again is not None and again.owner == first.owner  # stable across processes
    assert await gate.admit(first, "any-model") is None
    for wrong in (None, b"Bearer static-key-one", b"Basic " + STATIC[0], STATIC[0]):
        with pytest.raises(InvalidKey):
            await gate.authenticate(wrong)


async def test_a_stored_key_is_refused_once_revoked_or_expired(clock: Clock) -> None:
    store = MemoryKeyStore(clock=clock)
    gate = KeyGate(store, clock=clock)
    record, key = await create_key(store, KeySpec(name="alice", expires="1h"), now=clock.now)
    principal = await gate.authenticate(bearer(key))
    assert principal is not None and principal.name == "alice" and principal.owner == f"key:{record.id}"
    forged = key[:-4] + "AAAA" if not key.endswith("AAAA") else key[:-4] + "BBBB"
    with pytest.raises(InvalidKey, match="Missing or invalid"):
        await gate.authenticate(bearer(forged))
    clock.advance(3600)
    with pytest.raises(InvalidKey) as expired:
        await gate.authenticate(bearer(key))
    assert record.expires_at is not None
    when = datetime.datetime.fromtimestamp(record.expires_at, datetime.UTC).isoformat(timespec="seconds")
    assert expired.value.message == f"The key 'alice' ({record.prefix}) expired at {when}."
    assert when.endswith("+00:00")  # in UTC, whatever the machine's zone
    _, bobs = await create_key(store, KeySpec(name="bob"), now=clock.now)
    await revoke_key(store, "bob")
    with pytest.raises(InvalidKey, match=r"The key 'bob' \(twk_\w+\) was revoked") as caught:
        await gate.authenticate(bearer(bobs))
    assert bobs not in caught.value.message


async def test_an_admin_key_is_not_a_client_key(clock: Clock) -> None:
    gate = KeyGate(MemoryKeyStore(clock=clock), static_keys=STATIC, admin_keys=(ADMIN,), clock=clock)
    assert gate.is_admin(bearer(ADMIN))
    assert not gate.is_admin(bearer(STATIC[0])) and not gate.is_admin(None) and not gate.is_admin(b"Bearer ")
    with pytest.raises(InvalidKey):
        await gate.authenticate(bearer(ADMIN))


async def test_admission_checks_the_model_and_the_limits(clock: Clock) -> None:
    store = MemoryKeyStore(clock=clock)
    gate = KeyGate(store, clock=clock)
    _, key = await create_key(store, KeySpec(name="alice", models=["cheap"], max_concurrent=1), now=clock.now)
    alice = await gate.authenticate(bearer(key))
    with pytest.raises(ModelNotAllowed) as refused:
        await gate.admit(alice, "expensive")
    assert refused.value.status == 403
    assert refused.value.message == "The key 'alice' may not use the model 'expensive' (it may use: cheap)."
    lease = await gate.admit(alice, "cheap")
    assert lease is not None and lease.lease_id is not None
    with pytest.raises(RateLimited) as limited:
        await gate.admit(alice, "cheap")
    assert (limited.value.status, limited.value.retry_after, limited.value.limit) == (429, "1", "max_concurrent")
    await gate.record(lease, TokenUsage(3, 4))
    second = await gate.admit(alice, "cheap")
    assert second is not None
    await gate.record(second, TokenUsage())
    [row] = await store.usage()
    assert (row.model, row.requests, row.input_tokens, row.output_tokens) == ("cheap", 2, 3, 4)
    await gate.aclose()


async def test_a_spent_budget_is_insufficient_quota(clock: Clock) -> None:
    store = MemoryKeyStore(clock=clock)
    gate = KeyGate(store, clock=clock)
    _, key = await create_key(store, KeySpec(name="alice", budget_tokens=10), now=clock.now)
    alice = await gate.authenticate(bearer(key))
    lease = await gate.admit(alice, "m")
    assert lease is not None
    await gate.record(lease, TokenUsage(8, 2))
    with pytest.raises(QuotaExceeded) as spent:
        await gate.admit(alice, "m")
    body = spent.value.to_body()["error"]
    assert (spent.value.status, body["type"], body["code"]) == (429, "insufficient_quota", "insufficient_quota")
    assert spent.value.retry_after is None


async def test_each_limit_is_named_in_its_refusal_with_the_key_and_the_limit(clock: Clock) -> None:
    store = MemoryKeyStore(clock=clock)
    gate = KeyGate(store, clock=clock)
    _, rpm_key = await create_key(store, KeySpec(name="by-requests", rpm=1), now=clock.now)
    _, tpm_key = await create_key(store, KeySpec(name="by-tokens", tpm=10), now=clock.now)
    _, budget_key = await create_key(store, KeySpec(name="by-budget", budget_tokens=10), now=clock.now)
    by_requests, by_tokens, by_budget = [await gate.authenticate(bearer(k)) for k in (rpm_key, tpm_key, budget_key)]
    for principal in (by_requests, by_tokens, by_budget):
        lease = await gate.admit(principal, "m")
        assert lease is not None
        await gate.record(lease, TokenUsage(8, 4))
    with pytest.raises(RateLimited) as per_minute:
        await gate.admit(by_requests, "m")
    assert per_minute.value.message == (
        "Rate limit reached for the key 'by-requests' on requests per minute (rpm): limit 1. Please try again in 60s."
    )
    assert per_minute.value.retry_after == "60"  # the next request of the minute, a minute after the first
    with pytest.raises(RateLimited) as tokens:
        await gate.admit(by_tokens, "m")
    assert tokens.value.message == (
        "Rate limit reached for the key 'by-tokens' on tokens per minute (tpm): limit 10. Please try again in 18s."
    )
    assert tokens.value.retry_after == "18"  # 12 of 10 tokens used: 3 to win back, at 10 a minute
    with pytest.raises(QuotaExceeded) as spent:
        await gate.admit(by_budget, "m")
    assert spent.value.message == (
        "The key 'by-budget' has used its budget of 10 tokens (budget_tokens); ask for a key with a new budget."
    )
    await gate.aclose()


class RenewalsSeen(MemoryKeyStore):
    """A memory store that notes every renewal asked of it; the first ``failing`` fail, as
    a store being restarted does."""

    def __init__(self, *, failing: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.renewed: list[list[tuple[str, str]]] = []
        self._failing = failing

    async def renew(self, held: list[tuple[str, str]]) -> None:
        self.renewed.append(list(held))
        if len(self.renewed) <= self._failing:
            raise ConnectionError("the store went away")
        await super().renew(held)


async def test_a_held_lease_is_renewed_while_its_request_runs(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long request keeps its concurrency slot: the gate renews held leases every third
    of their life (shortened here), so the store never lets them expire under it."""

    lease_seconds = 1.5
    monkeypatch.setattr("toolwire.keys._gate.LEASE_SECONDS", lease_seconds)
    store = RenewalsSeen(clock=clock)
    gate = KeyGate(store, clock=clock)
    alice_key, key = await create_key(store, KeySpec(name="alice", max_concurrent=1), now=clock.now)
    alice = await gate.authenticate(bearer(key))
    lease = await gate.admit(alice, "m")
    assert lease is not None and lease.lease_id is not None
    # renewed within its life (due after a third of it): a renewal due later would come too late
    assert await until(lambda: bool(store.renewed), seconds=lease_seconds)
    assert store.renewed[0] == [(alice_key.id, lease.lease_id)]
    clock.advance(50.0)
    store.renewed.clear()
    assert await until(lambda: bool(store.renewed), seconds=5)
    clock.advance(50.0)  # 100 s since it was taken: past a lease's 60 s, but renewed 50 s ago
    with pytest.raises(RateLimited):
        await gate.admit(alice, "m")
    _, other_key = await create_key(store, KeySpec(name="bob", max_concurrent=1), now=clock.now)
    other = await gate.admit(await gate.authenticate(bearer(other_key)), "m")
    assert other is not None and other.lease_id is not None
    await gate.record(lease, TokenUsage())  # given back: no longer renewed
    store.renewed.clear()
    assert await until(lambda: bool(store.renewed), seconds=5)
    assert [lease_id for _, lease_id in store.renewed[0]] == [other.lease_id]
    await gate.record(other, TokenUsage())
    await gate.aclose()


async def test_a_renewal_that_fails_is_logged_and_the_next_one_still_made(
    clock: Clock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A store that fails a renewal (Redis restarting) costs one round, not the renewals
    of every lease for as long as the gateway runs."""

    monkeypatch.setattr("toolwire.keys._gate.LEASE_SECONDS", 0.3)
    store = RenewalsSeen(clock=clock, failing=1)
    gate = KeyGate(store, clock=clock)
    _, key = await create_key(store, KeySpec(name="alice", max_concurrent=1), now=clock.now)
    lease = await gate.admit(await gate.authenticate(bearer(key)), "m")
    assert lease is not None
    with caplog.at_level(logging.WARNING, logger="toolwire.keys"):
        assert await until(lambda: len(store.renewed) >= 2, seconds=5)  # a renewal after the failed one
    assert len(store.renewed) >= 2 and store.renewed[1] == store.renewed[0]
    assert [record.getMessage() for record in caplog.records if "renewing" in record.getMessage()] == [
        "renewing 1 concurrency leases failed: the store went away"
    ]
    await gate.record(lease, TokenUsage())
    await gate.aclose()


async def test_the_usage_report_lists_each_key_and_model_with_its_status(clock: Clock) -> None:
    from toolwire.keys import KeyNotFound, usage_report

    store = MemoryKeyStore(clock=clock)
    alice, _ = await create_key(store, KeySpec(name="alice", expires="1h"), now=clock.now)
    bob, _ = await create_key(store, KeySpec(name="bob"), now=clock.now)
    await store.settle(bob, None, "m2", TokenUsage(5, 1))
    await store.settle(alice, None, "m1", TokenUsage(3, 2))
    await store.settle(bob, None, "m1", TokenUsage(1, 1))
    rows = await usage_report(store, now=clock.now + 7200)  # alice's key has expired by then
    assert [(r["name"], r["status"], r["model"], r["requests"], r["input_tokens"]) for r in rows] == [
        ("alice", "expired", "m1", 1, 3),
        ("bob", "active", "m1", 1, 1),
        ("bob", "active", "m2", 1, 5),
    ]
    only_bob = await usage_report(store, "bob", now=clock.now)
    assert [(r["name"], r["model"]) for r in only_bob] == [("bob", "m1"), ("bob", "m2")]
    assert alice.expires_at is not None
    expected = "expired" if time.time() >= alice.expires_at else "active"  # without now: the time now
    assert [r["status"] for r in await usage_report(store, "alice")] == [expected]
    with pytest.raises(KeyNotFound) as unknown:
        await usage_report(store, "carol")
    assert unknown.value.message == "No key is named 'carol'."


async def test_usage_that_cannot_be_recorded_is_logged_and_let_go(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    class Broken(MemoryKeyStore):
        async def settle(self, *args: Any, **kwargs: Any) -> None:
            raise ConnectionError("the store went away")

    store = Broken(clock=clock)
    gate = KeyGate(store, clock=clock)
    _, key = await create_key(store, KeySpec(name="alice"), now=clock.now)
    lease = await gate.admit(await gate.authenticate(bearer(key)), "m")
    assert lease is not None
    with caplog.at_level(logging.WARNING, logger="toolwire.keys"):
        gate.record_soon(lease, TokenUsage(1, 1))
        await gate.aclose()  # waits for the recording
    assert [r.getMessage() for r in caplog.records if r.name == "toolwire.keys"] == [
        "recording a key's usage failed: the store went away"
    ]


def test_a_static_keys_owner_is_the_same_in_every_process_and_release() -> None:
    """Stored responses are kept under their owner: were this to change, a static key
    would lose its stored responses across a restart or an upgrade."""
    from toolwire.keys._gate import static_owner

    assert static_owner(b"static-key-one-0001") == "static:26c3029e5c353e4744262b7f3f00d2e4"


def test_every_admin_key_opens_the_admin_api() -> None:
    gate = KeyGate(admin_keys=(b"admin-key-first-01", b"admin-key-second-2"))
    assert gate.is_admin(bearer(b"admin-key-first-01")) and gate.is_admin(bearer(b"admin-key-second-2"))


async def test_who_must_present_a_key(clock: Clock) -> None:
    assert not await KeyGate().requires_key()  # no keys anywhere: an open gateway
    assert await KeyGate(admin_keys=(ADMIN,)).requires_key()  # an admin key alone closes it
    assert await KeyGate(static_keys=STATIC).requires_key()
    store = MemoryKeyStore(clock=clock)
    gate = KeyGate(store, clock=clock)
    assert not await gate.requires_key() and not await gate.requires_key()  # asked twice: the answer is kept a while
    await create_key(store, KeySpec(name="alice"), now=clock.now)
    assert await KeyGate(store, clock=clock).requires_key()


class SlowStore(MemoryKeyStore):
    """A store whose "any keys?" takes a while and can be made to fail; it counts the asks."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.asked = 0
        self.failing = False
        self.answer = asyncio.Event()

    async def has_keys(self) -> bool:
        self.asked += 1
        await self.answer.wait()
        if self.failing:
            raise OSError("the key store's file is gone")
        return await super().has_keys()


async def test_requests_that_ask_together_share_one_look_into_the_store(clock: Clock) -> None:
    store = SlowStore(clock)
    gate = KeyGate(store, clock=clock)
    asking = [asyncio.ensure_future(gate.requires_key()) for _ in range(16)]
    await asyncio.sleep(0.01)
    asking[0].cancel()  # one caller leaves: the others still get their answer
    store.answer.set()
    answers = await asyncio.gather(*asking[1:])
    assert answers == [False] * 15 and store.asked == 1
    assert not await gate.requires_key() and store.asked == 1  # kept a while


async def test_a_failed_look_into_the_store_fails_every_caller_and_the_next_asks_again(clock: Clock) -> None:
    store = SlowStore(clock)
    store.failing = True
    gate = KeyGate(store, clock=clock)
    asking = [asyncio.ensure_future(gate.requires_key()) for _ in range(3)]
    await asyncio.sleep(0.01)
    store.answer.set()
    failures = await asyncio.gather(*asking, return_exceptions=True)
    assert [type(failure) for failure in failures] == [OSError] * 3 and store.asked == 1
    store.failing = False
    await create_key(store, KeySpec(name="alice"), now=clock.now)
    assert await gate.requires_key() and store.asked == 2


async def test_the_key_list_shows_each_key_in_full_and_never_its_secret(clock: Clock) -> None:
    from toolwire.keys import list_keys

    store = MemoryKeyStore(clock=clock)
    alice, alice_key = await create_key(store, KeySpec(name="alice", models=["m"], rpm=1, tpm=2, max_concurrent=3,
                                                      budget_tokens=4, expires="1h"), now=clock.now)  # fmt: skip
    clock.advance(5)
    await revoke_key(store, "alice")
    [shown] = await list_keys(store, now=clock.now + 5)
    assert shown == {
        "name": "alice", "prefix": alice.prefix, "status": "revoked", "models": ["m"], "rpm": 1, "tpm": 2,
        "max_concurrent": 3, "budget_tokens": 4, "created_at": alice.created_at, "expires_at": alice.created_at + 3600,
        "revoked_at": clock.now,
    }  # fmt: skip
    assert alice_key not in repr(shown)
    await create_key(store, KeySpec(name="bob", expires="1h"), now=clock.now)
    later = await list_keys(store, now=clock.now + 7200)
    assert [(k["name"], k["status"]) for k in later] == [("alice", "revoked"), ("bob", "expired")]  # at the time asked


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (b"Bearer abc-123", "abc-123"),
        (b"bearer abc-123", "abc-123"),  # the scheme's case does not matter (RFC 9110)
        (b"BEARER abc-123", "abc-123"),
        (b"Bearer   abc-123  ", "abc-123"),  # one or more spaces after the scheme
        ("Bearer abc-123", "abc-123"),
        (b"Bearer caf\xe9", "caf\xe9"),  # a header's bytes are read as latin-1, never refused
        (b"Basic YWxpY2U6c2VjcmV0", None),
        (b"Bearer", None),
        (b"Bearer    ", None),
        (b"abc-123", None),
        (b"", None),
        (None, None),
    ],
)
def test_the_bearer_token_is_read_from_the_header_as_http_writes_it(header: bytes | str | None, token: str | None) -> None:
    from toolwire.keys._gate import bearer_token

    assert bearer_token(header) == token


async def test_a_stored_key_sent_with_extra_spaces_is_still_the_key(clock: Clock) -> None:
    store = MemoryKeyStore(clock=clock)
    gate = KeyGate(store, clock=clock)
    _, key = await create_key(store, KeySpec(name="alice"), now=clock.now)
    alice = await gate.authenticate(b"Bearer  " + key.encode() + b" ")
    assert alice is not None and alice.name == "alice"


async def test_a_look_into_the_store_that_every_caller_left_fails_quietly(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A caller that gave up (its client went away) does not leave the failure of the
    store's answer to asyncio's "exception was never retrieved" error log."""
    store = SlowStore(clock)
    store.failing = True
    gate = KeyGate(store, clock=clock)
    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        asking = asyncio.ensure_future(gate.requires_key())
        await asyncio.sleep(0.01)
        asking.cancel()
        store.answer.set()
        assert await until(lambda: gate._open_check is None, seconds=5)
        await asyncio.sleep(0)  # the check's done callbacks run
        del asking
        gc.collect()
    assert [record.getMessage() for record in caplog.records if record.name == "asyncio"] == []
    store.failing = False
    assert not await gate.requires_key() and store.asked == 2  # the next caller asks again


async def test_usage_recorded_in_the_background_logs_nothing_and_is_let_go(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryKeyStore(clock=clock)
    gate = KeyGate(store, clock=clock)
    _, key = await create_key(store, KeySpec(name="alice", max_concurrent=3), now=clock.now)
    alice = await gate.authenticate(bearer(key))
    with caplog.at_level(logging.DEBUG, logger="toolwire.keys"):
        for _ in range(3):
            lease = await gate.admit(alice, "m")
            assert lease is not None
            gate.record_soon(lease, TokenUsage(1, 2))
        assert await until(lambda: not gate._recording, seconds=5)  # a long-running gateway keeps none of them
    assert [record.getMessage() for record in caplog.records if record.name == "toolwire.keys"] == []
    [row] = await store.usage()
    assert (row.requests, row.input_tokens, row.output_tokens) == (3, 3, 6)
    await gate.aclose()


async def test_closing_waits_a_while_for_usage_being_recorded_then_closes_the_store(
    clock: Clock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A store that hangs holds the gateway's shutdown for ``RECORDING_GRACE_SECONDS`` at
    most (shortened here); the store is closed after it (its file let go)."""

    class Hanging(SQLiteKeyStore):
        async def settle(self, *args: Any, **kwargs: Any) -> None:
            await asyncio.Event().wait()

    monkeypatch.setattr("toolwire.keys._gate.RECORDING_GRACE_SECONDS", 0.2)
    path = tmp_path / "keys.sqlite3"
    store = Hanging(path, clock=clock)
    gate = KeyGate(store, clock=clock)
    _, key = await create_key(store, KeySpec(name="alice"), now=clock.now)
    lease = await gate.admit(await gate.authenticate(bearer(key)), "m")
    assert lease is not None
    assert open_descriptors_of(path)
    gate.record_soon(lease, TokenUsage(1, 1))
    await asyncio.wait_for(gate.aclose(), timeout=5)
    assert open_descriptors_of(path) == []
