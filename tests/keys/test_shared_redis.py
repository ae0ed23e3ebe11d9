"""Two real gateway processes sharing one real Redis, as behind a load balancer: one
key's limits count once across both, a revocation is refused by both at once, usage
adds up, responses stay their owner's, and a Redis that is gone is a clear 503."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from itertools import cycle, islice
from pathlib import Path

import httpx
import orjson
import pytest

from tests.store.redis_server import RedisServer
from tests.support.chat_upstream import ChatUpstream, Stall, Text
from tests.support.gateway import GatewayProcess

from .conftest import start_redis
from .gateways import (
    KEY_ARGS,
    KEY_ENV,
    STATIC_KEY,
    Issued,
    auth,
    keys_cli,
    open_stream,
    respond,
    wait_for,
    wait_for_requests,
)


@pytest.fixture(scope="module")
def shared_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_redis(tmp_path_factory.mktemp("shared-redis"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def gateways(
    _session_upstream: ChatUpstream, shared_redis: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GatewayProcess, GatewayProcess]]:
    directory = tmp_path_factory.mktemp("shared-gateways")
    first, second = (
        GatewayProcess(
            _session_upstream.base_url, directory / f"{side}.log", *KEY_ARGS, "--store", shared_redis.url, env=KEY_ENV
        )
        for side in ("a", "b")
    )
    with first, second:
        yield first, second


@pytest.fixture(scope="module")
def issued() -> Issued:
    return Issued()


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_two_gateways_give_a_key_its_requests_per_minute_once(
    gateways: tuple[GatewayProcess, GatewayProcess], upstream: ChatUpstream, issued: Issued
) -> None:
    upstream.responder = lambda body: Text("ok")
    key = issued.issue(gateways[0], unique("balanced"), rpm=3)
    statuses = [respond(gateway, key).status_code for gateway in islice(cycle(gateways), 8)]
    assert sorted(statuses) == [200] * 3 + [429] * 5
    assert len(upstream.chat_requests) == 3


def test_two_gateways_give_a_key_its_concurrency_once(
    gateways: tuple[GatewayProcess, GatewayProcess], upstream: ChatUpstream, issued: Issued
) -> None:
    first, second = gateways
    key = issued.issue(first, unique("single"), max_concurrent=1)
    upstream.enqueue(Stall(after_chunks=2, seconds=60, reply=Text("held open for a while")))
    with open_stream(first, key) as until:
        until("response.output_text.delta")
        refused = respond(second, key)
        assert refused.status_code == 429, refused.text
        assert "concurrent requests (max_concurrent): limit 1" in refused.json()["error"]["message"]
    upstream.responder = lambda body: Text("now")
    wait_for(lambda: respond(second, key).status_code == 200, "the lease taken on one gateway to be given back")


def test_a_revocation_is_refused_by_every_gateway_at_once(
    gateways: tuple[GatewayProcess, GatewayProcess], upstream: ChatUpstream, shared_redis: RedisServer, issued: Issued
) -> None:
    upstream.responder = lambda body: Text("ok")
    name = unique("gone")
    created = keys_cli("create", name, "--store", shared_redis.url)
    assert created.returncode == 0, created.stderr
    key = issued.remember(created.stdout.splitlines()[-1])
    assert [respond(gateway, key).status_code for gateway in gateways] == [200, 200]
    assert keys_cli("revoke", name, "--store", shared_redis.url).returncode == 0
    for gateway in gateways:
        answer = respond(gateway, key)
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["message"] == f"The key '{name}' ({key[:12]}) was revoked."


def test_usage_from_both_gateways_adds_up(
    gateways: tuple[GatewayProcess, GatewayProcess], upstream: ChatUpstream, shared_redis: RedisServer, issued: Issued
) -> None:
    name = unique("everywhere")
    key = issued.issue(gateways[1], name)
    upstream.responder = lambda body: Text("counted", usage={"prompt_tokens": 20, "completion_tokens": 5})
    for gateway in gateways:
        assert respond(gateway, key).status_code == 200
        assert respond(gateway, key, stream=True).status_code == 200
    [row] = wait_for_requests(gateways[0], name, 4)
    assert (row["requests"], row["input_tokens"], row["output_tokens"]) == (4, 80, 20)
    listed = keys_cli("usage", name, "--json", "--store", shared_redis.url)
    assert [(r["model"], r["requests"]) for r in orjson.loads(listed.stdout)] == [("m", 4)]


def test_a_response_is_shared_by_the_gateways_and_kept_from_other_keys(
    gateways: tuple[GatewayProcess, GatewayProcess], upstream: ChatUpstream, issued: Issued
) -> None:
    first, second = gateways
    upstream.responder = lambda body: Text("for alice only")
    alice, bob = issued.issue(first, unique("alice")), issued.issue(first, unique("bob"))
    response_id = respond(first, alice).json()["id"]
    url = f"{second.base_url}/responses/{response_id}"
    assert httpx.get(url, headers=auth(bob), timeout=30).status_code == 404
    assert httpx.get(url + "/input_items", headers=auth(bob), timeout=30).status_code == 404
    assert respond(second, bob, previous_response_id=response_id).status_code == 404
    assert httpx.get(url, headers=auth(alice), timeout=30).status_code == 200
    assert respond(second, alice, previous_response_id=response_id).status_code == 200


def test_an_unreachable_store_is_a_clear_503(
    gateways: tuple[GatewayProcess, GatewayProcess], upstream: ChatUpstream, shared_redis: RedisServer, issued: Issued, tmp_path: Path
) -> None:
    upstream.responder = lambda body: Text("ok")
    key = issued.issue(gateways[0], unique("stranded"))
    assert respond(gateways[0], key).status_code == 200
    shared_redis.stop()
    try:
        for gateway in gateways:
            answer = respond(gateway, key)
            assert answer.status_code == 503, answer.text
            error = answer.json()["error"]
            assert error["code"] == "store_unavailable"
            assert error["message"].startswith(f"The key store redis://127.0.0.1:{shared_redis.port}/0 is unreachable")
            assert "Traceback" not in answer.text and key not in answer.text
            assert respond(gateway, STATIC_KEY, store=False).status_code == 200  # static keys need no store
        listed = keys_cli("list", "--store", shared_redis.url)
        assert listed.returncode == 1 and "is unreachable" in listed.stderr
    finally:
        shared_redis.start()  # empty, on the same port: the module's other tests do not depend on running first
    for gateway in gateways:
        log = gateway.log()
        assert key not in log and key[13:] not in log
