"""The Redis store against a real ``redis-server``: what only a shared, remote store can do
wrong. Redis restarting mid-test must cost requests a quick ``StoreUnavailable`` (503)
during the outage, and nothing once it is back."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.agent.processes import wait_until_stopped
from tests.reliability.helpers import wait_until
from toolwire.store import InputNotWhole, PreviousResponseNotFound, StoreUnavailable, open_store
from toolwire.store import RedisServer as RedisServerConnection
from toolwire.store._base import encode_record
from toolwire.store._redis import RedisResponseStore
from toolwire.store._redis_server import DEFAULT_SOCKET_TIMEOUT_SECONDS

from .records import exchange, resent, texts
from .redis_server import RedisServer, free_port

ROOT = Path(__file__).resolve().parents[2]


async def test_a_restart_costs_a_quick_503_during_the_outage_then_nothing(fresh_redis: RedisServer) -> None:
    store = open_store(fresh_redis.url, ttl_seconds=3600, max_entries=100)
    try:
        await store.put(exchange("resp_1", "before"))
        assert await store.get("resp_1") is not None

        fresh_redis.stop()
        operations: dict[str, Callable[[], Awaitable[object]]] = {
            "put": lambda: store.put(exchange("resp_2", "during")),
            "get": lambda: store.get("resp_1"),
            "delete": lambda: store.delete("resp_1"),
            "chain_input": lambda: store.chain_input("resp_1"),
        }
        for operation in operations.values():
            with pytest.raises(StoreUnavailable) as caught:
                async with asyncio.timeout(30):  # an error, not a hang
                    await operation()
            assert caught.value.status == 503
            assert fresh_redis.url in caught.value.message
            assert caught.value.to_body()["error"]["type"] == "service_unavailable"

        fresh_redis.start()  # same port; no persistence, so it comes back empty
        await store.put(exchange("resp_3", "after"))
        await store.put(exchange("resp_4", "again", previous="resp_3"))
        assert texts(await store.chain_input("resp_4"))[-1] == "assistant: re: again"
        assert await store.get("resp_1") is None
    finally:
        if not fresh_redis.running:
            fresh_redis.start()
        await store.aclose()


async def test_the_first_command_after_a_restart_succeeds(fresh_redis: RedisServer) -> None:
    # Pooled connections die with the server; the next command must not fail on one.
    store = open_store(fresh_redis.url, ttl_seconds=3600, max_entries=100)
    try:
        await store.put(exchange("resp_1", "before"))
        fresh_redis.stop()
        fresh_redis.start()
        await store.put(exchange("resp_2", "after"))
        assert await store.get("resp_2") is not None
    finally:
        await store.aclose()


async def test_a_hung_server_costs_a_bounded_wait_not_a_hang(fresh_redis: RedisServer) -> None:
    store = RedisResponseStore(fresh_redis.url, ttl_seconds=60, max_entries=10, socket_timeout=0.5)
    try:
        await store.put(exchange("resp_1", "before"))
        fresh_redis.pause()
        try:
            with pytest.raises(StoreUnavailable, match="unreachable"):
                async with asyncio.timeout(30):  # the socket timeout ends it; without one it hangs
                    await store.get("resp_1")
        finally:
            fresh_redis.resume()
        assert await store.get("resp_1") is not None
    finally:
        await store.aclose()


async def test_an_unreachable_store_is_named_without_its_password() -> None:
    port = free_port()
    url = f"redis://toolwire:s3cret-pass@127.0.0.1:{port}/2"
    store = open_store(url, ttl_seconds=60, max_entries=10)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await store.get("resp_1")
    finally:
        await store.aclose()
    message = caught.value.message
    assert "s3cret" not in message and "s3cret" not in repr(store)
    assert f"The response store redis://toolwire:***@127.0.0.1:{port}/2 is unreachable" in message
    assert isinstance(caught.value.__cause__, redis.ConnectionError)


async def test_records_carry_a_redis_ttl_and_the_index_stays_bounded(fresh_redis: RedisServer) -> None:
    store = open_store(fresh_redis.url, ttl_seconds=60, max_entries=5)
    try:
        for n in range(20):
            await store.put(exchange(f"resp_{n}", str(n)))
    finally:
        await store.aclose()
    with redis.Redis.from_url(fresh_redis.url) as client:
        keys = sorted(key.decode() for key in client.keys("*"))
        assert keys == ["toolwire:response-bytes", "toolwire:response-sizes",
                        "toolwire:response:resp_15", "toolwire:response:resp_16", "toolwire:response:resp_17",
                        "toolwire:response:resp_18", "toolwire:response:resp_19", "toolwire:responses"]  # fmt: skip
        assert 0 < client.pttl("toolwire:response:resp_19") <= 60_000
        assert client.zcard("toolwire:responses") == 5
        sizes = {key.decode(): int(size) for key, size in client.hgetall("toolwire:response-sizes").items()}
        assert sizes == {f"resp_{n}": client.hstrlen(f"toolwire:response:resp_{n}", "record") for n in range(15, 20)}
        assert int(client.get("toolwire:response-bytes")) == sum(sizes.values())  # no PEXPIRE: they go with their ids
        assert client.pttl("toolwire:response-sizes") == client.pttl("toolwire:response-bytes") == -1


async def test_expired_ids_leave_the_index_on_the_next_write(fresh_redis: RedisServer) -> None:
    store = open_store(fresh_redis.url, ttl_seconds=0.2, max_entries=None)
    try:
        for n in range(4):
            await store.put(exchange(f"resp_{n}", str(n)))
        await store.put(resent("resp_4", "4", on=exchange("resp_3", "3"), items_before=1))  # resp_3's builders: a set
        with redis.Redis.from_url(fresh_redis.url) as client:
            assert wait_until(lambda: client.exists(*[f"toolwire:response:resp_{n}" for n in range(5)]) == 0, timeout=30)
            assert client.zcard("toolwire:responses") == 5  # expired, still indexed
            assert client.exists("toolwire:response-builders:resp_3")  # (it has no time to live of its own)
        await store.put(exchange("resp_last", "last"))
    finally:
        await store.aclose()
    with redis.Redis.from_url(fresh_redis.url) as client:
        assert client.zrange("toolwire:responses", 0, -1) == [b"resp_last"]
        assert client.keys("toolwire:response-builders:*") == []


async def test_records_written_before_the_sizes_count_for_nothing_and_leave_the_count_right(
    fresh_redis: RedisServer,
) -> None:
    with redis.Redis.from_url(fresh_redis.url) as client:  # as a toolwire of 2026-12-04 wrote it
        client.hset("toolwire:response:resp_old", mapping={"record": encode_record(exchange("resp_old", "old")), "prev": ""})
        client.zadd("toolwire:responses", {"resp_old": 1})
    store = RedisResponseStore(fresh_redis.url, ttl_seconds=None, max_entries=2)
    try:
        new = exchange("resp_new", "new")
        await store.put(new)
        assert await store.get("resp_old") is not None
        assert await store.stored_bytes() == len(encode_record(new))
        assert await store.delete("resp_old")
        await store.put(exchange("resp_next", "next"))
        await store.put(exchange("resp_last", "last"))  # resp_new goes, beyond two entries
        assert await store.stored_bytes() == sum(
            len(encode_record(exchange(name, text))) for name, text in (("resp_next", "next"), ("resp_last", "last"))
        )
    finally:
        await store.aclose()


async def test_an_unreachable_store_says_why_in_the_drivers_words() -> None:
    port = free_port()
    store = RedisResponseStore(f"redis://127.0.0.1:{port}/0", ttl_seconds=60, max_entries=10)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await store.get("resp_1")
    finally:
        await store.aclose()
    message = caught.value.message
    assert message.startswith(f"The response store redis://127.0.0.1:{port}/0 is unreachable (ConnectionError: Error ")
    assert message.endswith(")).") and not message.endswith(".).")  # the driver's own period is not doubled
    assert repr(store) == f"RedisResponseStore('redis://127.0.0.1:{port}/0')"


async def test_a_redis_out_of_memory_is_a_503_saying_so(fresh_redis: RedisServer) -> None:
    store = RedisResponseStore(fresh_redis.url, ttl_seconds=60, max_entries=10)
    with redis.Redis.from_url(fresh_redis.url) as admin:
        admin.config_set("maxmemory", 1)
        try:
            with pytest.raises(StoreUnavailable) as caught:
                await store.put(exchange("resp_1", "hello"))
        finally:
            admin.config_set("maxmemory", 0)
            await store.aclose()
        assert admin.keys("*") == []  # refused before anything was written: nothing counted
    message = caught.value.message
    assert message.startswith(f"The response store {fresh_redis.url} failed: ")
    assert "command not allowed when used memory > 'maxmemory'" in message
    assert message.endswith(".") and not message.endswith("..")  # Redis's own period is not doubled


async def test_a_failing_redis_is_tried_twice_a_command_no_more() -> None:
    """One quick retry on a fresh connection (which heals what a restart broke), then 503:
    a server that drops every connection sees exactly two per command."""
    connections = 0

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        writer.close()

    server = await asyncio.start_server(drop, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = RedisResponseStore(f"redis://127.0.0.1:{port}/0", ttl_seconds=60, max_entries=10)
    try:
        for expected in (2, 4):
            with pytest.raises(StoreUnavailable, match="unreachable"):
                await store.get("resp_1")
            assert connections == expected
    finally:
        await store.aclose()
        server.close()
        await server.wait_closed()


def test_the_client_waits_a_bounded_time_for_a_connection_and_an_answer() -> None:
    server = RedisServerConnection("redis://127.0.0.1:6379/0", what="response store")
    settings = server.client.connection_pool.connection_kwargs
    assert (settings["socket_timeout"], settings["socket_connect_timeout"]) == (DEFAULT_SOCKET_TIMEOUT_SECONDS,) * 2
    assert settings["decode_responses"] is False  # records are bytes, decoded by orjson


def test_a_failed_command_is_retried_once_a_tenth_of_a_second_later() -> None:
    server = RedisServerConnection("redis://127.0.0.1:6379/0", what="response store")
    retry = server.client.get_retry()
    assert retry is not None and retry.get_retries() == 1
    assert retry._backoff.compute(1) == pytest.approx(0.1)  # redis-py waits compute(failures) before a retry


def test_a_paused_server_dies_with_a_test_process_killed_from_outside(tmp_path: Path) -> None:
    # Mutation testing's timeout SIGKILLs a test that hangs; no teardown runs then, and a
    # server the test had paused would stay behind, stopped, holding its port and memory.
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from tests.store.redis_server import RedisServer\n"
        "server = RedisServer(Path(sys.argv[1]))\n"
        "server.start()\n"
        "server.pause()\n"
        "print(server._process.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, timeout=60, cwd=ROOT)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    server_pid = int(killed.stdout)
    died = wait_until_stopped(server_pid, timeout=10)
    if not died:
        os.kill(server_pid, signal.SIGKILL)  # not left behind by this test either
    assert died, f"redis-server {server_pid} outlived the test process that started it"




async def test_a_deletion_spliced_while_another_gateway_builds_on_the_record_starts_again(
    fresh_redis: RedisServer,
) -> None:
    # The splice is made here, between two calls of the script: a record building on the
    # deleted one that another gateway writes in between must get its items too.
    store = open_store(fresh_redis.url, ttl_seconds=3600, max_entries=100)
    other = open_store(fresh_redis.url, ttl_seconds=3600, max_entries=100)
    assert isinstance(store, RedisResponseStore)
    first = exchange("resp_1", "q1")
    try:
        await store.put(first)
        await store.put(resent("resp_2", "q2", on=first, items_before=1))
        script, calls = store._delete_script, 0

        async def interleaved(**arguments: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 2:  # after the first answer, before the splice is applied
                assert await other.put(resent("resp_2b", "q2 again", on=first, items_before=1))
            return await script(**arguments)

        store._delete_script = interleaved  # type: ignore[assignment]
        assert await store.delete("resp_1") is True
        assert calls == 3
        for response_id, last in (("resp_2", "user: q2"), ("resp_2b", "user: q2 again")):
            record = await store.get(response_id)
            assert record is not None and record.input_base is None
            assert texts(await store.input_of(record)) == ["user: q1", "assistant: re: q1", last]
    finally:
        await store.aclose()
        await other.aclose()


async def test_a_deletion_that_keeps_being_raced_gives_up_with_a_503(fresh_redis: RedisServer) -> None:
    store = open_store(fresh_redis.url, ttl_seconds=3600, max_entries=100)
    assert isinstance(store, RedisResponseStore)
    first = exchange("resp_1", "q1")
    try:
        await store.put(first)
        script, calls = store._delete_script, 0

        async def raced(**arguments: Any) -> Any:
            nonlocal calls
            calls += 1
            assert await store.put(resent(f"resp_{calls}b", "again", on=first, items_before=1))
            return await script(**arguments)

        store._delete_script = raced  # type: ignore[assignment]
        with pytest.raises(StoreUnavailable) as caught:
            await store.delete("resp_1")
        assert calls == 5
        assert caught.value.message == (
            f"The response store {fresh_redis.url} kept changing the responses built on 'resp_1' while it "
            "was being deleted."
        )
        assert await store.get("resp_1") is not None  # nothing deleted, nothing spliced
        assert (await store.get("resp_1b")).input_base == "resp_1"
    finally:
        await store.aclose()


async def test_records_building_on_a_key_redis_dropped_by_itself_stay_as_they_are(fresh_redis: RedisServer) -> None:
    store = open_store(fresh_redis.url, ttl_seconds=3600, max_entries=100)
    first = exchange("resp_1", "q1")
    try:
        await store.put(first)
        await store.put(resent("resp_2", "q2", on=first, items_before=1))
        await store.put(resent("resp_2b", "q2 again", on=first, items_before=1))
        with redis.Redis.from_url(fresh_redis.url) as client:
            client.delete("toolwire:response:resp_1")  # its own eviction (maxmemory), say
        assert await store.delete("resp_1") is False
        for response_id in ("resp_2", "resp_2b"):
            later = await store.get(response_id)
            assert later is not None and later.input_base == "resp_1"
            with pytest.raises(InputNotWhole) as caught:
                await store.input_of(later)
            assert caught.value.missing_id == "resp_1"
            with pytest.raises(PreviousResponseNotFound) as gap:  # its link kept too
                await store.chain_ids(response_id)
            assert gap.value.missing_id == "resp_1"
    finally:
        await store.aclose()


async def test_deleting_every_record_leaves_no_key_behind_but_the_counts(fresh_redis: RedisServer) -> None:
    store = open_store(fresh_redis.url, ttl_seconds=3600, max_entries=100)
    records = [exchange("resp_1", "q1")]
    try:
        await store.put(records[0])
        for n in range(2, 5):
            records.append(resent(f"resp_{n}", f"q{n}", on=records[-1], items_before=2 * n - 3))
            await store.put(records[-1])
        with redis.Redis.from_url(fresh_redis.url) as client:
            assert client.smembers("toolwire:response-builders:resp_1") == {b"resp_2"}
            for record in (records[1], records[0], records[3], records[2]):
                assert await store.delete(record.id) is True
            assert sorted(client.keys("*")) == [b"toolwire:response-bytes"]
            assert client.get("toolwire:response-bytes") == b"0"
    finally:
        await store.aclose()
