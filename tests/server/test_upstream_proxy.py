"""An upstream reached through the forward proxy the environment names (``HTTPS_PROXY``...).

The gateway's upstream is ``http://upstream.invalid:<port>/v1``: a name that resolves
nowhere, so an answer at all proves the request went through ``ForwardProxy``, which
sends every request to the scripted upstream on 127.0.0.1. The https upstream is a
``ChatUpstream`` with a certificate for ``upstream.invalid`` from a test CA (trustme)
that the gateway trusts through ``SSL_CERT_FILE``, reached through the proxy's tunnel.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.forward_proxy import ForwardProxy
from tests.support.gateway import UPSTREAM_KEY, GatewayProcess, free_port
from tests.support.tls_authority import certified

PROXY_SECRET = "proxy-pass-secret-5555"
PROXY_AUTHORIZATION = "Basic " + base64.b64encode(f"tw-user:{PROXY_SECRET}".encode()).decode()
"""What the proxy must receive for ``with_credentials(its URL)``."""
BODY = {"model": "m", "input": "hi"}


@pytest.fixture
def proxy(upstream: ChatUpstream) -> Iterator[ForwardProxy]:
    with ForwardProxy(upstream.port) as proxy:
        yield proxy


def events(text: str) -> list[dict[str, Any]]:
    return [orjson.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ")]


def with_credentials(proxy_url: str) -> str:
    return proxy_url.replace("http://", f"http://tw-user:{PROXY_SECRET}@", 1)


def unresolvable(upstream: ChatUpstream) -> str:
    return f"http://upstream.invalid:{upstream.port}/v1"


def test_requests_go_through_the_proxy_with_its_credentials(
    upstream: ChatUpstream, proxy: ForwardProxy, tmp_path: Path
) -> None:
    env = {"HTTP_PROXY": with_credentials(proxy.url), "NO_PROXY": "example.org"}
    with GatewayProcess(unresolvable(upstream), tmp_path / "gw.log", env=env) as gateway:
        upstream.enqueue(Text("streamed through the proxy"))
        upstream.enqueue(Text("answered through the proxy"))
        with httpx.stream("POST", gateway.base_url + "/responses", json={**BODY, "stream": True}, timeout=30) as streamed:
            text = b"".join(streamed.iter_raw()).decode()
        answered = httpx.post(gateway.base_url + "/responses", json=BODY, timeout=30)
        log = gateway.log()

    assert streamed.status_code == 200
    [completed] = [event for event in events(text) if event["type"] == "response.completed"]
    assert completed["response"]["output"][0]["content"][0]["text"] == "streamed through the proxy"
    assert answered.status_code == 200, answered.text
    assert answered.json()["output"][0]["content"][0]["text"] == "answered through the proxy"
    assert [(r.method, r.url, r.proxy_authorization) for r in proxy.requests] == [
        ("GET", f"{unresolvable(upstream)}/models", PROXY_AUTHORIZATION),  # serve's check of the upstream, at start
        *[("POST", f"{unresolvable(upstream)}/chat/completions", PROXY_AUTHORIZATION)] * 2,
    ]
    sent = [r for r in upstream.requests if r.path == "/v1/chat/completions"]
    assert len(sent) == 2
    for request in sent:
        assert request.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"  # the upstream's key still goes to it
        assert "proxy-authorization" not in request.headers
    assert PROXY_SECRET not in log


def test_no_proxy_for_the_upstream_connects_directly(upstream: ChatUpstream, proxy: ForwardProxy, tmp_path: Path) -> None:
    env = {"HTTP_PROXY": proxy.url, "NO_PROXY": "other.org,.invalid"}
    with GatewayProcess(unresolvable(upstream), tmp_path / "gw.log", "--upstream-retries", "1", env=env) as gateway:
        response = httpx.post(gateway.base_url + "/responses", json=BODY, timeout=30)
    assert response.status_code == 502
    message = response.json()["error"]["message"]
    assert message.startswith(f"Cannot reach the upstream at {unresolvable(upstream)}:"), message
    assert "proxy" not in message
    assert proxy.requests == []


def test_an_unreachable_proxy_is_named_in_the_error_without_its_credentials(upstream: ChatUpstream, tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    env = {"HTTP_PROXY": with_credentials(f"http://{dead}")}
    with GatewayProcess(unresolvable(upstream), tmp_path / "gw.log", "--upstream-retries", "1", env=env) as gateway:
        response = httpx.post(gateway.base_url + "/responses", json=BODY, timeout=30)
        ready = httpx.get(gateway.url + "/readyz", timeout=30)
        log = gateway.log()
    assert response.status_code == 502
    message = response.json()["error"]["message"]
    assert f"(through the proxy http://{dead})" in message, message
    assert ready.status_code == 503 and f"through the proxy http://{dead}" in ready.json()["reason"]
    assert PROXY_SECRET not in response.text + ready.text + log


def test_a_proxy_toolwire_cannot_use_stops_serve_with_a_clear_reason(upstream: ChatUpstream, tmp_path: Path) -> None:
    env = {"ALL_PROXY": "socks5://tw-user:secret@127.0.0.1:1080"}
    gateway = GatewayProcess(unresolvable(upstream), tmp_path / "gw.log", env=env)
    with pytest.raises(RuntimeError) as refused:
        gateway.start()
    reason = str(refused.value)
    assert "ALL_PROXY names the proxy socks5://127.0.0.1:1080, which toolwire cannot use" in reason, reason
    assert "Traceback" not in reason and "secret" not in reason


def test_an_https_upstream_is_reached_through_a_tunnel_that_sees_only_the_proxy_credentials(tmp_path: Path) -> None:
    certificate = certified("upstream.invalid", tmp_path)
    with ChatUpstream(ssl_context=certificate.server_context) as tls_upstream, ForwardProxy(tls_upstream.port) as proxy:
        port = tls_upstream.port
        url = f"https://upstream.invalid:{port}/v1"
        env = {
            "HTTPS_PROXY": with_credentials(proxy.tunnel_url),
            "SSL_CERT_FILE": str(certificate.authority_file),
        }
        with GatewayProcess(url, tmp_path / "gw.log", env=env) as gateway:
            tls_upstream.enqueue(Text("over TLS through the tunnel"))
            answered = httpx.post(gateway.base_url + "/responses", json=BODY, timeout=30)
            log = gateway.log()
        tunnels = proxy.requests
        sent = [r for r in tls_upstream.requests if r.path == "/v1/chat/completions"]

    assert answered.status_code == 200, answered.text
    assert answered.json()["output"][0]["content"][0]["text"] == "over TLS through the tunnel"
    assert [(t.method, t.url, t.proxy_authorization) for t in tunnels] == [
        ("CONNECT", f"upstream.invalid:{port}", PROXY_AUTHORIZATION)
    ] * 2  # serve's check of the upstream at start, then the gateway's requests
    assert [r.path for r in tls_upstream.requests] == ["/v1/models", "/v1/chat/completions"]
    [request] = sent
    assert request.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert "proxy-authorization" not in request.headers
    assert PROXY_SECRET not in log
