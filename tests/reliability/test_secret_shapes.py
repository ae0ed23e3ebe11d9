"""Keys of every shape stay out of what a real gateway says and writes down.

The keys in tests/reliability/test_secrets.py look like keys (``sk-...``, ``ck-...``),
so a pattern could hide them without the gateway knowing its secrets at all. Here no
key has a well-known prefix: upstream keys that are bare, short, or full of punctuation
(a quote and a backslash, which JSON escapes), client keys alike, and the credentials of
the proxy the upstreams are reached through. Upstreams echo each of them back (in an
error's JSON, in plain text, in a stream's error event), and none may reach the client,
the log (at debug level), the capture or the inspector, raw or JSON-escaped.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.support.chat_upstream import ChatUpstream, HttpError, StreamError
from tests.support.forward_proxy import ForwardProxy
from tests.support.gateway import UPSTREAM_KEY_ENV, GatewayProcess

from .helpers import wait_until

BARE_KEY = "q9VvT2mLx8Rw"  # the --upstream flag's key: no prefix at all
SHORT_KEY = "k1!$x9"
PUNCTUATED_KEY = 'p"s\\w/0rd'
CLIENT_KEYS = ("c!k#9&z", "ab12x")
WRONG_CLIENT_KEY = "zz!9#q"
PROXY_USER, PROXY_PASSWORD = "tw", "Pr0xy;p@ss:w"
PROXY_BASIC = base64.b64encode(f"{PROXY_USER}:{PROXY_PASSWORD}".encode()).decode()
SECRETS = (BARE_KEY, SHORT_KEY, PUNCTUATED_KEY, *CLIENT_KEYS, WRONG_CLIENT_KEY, PROXY_PASSWORD, PROXY_BASIC)
AUTH = {"Authorization": f"Bearer {CLIENT_KEYS[0]}"}

# model -> the key its upstream is called with
MODELS = {"m-bare": BARE_KEY, "m-short": SHORT_KEY, "m-punctuated": PUNCTUATED_KEY}


def leaked(text: str) -> list[str]:
    """The secrets in ``text``, as they are or as JSON escapes them."""
    return [secret for secret in SECRETS if secret in text or json.dumps(secret)[1:-1] in text]


@pytest.fixture(scope="module")
def proxy(_session_upstream: ChatUpstream) -> Iterator[ForwardProxy]:
    with ForwardProxy(_session_upstream.port) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def capture_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("capture")


@pytest.fixture(scope="module")
def shaped(
    _session_upstream: ChatUpstream, proxy: ForwardProxy, capture_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """Upstreams on a name that resolves nowhere, reached through the proxy (with
    credentials); one per key shape."""
    directory = tmp_path_factory.mktemp("shapes")
    upstream_url = f"http://upstream.invalid:{_session_upstream.port}/v1"
    config = directory / "toolwire.toml"
    config.write_text(
        f'[server]\ncapture_dir = "{capture_dir}"\n'
        f'[[upstreams]]\nname = "short"\nbase_url = "{upstream_url}"\napi_key_env = "TW_SHORT_KEY"\n'
        f'[[upstreams]]\nname = "punctuated"\nbase_url = "{upstream_url}"\napi_key_env = "TW_PUNCTUATED_KEY"\n'
        '[[models]]\nname = "m-short"\nupstream = "short"\nupstream_model = "m"\n'
        '[[models]]\nname = "m-punctuated"\nupstream = "punctuated"\nupstream_model = "m"\n'
    )
    proxy_url = proxy.url.replace("http://", f"http://{PROXY_USER}:{quote(PROXY_PASSWORD, safe='')}@", 1)
    env = {
        UPSTREAM_KEY_ENV: BARE_KEY,
        "TW_SHORT_KEY": SHORT_KEY,
        "TW_PUNCTUATED_KEY": PUNCTUATED_KEY,
        "TW_SHAPE_CLIENT_KEYS": ",".join(CLIENT_KEYS),
        "HTTP_PROXY": proxy_url,
    }
    args = ["--config", str(config), "--api-key-env", "TW_SHAPE_CLIENT_KEYS", "--log-level", "debug", "--inspector"]
    args += ["--upstream-retries", "1"]
    with GatewayProcess(upstream_url, directory / "gateway.log", *args, env=env) as gateway:
        yield gateway


def post(gateway: GatewayProcess, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(gateway.base_url + "/responses", json=body, headers=AUTH if headers is None else headers, timeout=60)


def echoes(secret: str) -> dict[str, HttpError]:
    return {
        "json message": HttpError(401, {"error": {"message": f"Incorrect API key provided: {secret}.", "code": "invalid_api_key"}}),
        "json param": HttpError(400, {"error": {"message": "Bad header.", "param": f"Authorization: Bearer {secret}"}}),
        "plain text": HttpError(403, f"403 Forbidden: {secret} is not allowed here\n"),
        "json list": HttpError(422, [{"msg": f"token {secret} expired"}]),
    }


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("echo", list(echoes("x")))
def test_an_upstream_echoing_its_key_of_any_shape_is_redacted(
    shaped: GatewayProcess, upstream: ChatUpstream, model: str, echo: str
) -> None:
    key = MODELS[model]
    upstream.enqueue(echoes(key)[echo])
    response = post(shaped, {"model": model, "input": "hi"})
    assert response.status_code == echoes(key)[echo].status, response.text
    assert leaked(response.text) == [], response.text
    assert response.json()["error"]["message"], response.text
    assert upstream.requests[-1].headers["authorization"] == f"Bearer {key}"  # the key that was echoed


@pytest.mark.parametrize("model", list(MODELS))
def test_an_in_stream_error_echoing_a_key_is_redacted(shaped: GatewayProcess, upstream: ChatUpstream, model: str) -> None:
    upstream.enqueue(StreamError(after_chunks=2, error_body={"error": {"message": f"key {MODELS[model]} revoked mid-stream"}}))
    with httpx.stream(
        "POST", shaped.base_url + "/responses", json={"model": model, "input": "hi", "stream": True}, headers=AUTH, timeout=60
    ) as response:
        text = b"".join(response.iter_raw()).decode()
    assert "response.failed" in text and "revoked mid-stream" in text, text
    assert leaked(text) == [], text


@pytest.mark.parametrize("secret", [*CLIENT_KEYS, PROXY_PASSWORD, PROXY_BASIC], ids=["client-1", "client-2", "proxy-password", "proxy-basic"])
def test_an_upstream_echoing_a_client_key_or_the_proxy_credentials_is_redacted(
    shaped: GatewayProcess, upstream: ChatUpstream, proxy: ForwardProxy, secret: str
) -> None:
    upstream.enqueue(echoes(secret)["json message"])
    response = post(shaped, {"model": "m-bare", "input": "hi"})
    assert response.status_code == 401
    assert leaked(response.text) == [], response.text
    assert proxy.requests[-1].proxy_authorization == f"Basic {PROXY_BASIC}"  # it went through the proxy


@pytest.mark.parametrize("authorization", [f"Bearer {WRONG_CLIENT_KEY}", WRONG_CLIENT_KEY, f"Bearer {CLIENT_KEYS[0]}x"])
def test_a_refused_client_key_is_not_echoed(shaped: GatewayProcess, upstream: ChatUpstream, authorization: str) -> None:
    response = post(shaped, {"model": "m-bare", "input": "hi"}, headers={"Authorization": authorization})
    assert response.status_code == 401
    assert leaked(response.text) == [], response.text
    assert upstream.requests == []


def test_nothing_written_down_holds_a_key(shaped: GatewayProcess, upstream: ChatUpstream, capture_dir: Path) -> None:
    """Last in the module: every exchange above went through the log, the capture and the
    inspector; one more makes sure there is something to read."""
    upstream.enqueue(echoes(PUNCTUATED_KEY)["plain text"])
    marker = "written-down-9c1e"
    logged = shaped.log().count('"request_id"')
    assert post(shaped, {"model": "m-punctuated", "input": marker}).status_code == 403

    def captured() -> str:
        return "".join(path.read_text(errors="replace") for path in sorted(capture_dir.glob("*.jsonl")))

    assert wait_until(lambda: marker in captured(), timeout=30), "the exchange was not captured"
    assert wait_until(lambda: shaped.log().count('"request_id"') > logged, timeout=30), "the exchange was not logged"
    assert leaked(captured()) == []
    assert leaked(shaped.log()) == []
    listing = httpx.get(shaped.url + "/ui/api/exchanges", headers=AUTH, timeout=30)
    assert listing.status_code == 200, listing.text[:500]
    assert leaked(listing.text) == []
    exchanges = listing.json()["data"]
    assert exchanges, listing.text[:500]
    for exchange in exchanges:
        detail = httpx.get(f"{shaped.url}/ui/api/exchanges/{exchange['request_id']}", headers=AUTH, timeout=30)
        assert leaked(detail.text) == [], detail.text[:2000]
