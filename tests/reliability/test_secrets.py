"""No key, client or upstream, in what the gateway says or writes down.

Upstreams do echo keys: a 401 that quotes the key it refused, a proxy's error page, a
crashing server that dumps its request. The gateway passes an upstream's status and
message on to the client, so it must take out of them the keys it knows (its upstream
keys and its client keys). The client's key must not come back either: not in a 401,
not in any error. And none of them may reach the log (at debug level), the traffic
capture or the inspector.

The module's gateway runs with client keys, ``--log-level debug``, and (where this
version of the gateway has them) a capture directory and the inspector.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.support.chat_upstream import ChatUpstream, HttpError, Raw, StreamError, Text
from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV, GatewayProcess

from .conftest import StartGateway
from .helpers import (
    assert_openai_error,
    dead_port_url,
    failure_message,
    leaked,
    read_events,
    responses_url,
    wait_until,
)

CLIENT_KEYS = ("ck-alpha-secret-1111", "ck-beta-secret-2222")
WRONG_KEY = "ck-wrong-guess-3333"
URL_PASSWORD = "url-pass-secret-4444"
SECRETS = (UPSTREAM_KEY, *CLIENT_KEYS, WRONG_KEY, URL_PASSWORD)
AUTH = {"Authorization": f"Bearer {CLIENT_KEYS[0]}"}
BODY: dict[str, Any] = {"model": "m", "input": "hi"}


@pytest.fixture(scope="module")
def capture_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("capture")


@pytest.fixture(scope="module")
def guarded(
    _session_upstream: ChatUpstream, start_module_gateway: StartGateway, capture_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    config = tmp_path_factory.mktemp("config") / "toolwire.toml"
    config.write_text(f'[server]\ncapture_dir = "{capture_dir}"\n')
    args = ["--api-key-env", "TW_TEST_CLIENT_KEYS", "--log-level", "debug", "--upstream-retries", "1", "--inspector"]
    args += ["--config", str(config)]
    yield start_module_gateway(_session_upstream.base_url, *args, env={"TW_TEST_CLIENT_KEYS": ",".join(CLIENT_KEYS)})


def post(gateway: GatewayProcess, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(responses_url(gateway), json=body, headers=AUTH if headers is None else headers, timeout=60)


def events_text(gateway: GatewayProcess, body: dict[str, Any]) -> str:
    """A streaming exchange, as the raw text the client received."""
    with httpx.stream("POST", responses_url(gateway), json={**body, "stream": True}, headers=AUTH, timeout=60) as response:
        return b"".join(response.iter_raw()).decode()


# ---------------------------------------------------------------- what the upstream echoes

ECHOES: dict[str, HttpError] = {
    "401 message": HttpError(
        401, {"error": {"message": f"Incorrect API key provided: {UPSTREAM_KEY}. Check your key.", "type": "invalid_request_error", "code": "invalid_api_key"}}
    ),
    "400 param": HttpError(400, {"error": {"message": "Bad header value.", "param": f"Authorization: Bearer {UPSTREAM_KEY}"}}),
    "403 code": HttpError(403, {"error": {"message": "Forbidden.", "code": UPSTREAM_KEY}}),
    "plain-text body": HttpError(401, f"401 Unauthorized: invalid key {UPSTREAM_KEY} for this proxy\n"),
    "detail field": HttpError(422, {"detail": f"token {UPSTREAM_KEY} has expired"}),
}


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("echo", list(ECHOES))
def test_an_upstream_error_echoing_the_upstream_key_is_redacted(
    guarded: GatewayProcess, upstream: ChatUpstream, echo: str, streaming: bool
) -> None:
    reply = ECHOES[echo]
    upstream.enqueue(reply)
    response = post(guarded, {**BODY, "stream": streaming})
    assert response.status_code == reply.status  # status and message are still passed on...
    error = assert_openai_error(response, reply.status)
    assert leaked(response.text, SECRETS) == [], response.text  # ...without the key
    assert "[redacted]" in response.text or error["message"], error
    assert error["message"] and error["message"] != "[redacted]", error  # the upstream's words survive


def test_an_in_stream_error_echoing_the_key_is_redacted(guarded: GatewayProcess, upstream: ChatUpstream) -> None:
    body = {"error": {"message": f"backend crashed while using key {UPSTREAM_KEY}", "type": "InternalServerError", "code": 500}}
    upstream.enqueue(StreamError(after_chunks=3, error_body=body))
    text = events_text(guarded, BODY)
    assert "backend crashed" in failure_message(read_events([text.encode()]))
    assert leaked(text, SECRETS) == [], text


def test_unparseable_stream_data_quoting_the_key_is_redacted(guarded: GatewayProcess, upstream: ChatUpstream) -> None:
    """The gateway quotes bad stream data in its message; a key in it must not come along."""
    upstream.enqueue(Raw([b"data: {oops Authorization: Bearer " + UPSTREAM_KEY.encode() + b"\n\n"]))
    text = events_text(guarded, BODY)
    failure_message(read_events([text.encode()]))
    assert leaked(text, SECRETS) == [], text


def test_an_error_echoing_a_client_key_is_redacted(guarded: GatewayProcess, upstream: ChatUpstream) -> None:
    """However an upstream came to know a client key, the gateway does not repeat it."""
    upstream.enqueue(HttpError(400, {"error": {"message": f"Request mentions {CLIENT_KEYS[1]}, refused."}}))
    response = post(guarded, BODY)
    assert_openai_error(response, 400)
    assert leaked(response.text, SECRETS) == [], response.text


# ---------------------------------------------------------------- the client's own key


@pytest.mark.parametrize(
    "authorization",
    [f"Bearer {WRONG_KEY}", f"Basic {WRONG_KEY}", WRONG_KEY, f"Bearer {CLIENT_KEYS[0]}x"],
    ids=["wrong-bearer", "basic", "no-scheme", "key-plus-one"],
)
def test_a_refused_key_is_not_echoed(guarded: GatewayProcess, upstream: ChatUpstream, authorization: str) -> None:
    response = post(guarded, BODY, headers={"Authorization": authorization})
    assert_openai_error(response, 401)
    assert leaked(response.text, SECRETS) == [], response.text
    assert upstream.requests == []


@pytest.mark.parametrize(
    "body",
    [{"input": "no model"}, {"model": "m", "input": [{"type": "function_call_output", "output": "x"}]}],
    ids=["bad-request", "bad-item"],
)
def test_errors_to_an_authorized_client_do_not_contain_its_key(
    guarded: GatewayProcess, upstream: ChatUpstream, body: dict[str, Any]
) -> None:
    response = post(guarded, body)
    assert_openai_error(response, 400)
    assert leaked(response.text, SECRETS) == [], response.text


def test_the_client_key_never_goes_upstream_even_on_retry(guarded: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("ok"))
    assert post(guarded, {**BODY, "stream": True}).status_code == 200
    [sent] = [r for r in upstream.requests if r.path == "/v1/chat/completions"]
    assert leaked(str(sent.headers) + sent.body.decode(), CLIENT_KEYS) == []


def test_nothing_one_client_gets_from_the_upstream_reaches_another(start_gateway: StartGateway, upstream: ChatUpstream) -> None:
    """A cookie an upstream sets (a load balancer's session, Cloudflare's ``__cf_bm``) is
    not kept and replayed on other clients' requests: the gateway holds no state per upstream
    but its connections. The upstream is reached by name, where a cookie jar would apply."""
    gateway = start_gateway(upstream.base_url.replace("127.0.0.1", "localhost"))
    upstream.enqueue(HttpError(429, {"error": {"message": "slow down"}}, headers={"Set-Cookie": "session=client-one; Path=/"}))
    upstream.enqueue(Text("for client two"))
    assert httpx.post(responses_url(gateway), json=BODY, timeout=60).status_code == 429
    assert httpx.post(responses_url(gateway), json=BODY, headers={"Cookie": "mine=client-two"}, timeout=60).status_code == 200
    sent = [r for r in upstream.requests if r.path == "/v1/chat/completions"]
    assert len(sent) == 2
    assert [r.headers.get("cookie") for r in sent] == [None, None]


# ---------------------------------------------------------------- an upstream URL with credentials


def test_credentials_in_the_upstream_url_stay_out_of_errors_and_logs(start_gateway: StartGateway) -> None:
    with dead_port_url() as url:
        secret_url = url.replace("http://", f"http://tw-user:{URL_PASSWORD}@")
        # no upstream key: the URL's credentials are the only ones
        gateway = start_gateway(secret_url, "--upstream-retries", "1", "--log-level", "debug", env={UPSTREAM_KEY_ENV: ""})
        for streaming in (False, True):
            response = httpx.post(responses_url(gateway), json={**BODY, "stream": streaming}, timeout=60)
            error = assert_openai_error(response, 502)
            assert "127.0.0.1" in error["message"], error
            assert leaked(response.text, SECRETS) == [], response.text
        ready = httpx.get(gateway.url + "/readyz", timeout=30)
        assert ready.status_code == 503
        assert leaked(ready.text, SECRETS) == [], ready.text
        assert leaked(gateway.log(), SECRETS) == []


def test_credentials_in_the_url_and_an_upstream_key_are_not_a_500_on_every_request(
    start_gateway: StartGateway,
) -> None:
    """``user:password@`` in the URL and ``--upstream-key-env`` both ask for an
    Authorization header. Refusing to start (naming the conflict) or picking one is
    fine; starting and then failing every request and every /readyz with an internal
    error is not."""
    with dead_port_url() as url:
        secret_url = url.replace("http://", f"http://tw-user:{URL_PASSWORD}@")
        try:
            gateway = start_gateway(secret_url, "--upstream-retries", "1")
        except RuntimeError as refused:  # did not start: the reason must be clear, and secret-free
            assert "Traceback" not in str(refused), str(refused)
            assert leaked(str(refused), SECRETS) == []
            return
        response = httpx.post(responses_url(gateway), json=BODY, timeout=60)
        assert_openai_error(response, 502)
        ready = httpx.get(gateway.url + "/readyz", timeout=30)
        assert ready.status_code == 503, ready.text
        assert leaked(gateway.log(), SECRETS) == []


# ---------------------------------------------------------------- what the gateway writes down


def test_the_inspector_shows_no_key(guarded: GatewayProcess) -> None:
    listing = httpx.get(guarded.url + "/ui/api/exchanges", headers=AUTH, timeout=30)
    assert listing.status_code == 200, listing.text
    assert leaked(listing.text, SECRETS) == []
    ids = [e.get("request_id") or e.get("id") for e in _exchanges(listing.json())]
    assert ids, "the inspector lists no exchange after all the above"
    for request_id in ids:
        detail = httpx.get(f"{guarded.url}/ui/api/exchanges/{request_id}", headers=AUTH, timeout=30)
        assert leaked(detail.text, SECRETS) == [], (request_id, detail.text[:2000])


def _exchanges(listing: Any) -> list[dict[str, Any]]:
    if isinstance(listing, dict):
        listing = listing.get("data") or listing.get("exchanges") or []
    return [e for e in listing if isinstance(e, dict)]


def test_the_capture_holds_no_key(guarded: GatewayProcess, upstream: ChatUpstream, capture_dir: Path) -> None:
    upstream.enqueue(ECHOES["401 message"])
    marker = "capture-me-7f3a"
    assert post(guarded, {"model": "m", "input": marker}).status_code == 401

    def captured() -> list[Path]:
        return [path for path in sorted(capture_dir.glob("*.jsonl")) if marker in path.read_text(errors="replace")]

    assert wait_until(lambda: captured() != [], timeout=20), f"no capture of the exchange in {capture_dir}"
    files = sorted(capture_dir.glob("*.jsonl"))
    records = [orjson.loads(line) for path in files for line in path.read_bytes().splitlines() if line]
    assert records, files
    for path in files:
        assert leaked(path.read_text(errors="replace"), SECRETS) == [], path


def test_the_debug_log_holds_no_key(guarded: GatewayProcess, gateway: GatewayProcess) -> None:
    """Last: after every exchange above, neither this gateway's log (debug level) nor the
    session gateway's shows any key."""
    assert leaked(guarded.log(), SECRETS) == []
    assert leaked(gateway.log(), SECRETS) == []
