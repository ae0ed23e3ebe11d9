"""Client keys: every /v1 request needs one; keys never leak; open binds need keys."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import UPSTREAM_KEY, GatewayProcess

CLIENT_KEYS = "client-key-alpha,client-key-beta"


@pytest.fixture(scope="module")
def guarded_gateway(_session_upstream: ChatUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    log_path = tmp_path_factory.mktemp("guarded") / "gateway.log"
    process = GatewayProcess(
        _session_upstream.base_url,
        log_path,
        "--api-key-env",
        "TOOLWIRE_TEST_CLIENT_KEYS",
        env={"TOOLWIRE_TEST_CLIENT_KEYS": CLIENT_KEYS},
    )
    with process:
        yield process


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-key", "Basic Y2xpZW50LWtleS1hbHBoYQ==", "Bearer", "client-key-alpha"],
)
def test_requests_without_a_valid_key_get_401(
    guarded_gateway: GatewayProcess, upstream: ChatUpstream, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    response = httpx.post(guarded_gateway.base_url + "/responses", json={"model": "m", "input": "hi"}, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"
    assert upstream.requests == []


@pytest.mark.parametrize("key", ["client-key-alpha", "client-key-beta"])
def test_each_configured_key_is_accepted_and_never_forwarded(
    guarded_gateway: GatewayProcess, upstream: ChatUpstream, key: str
) -> None:
    upstream.enqueue(Text("welcome"))
    response = httpx.post(
        guarded_gateway.base_url + "/responses",
        json={"model": "m", "input": "hi"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    sent_headers = str(upstream.requests[0].headers)
    assert key not in sent_headers
    assert UPSTREAM_KEY in sent_headers
    assert UPSTREAM_KEY not in response.text


def test_health_needs_no_key(guarded_gateway: GatewayProcess) -> None:
    assert httpx.get(guarded_gateway.url + "/healthz").status_code == 200


def test_no_key_appears_in_the_log(guarded_gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("x"))
    httpx.post(
        guarded_gateway.base_url + "/responses",
        json={"model": "m", "input": "hi"},
        headers={"Authorization": "Bearer client-key-alpha"},
        timeout=30,
    )
    log = guarded_gateway.log()
    for secret in (UPSTREAM_KEY, "client-key-alpha", "client-key-beta"):
        assert secret not in log


def test_open_bind_without_keys_refuses_to_start(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "toolwire", "serve", "--host", "0.0.0.0", "--port", "1", "--upstream", "http://127.0.0.1:9/v1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0
    assert "--api-key-env" in result.stderr and "--insecure-no-auth" in result.stderr
