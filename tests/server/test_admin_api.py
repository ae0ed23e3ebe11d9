"""The admin API (``/admin/keys``, ``/admin/usage``) and the client-key door (``ClientAuth``)
of a gateway served in this process, on a SQLite key store: who gets in, what each
call answers, and what a key sees of stored responses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV
from tests.support.served import chat_config, gateway_client
from toolwire.keys import KeyGate
from toolwire.server._auth import ClientAuth, is_loopback, parse_client_keys

ADMIN = "admin-key-0123456789"
STATIC = "static-client-key-42"
JSON = dict[str, Any]


@pytest.fixture(autouse=True)
def keys_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UPSTREAM_KEY_ENV, UPSTREAM_KEY)
    monkeypatch.setenv("TW_TEST_ADMIN_KEYS", ADMIN)
    monkeypatch.setenv("TW_TEST_CLIENT_KEYS", STATIC)


@asynccontextmanager
async def admin_gateway(upstream: ChatUpstream, tmp_path: Path, **server: Any) -> AsyncIterator[httpx.AsyncClient]:
    server.setdefault("store", f"sqlite:///{tmp_path / 'toolwire.sqlite3'}")
    server.setdefault("admin_key_env", "TW_TEST_ADMIN_KEYS")
    async with gateway_client(chat_config(upstream.base_url, **server)) as client:
        yield client


def as_admin(key: str = ADMIN) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_keys_made_listed_used_and_revoked(upstream: ChatUpstream, tmp_path: Path) -> None:
    upstream.enqueue(Text("hello alice"))
    async with admin_gateway(upstream, tmp_path) as client:
        made = await client.post("/admin/keys", json={"name": "alice", "models": ["m"], "rpm": 60}, headers=as_admin())
        assert (made.status_code, made.headers["cache-control"]) == (201, "no-store")
        assert made.headers["content-type"] == "application/json"
        key = made.json()["key"]
        assert made.json()["name"] == "alice" and made.json()["rpm"] == 60 and made.json()["prefix"] == key[:12]
        used = await client.post("/v1/responses", json={"model": "m", "input": "hi"}, headers=as_admin(key))
        assert used.status_code == 200, used.text
        listed = await client.get("/admin/keys", headers=as_admin())
        assert listed.json()["object"] == "list" and [k["name"] for k in listed.json()["data"]] == ["alice"]
        assert "key" not in listed.json()["data"][0] and "digest" not in listed.json()["data"][0]
        usage = (await client.get("/admin/usage", headers=as_admin())).json()
        for _ in range(100):  # usage is charged off the request's path
            if usage["data"]:
                break
            usage = (await client.get("/admin/usage?name=alice", headers=as_admin())).json()
        assert usage["object"] == "list"
        assert [(row["name"], row["model"], row["requests"]) for row in usage["data"]] == [("alice", "m", 1)]
        assert (await client.get("/admin/usage?name=bob", headers=as_admin())).status_code == 404
        revoked = await client.delete("/admin/keys/alice", headers=as_admin())
        assert revoked.json() == {"name": "alice", "prefix": key[:12], "revoked": True}
        after = await client.post("/v1/responses", json={"model": "m", "input": "hi"}, headers=as_admin(key))
        again = await client.delete("/admin/keys/alice", headers=as_admin())
    assert after.status_code == 401 and after.headers["www-authenticate"] == "Bearer"
    assert (again.status_code, again.json()["error"]["message"]) == (404, "No active key is named 'alice'.")


async def test_a_key_made_to_expire(upstream: ChatUpstream, tmp_path: Path) -> None:
    async with admin_gateway(upstream, tmp_path) as client:
        made = await client.post("/admin/keys", json={"name": "temp", "expires": "30d"}, headers=as_admin())
        listed = (await client.get("/admin/keys", headers=as_admin())).json()["data"]
    assert made.status_code == 201, made.text
    key = made.json()
    assert (key["status"], key["expires_at"] - key["created_at"]) == ("active", 30 * 86400)
    assert [(k["name"], k["status"], k["expires_at"]) for k in listed] == [("temp", "active", key["expires_at"])]


@pytest.mark.parametrize(
    ("body", "status", "where", "message"),
    [
        ('{"name": "alice", "rpm": 0}', 400, "rpm", "Invalid key request at 'rpm': Input should be greater than or equal to 1."),
        ("{nope", 400, "body", None),
        ('{"rpm": 5}', 400, "name", "Invalid key request at 'name': Field required."),
        ('{"name": "a", "models": ["m", 5]}', 400, "models.1", "Invalid key request at 'models.1': Input should be a valid string."),
    ],
)
async def test_a_bad_key_request_names_the_place(
    upstream: ChatUpstream, tmp_path: Path, body: str, status: int, where: str, message: str | None
) -> None:
    async with admin_gateway(upstream, tmp_path) as client:
        response = await client.post("/admin/keys", content=body, headers=as_admin())
    error = response.json()["error"]
    assert (response.status_code, error["param"]) == (status, where)
    assert error["message"] == message if message else error["message"].startswith(f"Invalid key request at '{where}': ")


async def test_only_an_admin_key_opens_the_admin_api(upstream: ChatUpstream, tmp_path: Path) -> None:
    async with admin_gateway(upstream, tmp_path, api_key_env="TW_TEST_CLIENT_KEYS") as client:
        for headers in ({}, as_admin(STATIC), as_admin("wrong"), {"Authorization": ADMIN}):
            refused = await client.get("/admin/keys", headers=headers)
            assert refused.status_code == 401, headers
            assert (refused.headers["www-authenticate"], refused.headers["cache-control"]) == ("Bearer", "no-store")
            assert refused.json()["error"] == {
                "message": "The admin API needs 'Authorization: Bearer <admin key>'.",
                "type": "invalid_request_error", "param": None, "code": "invalid_admin_key",
            }  # fmt: skip
        assert (await client.get("/admin/keys", headers=as_admin())).status_code == 200


async def test_without_admin_keys_the_admin_api_is_off(upstream: ChatUpstream, tmp_path: Path) -> None:
    async with admin_gateway(upstream, tmp_path, admin_key_env=None) as client:
        off = await client.get("/admin/usage", headers=as_admin())
    assert (off.status_code, off.headers["cache-control"], off.headers["content-type"]) == (404, "no-store", "application/json")
    assert "www-authenticate" not in off.headers
    assert off.json()["error"] == {
        "message": "The admin API is off: start the gateway with --admin-key-env VAR (VAR holding the admin key).",
        "type": "not_found_error", "param": None, "code": "admin_api_off",
    }  # fmt: skip


async def test_without_a_store_there_are_no_keys_to_manage(upstream: ChatUpstream, tmp_path: Path) -> None:
    async with admin_gateway(upstream, tmp_path, store="none") as client:
        refused = await client.post("/admin/keys", json={"name": "alice"}, headers=as_admin())
    assert refused.status_code == 409
    assert refused.json()["error"] == {
        "message": "This gateway keeps no key store (--store none).",
        "type": "invalid_request_error", "param": None, "code": "no_key_store",
    }  # fmt: skip


async def test_client_keys_guard_v1_and_nothing_else(upstream: ChatUpstream, tmp_path: Path) -> None:
    upstream.enqueue(Text("with a key"))
    async with admin_gateway(upstream, tmp_path, api_key_env="TW_TEST_CLIENT_KEYS", store="none") as client:
        missing = await client.post("/v1/responses", json={"model": "m", "input": "hi"})
        wrong = await client.get("/v1/models", headers=as_admin("nope"))
        health = await client.get("/healthz")
        allowed = await client.post("/v1/responses", json={"model": "m", "input": "hi"}, headers=as_admin(STATIC))
    assert (missing.status_code, missing.headers["www-authenticate"]) == (401, "Bearer")
    assert missing.json()["error"] == {
        "message": "Missing or invalid API key: send 'Authorization: Bearer <key>'.",
        "type": "invalid_request_error", "param": None, "code": "invalid_api_key",
    }  # fmt: skip
    assert wrong.status_code == 401 and health.status_code == 200
    assert allowed.status_code == 200 and upstream.requests[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


async def test_a_key_store_that_cannot_be_reached_lets_nobody_in() -> None:
    async with gateway_client(chat_config("http://127.0.0.1:9/v1", store="redis://127.0.0.1:1/0")) as client:
        refused = await client.post("/v1/responses", json={"model": "m", "input": "hi"}, headers=as_admin("twk_x"))
    assert refused.status_code == 503 and "www-authenticate" not in refused.headers
    assert refused.json()["error"]["type"] == "service_unavailable"


async def test_a_stored_response_is_seen_only_with_the_key_that_made_it(upstream: ChatUpstream, tmp_path: Path) -> None:
    upstream.enqueue(Text("alice's"))
    async with admin_gateway(upstream, tmp_path) as client:
        alice = (await client.post("/admin/keys", json={"name": "alice"}, headers=as_admin())).json()["key"]
        bob = (await client.post("/admin/keys", json={"name": "bob"}, headers=as_admin())).json()["key"]
        made = (await client.post("/v1/responses", json={"model": "m", "input": "hi"}, headers=as_admin(alice))).json()
        mine = await client.get(f"/v1/responses/{made['id']}", headers=as_admin(alice))
        theirs = await client.get(f"/v1/responses/{made['id']}", headers=as_admin(bob))
        continued = await client.post(
            "/v1/responses", json={"model": "m", "input": "more", "previous_response_id": made["id"]}, headers=as_admin(bob)
        )
        upstream.enqueue(Text("alice goes on"))
        own = await client.post(
            "/v1/responses", json={"model": "m", "input": "more", "previous_response_id": made["id"]}, headers=as_admin(alice)
        )
    assert mine.status_code == 200 and theirs.status_code == 404 and continued.status_code == 404
    assert own.status_code == 200, own.text
    assert [m["content"] for m in upstream.chat_requests[-1]["messages"]] == ["hi", "alice's", "more"]


# ---------------------------------------------------------------- the door itself


async def refusal_of(scope_type: str, extensions: dict[str, Any]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("a refused request never reaches the app")

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": scope_type, "path": "/v1/responses", "headers": [], "extensions": extensions}
    await ClientAuth(app, KeyGate(static_keys=[b"k"]))(scope, receive, send)
    return sent


async def test_a_websocket_refused_where_the_server_cannot_send_a_body() -> None:
    assert await refusal_of("websocket", {}) == [{"type": "websocket.close", "code": 1008}]
    with_body = await refusal_of("websocket", {"websocket.http.response": {}})
    assert [m["type"] for m in with_body] == ["websocket.http.response.start", "websocket.http.response.body"]
    assert with_body[0]["status"] == 401 and (b"www-authenticate", b"Bearer") in with_body[0]["headers"]


def test_client_keys_and_loopback_addresses() -> None:
    assert parse_client_keys(" a , ,b,") == (b"a", b"b")
    assert parse_client_keys("") == ()
    assert [is_loopback(host) for host in ("localhost", "127.0.0.1", "127.9.9.9", "::1", "[::1]")] == [True] * 5
    assert [is_loopback(host) for host in ("0.0.0.0", "::", "10.0.0.1", "example.com", "")] == [False] * 5
