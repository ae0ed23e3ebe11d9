"""``HttpEndpoint`` (under every HTTP backend kind): credentials in the URL or a key, not both.

A URL with ``user:password@`` authenticates by itself (aiohttp sends it as Basic auth);
adding an API key would send two credentials, one of them to a server that did not
ask for it. The gateway's command line refuses the pair first; the endpoint refuses it
too, for every other caller, without showing the password.
"""

from __future__ import annotations

import base64

import pytest

from tests.support.chat_upstream import ChatUpstream, Text
from toolwire.config import ServerConfig, UpstreamConfig
from toolwire.upstream import Backend, BackendSetup, HttpEndpoint, backend_kind

PASSWORD = "url-pass-7c1d"


def with_credentials(base_url: str) -> str:
    return base_url.replace("http://", f"http://tw-user:{PASSWORD}@", 1)


def backend(kind: str, url: str, api_key: str | None) -> Backend:
    """An upstream of ``kind`` at ``url``, built through the registry as the gateway builds it."""
    upstream = UpstreamConfig(name="u", kind=kind, base_url=url, api_key_env="KEY" if api_key is not None else None)
    return backend_kind(kind).build(upstream, BackendSetup(ServerConfig(), {"KEY": api_key or ""}))


def endpoint(url: str, api_key: str | None) -> HttpEndpoint:
    return HttpEndpoint(url, "/x", api_key=api_key)


@pytest.mark.parametrize(
    "make",
    [*(lambda url, api_key, kind=kind: backend(kind, url, api_key) for kind in ("chat", "responses", "anthropic")), endpoint],
)
def test_credentials_in_the_url_and_an_api_key_are_refused_without_the_password(make: object) -> None:
    url = "http://tw-user:url-pass-7c1d@127.0.0.1:9/v1"
    with pytest.raises(ValueError, match="carries credentials and an API key is set too") as refused:
        make(url, api_key="sk-also-a-key")  # type: ignore[operator]
    assert PASSWORD not in str(refused.value)
    assert "http://127.0.0.1:9/v1" in str(refused.value)


@pytest.mark.parametrize("api_key", [None, ""])
async def test_credentials_in_the_url_alone_reach_the_upstream_as_basic_auth(upstream: ChatUpstream, api_key: str | None) -> None:
    upstream.enqueue(Text("authenticated by the URL"))
    chat = backend("chat", with_credentials(upstream.base_url), api_key)
    try:
        completion = await chat.fetch({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    finally:
        await chat.aclose()
    assert completion["choices"][0]["message"]["content"] == "authenticated by the URL"
    expected = "Basic " + base64.b64encode(f"tw-user:{PASSWORD}".encode()).decode()
    assert upstream.requests[-1].headers["authorization"] == expected


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://tw-user:url-pass-7c1d@127.0.0.1:80a/v1", "http://127.0.0.1:80a/v1 is not a URL: its port must be"),
        ("http://tw-user:url-pass-7c1d@127.0.0.1:65536/v1", "http://127.0.0.1:65536/v1 is not a URL: its port must be"),
        ("http://tw-user:url-pass-7c1d@[::1/v1", "http://[::1/v1 is not a URL: its port must be"),
        ("ftp://tw-user:url-pass-7c1d@127.0.0.1/v1", "ftp://127.0.0.1/v1 is not an http:// or https:// URL"),
        ("127.0.0.1:8000/v1", "127.0.0.1:8000/v1 is not an http:// or https:// URL"),
        ("http://tw-user:url-pass-7c1d@/v1", "http:///v1 names no host"),
        ("http://tw-user:url-pass-7c1d@models..example/v1", "http://models..example/v1 names a host that cannot be looked up"),
        ("https://tw-user:url-pass-7c1d@" + "m" * 64 + ".example/v1", "names a host that cannot be looked up"),
    ],
)
def test_an_address_no_request_can_go_to_is_refused_at_once_without_the_password(url: str, problem: str) -> None:
    """Refused when the endpoint is made, not at each request, whose failure would repeat the
    address whole (aiohttp's ``InvalidURL``) or escape as no connection error does."""
    with pytest.raises(ValueError) as refused:
        HttpEndpoint(url, "/x")
    assert str(refused.value).startswith("the upstream address ") and problem in str(refused.value)
    assert PASSWORD not in str(refused.value)


@pytest.mark.parametrize(
    "url", ["http://[::1]:8000/v1", "https://bücher.example/v1", "http://localhost/", "HTTPS://API.EXAMPLE/v1"]
)
def test_addresses_requests_can_go_to_are_taken(url: str) -> None:
    assert HttpEndpoint(url, "/x").display_url == url.rstrip("/")
