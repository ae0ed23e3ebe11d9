"""``toolwire serve`` and the keys of its store: a gateway without keys closes once its
store gets one, the inspector never opens to keys of the store, and the start-up checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import GatewayProcess

from .gateways import auth, keys_cli, respond, wait_for


def test_a_gateway_without_keys_closes_once_its_store_has_one(_session_upstream: ChatUpstream, upstream: ChatUpstream, tmp_path: Path) -> None:
    upstream.responder = lambda body: Text("ok")
    with GatewayProcess(_session_upstream.base_url, tmp_path / "gateway.log", "--inspector") as gateway:
        store = f"sqlite:///{gateway.log_path.with_suffix('.sqlite3')}"
        assert respond(gateway, None).status_code == 200
        assert httpx.get(gateway.url + "/ui/api/exchanges", timeout=30).status_code == 200  # loopback, no keys
        made = keys_cli("create", "first", "--store", store)
        assert made.returncode == 0, made.stderr
        key = made.stdout.splitlines()[-1]
        wait_for(lambda: respond(gateway, None).status_code == 401, "the gateway to want a key")
        assert respond(gateway, key).status_code == 200
        for headers in ({}, auth(key)):
            refused = httpx.get(gateway.url + "/ui/api/exchanges", headers=headers, timeout=30)
            assert refused.status_code == 401
            assert "--admin-key-env" in refused.json()["error"]["message"]
        keys_cli("revoke", "first", "--store", store)
        assert respond(gateway, None).status_code == 401  # revoking every key does not open it again


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", "serve", "--upstream", "http://127.0.0.1:9/v1", "--port", "1", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_an_open_bind_without_keys_points_at_toolwire_keys(tmp_path: Path) -> None:
    refused = serve("--host", "0.0.0.0", "--store", f"sqlite:///{tmp_path / 'empty.sqlite3'}")
    assert refused.returncode == 2
    assert "toolwire keys create" in refused.stderr and "--insecure-no-auth" in refused.stderr


def test_an_admin_key_must_be_set_and_its_own(tmp_path: Path) -> None:
    unset = serve("--admin-key-env", "TW_NO_SUCH_VARIABLE")
    assert unset.returncode == 2 and "--admin-key-env names TW_NO_SUCH_VARIABLE, which holds no key" in unset.stderr
    shared = serve("--admin-key-env", "TW_ADMIN", "--api-key-env", "TW_CLIENTS", env={"TW_ADMIN": "same-key-123", "TW_CLIENTS": "x-key,same-key-123"})
    assert shared.returncode == 2 and "an admin key is also a client key" in shared.stderr
    assert "same-key-123" not in shared.stderr
