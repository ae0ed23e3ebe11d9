"""Client keys through a real ``toolwire serve`` on a real SQLite file: every rule.

The module's gateway has a static key (``--api-key-env``), an admin key
(``--admin-key-env``), a capture directory, the inspector and debug logging; keys of
its store are issued over the admin API or with ``toolwire keys``. The last test reads
every byte the gateway wrote and finds none of the keys issued here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.chat_upstream import ChatUpstream, Raw, Stall, Text
from tests.support.gateway import GatewayProcess

from .gateways import (
    ADMIN_KEY,
    KEY_ARGS,
    KEY_ENV,
    STATIC_KEY,
    Issued,
    auth,
    chat_chunk,
    keys_cli,
    open_stream,
    respond,
    stream_events,
    usage_rows,
    wait_for,
    wait_for_requests,
)

USAGE = {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}


@pytest.fixture(scope="module")
def issued() -> Issued:
    return Issued()


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("keys-gateway")


@pytest.fixture(scope="module")
def gateway(_session_upstream: ChatUpstream, directory: Path) -> Iterator[GatewayProcess]:
    config = directory / "toolwire.toml"
    config.write_text(f'[server]\ncapture_dir = "{directory / "capture"}"\n')
    process = GatewayProcess(
        _session_upstream.base_url,
        directory / "gateway.log",
        *KEY_ARGS,
        "--inspector",
        "--log-level",
        "debug",
        "--config",
        str(config),
        env=KEY_ENV,
    )
    with process:
        yield process


def store_url(gateway: GatewayProcess) -> str:
    return f"sqlite:///{gateway.log_path.with_suffix('.sqlite3')}"


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def error_of(answer: httpx.Response, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    error: dict[str, Any] = answer.json()["error"]
    return error


# ---------------------------------------------------------------- who may call


def test_requests_need_a_valid_key(gateway: GatewayProcess, upstream: ChatUpstream, issued: Issued) -> None:
    upstream.responder = lambda body: Text("hello")
    unknown = "twk_abcdefgh_" + "A" * 40
    for key in (None, unknown, "not-a-key", ADMIN_KEY):
        answer = respond(gateway, key)
        assert error_of(answer, 401)["code"] == "invalid_api_key"
        assert answer.headers["www-authenticate"] == "Bearer"
    for path in ("/responses/resp_x", "/models"):
        assert httpx.get(gateway.base_url + path, timeout=30).status_code == 401
    assert upstream.chat_requests == []
    assert respond(gateway, STATIC_KEY).status_code == 200
    key = issued.issue(gateway, unique("caller"))
    assert respond(gateway, key).status_code == 200
    assert respond(gateway, key[:-1] + ("x" if key[-1] != "x" else "y")).status_code == 401


def test_a_key_may_use_only_its_models(gateway: GatewayProcess, upstream: ChatUpstream, issued: Issued) -> None:
    upstream.responder = lambda body: Text("cheap answer")
    name = unique("cheap")
    key = issued.issue(gateway, name, models=["cheap-model"])
    answer = respond(gateway, key, model="expensive-model")
    error = error_of(answer, 403)
    assert error["code"] == "model_not_allowed" and error["param"] == "model"
    assert "'expensive-model'" in error["message"] and f"'{name}'" in error["message"]
    assert key not in answer.text
    assert upstream.chat_requests == []
    assert respond(gateway, key, model="cheap-model").status_code == 200
    assert respond(gateway, STATIC_KEY, model="expensive-model").status_code == 200  # static: no limits


def test_requests_per_minute(gateway: GatewayProcess, upstream: ChatUpstream, issued: Issued) -> None:
    upstream.responder = lambda body: Text("ok")
    key = issued.issue(gateway, unique("rpm"), rpm=2)
    assert [respond(gateway, key).status_code for _ in range(2)] == [200, 200]
    answer = respond(gateway, key)
    error = error_of(answer, 429)
    assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
    assert "requests per minute (rpm): limit 2" in error["message"]
    assert 1 <= int(answer.headers["retry-after"]) <= 30
    with httpx.stream(
        "POST", gateway.base_url + "/responses", json={"model": "m", "input": "hi", "stream": True}, headers=auth(key)
    ) as streamed:
        assert streamed.status_code == 429  # refused before any stream began
    assert len(upstream.chat_requests) == 2


def test_tokens_per_minute(gateway: GatewayProcess, upstream: ChatUpstream, issued: Issued) -> None:
    name = unique("tpm")
    key = issued.issue(gateway, name, tpm=40)
    upstream.enqueue(Text("a long answer", usage=USAGE))
    assert respond(gateway, key).status_code == 200  # one token left was enough to start
    wait_for_requests(gateway, name, 1)
    answer = respond(gateway, key)
    error = error_of(answer, 429)
    assert (error["type"], error["code"]) == ("tokens", "rate_limit_exceeded")
    assert "tokens per minute (tpm): limit 40" in error["message"]
    assert int(answer.headers["retry-after"]) >= 30  # 20 tokens in debt + 1, at 40 a minute
    assert len(upstream.chat_requests) == 1


def test_concurrent_requests_and_the_lease_given_back_when_the_exchange_ends(
    gateway: GatewayProcess, upstream: ChatUpstream, issued: Issued
) -> None:
    key = issued.issue(gateway, unique("one-at-a-time"), max_concurrent=1)
    upstream.enqueue(Stall(after_chunks=2, seconds=60, reply=Text("a slow answer that stalls")))
    with open_stream(gateway, key) as until:
        until("response.output_text.delta")
        answer = respond(gateway, key)
        error = error_of(answer, 429)
        assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
        assert "concurrent requests (max_concurrent): limit 1" in error["message"]
        assert answer.headers["retry-after"] == "1"
    upstream.responder = lambda body: Text("your turn")
    # The client cut its stream: the exchange ends, and its lease with it.
    wait_for(lambda: respond(gateway, key).status_code == 200, "the concurrency slot to be given back")


def test_a_spent_budget_is_insufficient_quota(gateway: GatewayProcess, upstream: ChatUpstream, issued: Issued) -> None:
    name = unique("budget")
    key = issued.issue(gateway, name, budget_tokens=55)
    upstream.enqueue(Text("expensive", usage=USAGE))
    assert respond(gateway, key).status_code == 200
    wait_for_requests(gateway, name, 1)
    for answer in (respond(gateway, key), respond(gateway, key, stream=True)):
        error = error_of(answer, 429)
        assert (error["type"], error["code"]) == ("insufficient_quota", "insufficient_quota")
        assert "budget of 55 tokens" in error["message"] and f"'{name}'" in error["message"]
        assert "retry-after" not in answer.headers
    assert len(upstream.chat_requests) == 1


def test_an_expired_key_is_refused(gateway: GatewayProcess, upstream: ChatUpstream, issued: Issued) -> None:
    upstream.responder = lambda body: Text("ok")
    name = unique("short-lived")
    key = issued.issue(gateway, name, expires="1s")
    error = wait_for(
        lambda: (answer := respond(gateway, key)).status_code == 401 and answer.json()["error"],
        "the key to expire",
    )
    assert error["code"] == "invalid_api_key" and f"The key '{name}'" in error["message"] and "expired at" in error["message"]


def test_revoking_with_the_cli_is_seen_by_the_running_gateway_at_once(
    gateway: GatewayProcess, upstream: ChatUpstream, issued: Issued
) -> None:
    upstream.responder = lambda body: Text("ok")
    name = unique("leaver")
    created = keys_cli("create", name, "--store", store_url(gateway))
    assert created.returncode == 0, created.stderr
    key = issued.remember(created.stdout.splitlines()[-1])
    assert respond(gateway, key).status_code == 200
    revoked = keys_cli("revoke", name, "--store", store_url(gateway))
    assert revoked.returncode == 0, revoked.stderr
    error = error_of(respond(gateway, key), 401)  # the very next request
    assert f"The key '{name}'" in error["message"] and "was revoked" in error["message"]


# ---------------------------------------------------------------- what was used


def test_usage_counts_answers_and_streams_per_model(gateway: GatewayProcess, upstream: ChatUpstream, issued: Issued) -> None:
    name = unique("counted")
    key = issued.issue(gateway, name)
    upstream.enqueue(
        Text("one", usage={"prompt_tokens": 11, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 3}}),
        Text("two", usage={"prompt_tokens": 7, "completion_tokens": 2}),
        Text("three", usage={"prompt_tokens": 100, "completion_tokens": 1}),
    )
    assert respond(gateway, key, model="model-a").status_code == 200
    events = stream_events(gateway, key, model="model-a")
    assert events[-1]["type"] == "response.completed"
    assert respond(gateway, key, model="model-b").status_code == 200
    wait_for_requests(gateway, name, 3)
    listed = keys_cli("usage", name, "--json", "--store", store_url(gateway))
    assert listed.returncode == 0, listed.stderr
    import orjson

    rows = {row["model"]: row for row in orjson.loads(listed.stdout)}
    assert set(rows) == {"model-a", "model-b"}
    a, b = rows["model-a"], rows["model-b"]
    assert (a["requests"], a["input_tokens"], a["output_tokens"], a["cached_tokens"]) == (2, 18, 7, 3)
    assert (b["requests"], b["input_tokens"], b["output_tokens"], b["cached_tokens"]) == (1, 100, 1, 0)
    assert a["name"] == name and a["prefix"] == key[:12] and a["status"] == "active" and a["last_used_at"] > 0
    table = keys_cli("usage", "--store", store_url(gateway))
    assert name in table.stdout and key not in table.stdout


def test_a_stream_the_client_cut_is_still_counted(gateway: GatewayProcess, upstream: ChatUpstream, issued: Issued) -> None:
    name = unique("impatient")
    key = issued.issue(gateway, name)
    # A backend that reports usage as it goes (vLLM's continuous usage), then stalls.
    upstream.enqueue(Raw([chat_chunk("partial answer", usage={"prompt_tokens": 17, "completion_tokens": 3})], linger=60))
    with open_stream(gateway, key) as until:
        until("response.output_text.delta")
    [row] = wait_for_requests(gateway, name, 1)
    assert (row["requests"], row["input_tokens"], row["output_tokens"]) == (1, 17, 3)


def test_metrics_by_key_name(gateway: GatewayProcess, upstream: ChatUpstream, issued: Issued) -> None:
    name = unique("measured")
    key = issued.issue(gateway, name, models=["m"])
    upstream.enqueue(Text("measured", usage=USAGE))
    assert respond(gateway, key).status_code == 200
    assert respond(gateway, key, model="other").status_code == 403
    assert respond(gateway, STATIC_KEY).status_code != 401
    metrics = httpx.get(gateway.url + "/metrics", timeout=30).text
    assert f'toolwire_key_requests_total{{key="{name}",model="m",status="200"}} 1.0' in metrics
    assert f'toolwire_key_requests_total{{key="{name}",model="other",status="403"}} 1.0' in metrics
    assert f'toolwire_key_tokens_total{{key="{name}",kind="input",model="m"}} 50.0' in metrics
    assert f'toolwire_key_tokens_total{{key="{name}",kind="output",model="m"}} 10.0' in metrics
    assert 'toolwire_key_requests_total{key="static"' in metrics
    assert key not in metrics and key[:12] not in metrics


# ---------------------------------------------------------------- whose responses


def test_stored_responses_belong_to_the_key_that_made_them(
    gateway: GatewayProcess, upstream: ChatUpstream, issued: Issued
) -> None:
    upstream.responder = lambda body: Text("private answer")
    alice = issued.issue(gateway, unique("alice"))
    bob = issued.issue(gateway, unique("bob"))
    created = respond(gateway, alice, input="my secret plan")
    assert created.status_code == 200
    response_id = created.json()["id"]
    url = f"{gateway.base_url}/responses/{response_id}"
    for other in (bob, STATIC_KEY):
        for method, path in (("GET", ""), ("GET", "/input_items"), ("DELETE", "")):
            answer = httpx.request(method, url + path, headers=auth(other), timeout=30)
            error = error_of(answer, 404)
            assert error["message"] == f"Response with id '{response_id}' not found."
        continued = respond(gateway, other, previous_response_id=response_id)
        assert error_of(continued, 404)["code"] == "previous_response_not_found"
    assert "my secret plan" not in str(upstream.chat_requests[1:])
    assert httpx.get(url, headers=auth(alice), timeout=30).json()["id"] == response_id  # bob's DELETE did nothing
    assert httpx.get(url + "/input_items", headers=auth(alice), timeout=30).status_code == 200
    assert respond(gateway, alice, previous_response_id=response_id).status_code == 200
    assert httpx.delete(url, headers=auth(alice), timeout=30).json()["deleted"] is True
    static_created = respond(gateway, STATIC_KEY).json()["id"]
    assert httpx.get(f"{gateway.base_url}/responses/{static_created}", headers=auth(alice), timeout=30).status_code == 404
    assert httpx.get(f"{gateway.base_url}/responses/{static_created}", headers=auth(STATIC_KEY), timeout=30).status_code == 200


# ---------------------------------------------------------------- the admin API


def test_the_admin_api_needs_the_admin_key(gateway: GatewayProcess, issued: Issued) -> None:
    client_key = issued.issue(gateway, unique("not-admin"))
    for headers in ({}, auth(STATIC_KEY), auth(client_key), auth("wrong")):
        for method, path in (("GET", "/admin/keys"), ("POST", "/admin/keys"), ("DELETE", "/admin/keys/x"), ("GET", "/admin/usage")):
            answer = httpx.request(method, gateway.url + path, json={"name": "intruder"}, headers=headers, timeout=30)
            assert error_of(answer, 401)["code"] == "invalid_admin_key"
    assert "intruder" not in httpx.get(gateway.url + "/admin/keys", headers=auth(ADMIN_KEY), timeout=30).text


def test_the_admin_api_creates_lists_and_revokes(gateway: GatewayProcess, upstream: ChatUpstream, issued: Issued) -> None:
    upstream.responder = lambda body: Text("ok")
    name = unique("automated")
    admin = auth(ADMIN_KEY)
    key = issued.issue(gateway, name, models=["m"], rpm=100, tpm=10_000, max_concurrent=4, budget_tokens=10**6, expires="30d")
    assert respond(gateway, key).status_code == 200
    listing = httpx.get(gateway.url + "/admin/keys", headers=admin, timeout=30)
    assert listing.headers["cache-control"] == "no-store"
    [described] = [entry for entry in listing.json()["data"] if entry["name"] == name]
    assert described["prefix"] == key[:12] and described["status"] == "active" and described["models"] == ["m"]
    assert (described["rpm"], described["tpm"], described["max_concurrent"], described["budget_tokens"]) == (100, 10_000, 4, 10**6)
    assert set(described) == {
        "name", "prefix", "status", "models", "rpm", "tpm", "max_concurrent", "budget_tokens",
        "created_at", "expires_at", "revoked_at",
    }
    taken = httpx.post(gateway.url + "/admin/keys", json={"name": name}, headers=admin, timeout=30)
    assert error_of(taken, 409)["code"] == "key_name_taken"
    bad = httpx.post(gateway.url + "/admin/keys", json={"name": "x", "rpm": 0}, headers=admin, timeout=30)
    assert error_of(bad, 400)["param"] == "rpm"
    revoked = httpx.delete(f"{gateway.url}/admin/keys/{name}", headers=admin, timeout=30)
    assert revoked.json() == {"name": name, "prefix": key[:12], "revoked": True}
    assert error_of(respond(gateway, key), 401)["code"] == "invalid_api_key"
    again = httpx.delete(f"{gateway.url}/admin/keys/{name}", headers=admin, timeout=30)
    assert error_of(again, 404)["code"] == "key_not_found"
    assert usage_rows(gateway, name)[0]["status"] == "revoked"


# ---------------------------------------------------------------- no key anywhere


def test_no_key_in_any_byte_the_gateway_writes(
    gateway: GatewayProcess, upstream: ChatUpstream, issued: Issued, directory: Path
) -> None:
    name = unique("careful")
    key = issued.issue(gateway, name)
    upstream.responder = lambda body: Text("noted", usage=USAGE)
    for n in range(5):  # keys of its own, so that it does not depend on the module's other tests running first
        assert respond(gateway, issued.issue(gateway, unique(f"also{n}"))).status_code == 200
    assert respond(gateway, key).status_code == 200
    stream_events(gateway, key)
    # A key pasted into a prompt that is not stored: taken out of the capture, the
    # inspector and the logs by its shape.
    assert respond(gateway, key, input=f"my key is {key}, please keep it", store=False).status_code == 200
    assert respond(gateway, key, model="m", stream=True, store=False).status_code == 200
    httpx.delete(f"{gateway.url}/admin/keys/{name}", headers=auth(ADMIN_KEY), timeout=30)
    assert respond(gateway, key).status_code == 401
    wait_for_requests(gateway, name, 4)
    gateway_files = [
        gateway.log_path,
        *gateway.log_path.parent.glob(gateway.log_path.with_suffix(".sqlite3").name + "*"),
        *(directory / "capture").glob("*"),
    ]
    assert any(path.name.endswith(".sqlite3") for path in gateway_files)
    assert any(path.parent.name == "capture" for path in gateway_files)
    written = {str(path): path.read_bytes() for path in gateway_files}
    inspector = httpx.get(gateway.url + "/ui/api/exchanges", headers=auth(ADMIN_KEY), timeout=30)
    assert inspector.status_code == 200
    written["inspector"] = inspector.content
    for summary in inspector.json()["data"]:
        record = httpx.get(f"{gateway.url}/ui/api/exchanges/{summary['request_id']}", headers=auth(ADMIN_KEY), timeout=30)
        written[f"inspector {summary['request_id']}"] = record.content
    written["metrics"] = httpx.get(gateway.url + "/metrics", timeout=30).content
    assert b"my key is [redacted]" in b"".join(written.values())
    secrets = [*issued.keys, STATIC_KEY, ADMIN_KEY]
    assert len(issued.keys) > 5
    for source, data in written.items():
        for secret in secrets:
            assert secret.encode() not in data, f"a key in {source}"
            assert secret[13:].encode() not in data, f"a key's secret part in {source}"
