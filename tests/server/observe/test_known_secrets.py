"""``known_secrets``: every secret a gateway holds, whatever its shape, for the redactor.

Upstream keys from the variables the configuration names, client keys, the password in
an upstream URL (as written and decoded), and a proxy's credentials from the proxy
variables (the ``Basic`` token the proxy receives and the password inside it).
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from toolwire.config import GatewayConfig
from toolwire.server.observe import observability
from toolwire.server.observe._known_secrets import _basic_credentials, known_secrets


def config(*upstreams: dict[str, Any]) -> GatewayConfig:
    return GatewayConfig.model_validate({"upstreams": list(upstreams)})


def basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def test_upstream_keys_from_their_variables_and_client_keys() -> None:
    gateway = config(
        {"name": "a", "base_url": "http://127.0.0.1:1/v1", "api_key_env": "KEY_A"},
        {"name": "b", "base_url": "http://127.0.0.1:2/v1", "api_key_env": "KEY_B"},
        {"name": "c", "base_url": "http://127.0.0.1:3/v1"},
        {"name": "m", "kind": "mock"},
    )
    environ = {"KEY_A": "no-prefix-at-all", "KEY_C": "never named"}
    secrets = known_secrets(gateway, [b"client,key", "clé".encode()], environ)
    assert secrets == ["no-prefix-at-all", "client,key", "clé"]  # KEY_B is unset: nothing to hide


def test_the_password_of_an_upstream_url_as_written_and_decoded() -> None:
    gateway = config({"name": "a", "base_url": "http://user:p%40ss@127.0.0.1:1/v1"})
    assert known_secrets(gateway, [], {}) == ["p%40ss", "p@ss"]
    assert known_secrets(config({"name": "a", "base_url": "http://user@127.0.0.1:1/v1"}), [], {}) == []


def test_a_proxys_basic_token_and_its_password() -> None:
    gateway = config(
        {"name": "a", "base_url": "https://api.example.com/v1"},
        {"name": "b", "base_url": "http://api.example.org/v1"},
    )
    environ = {"HTTPS_PROXY": "http://puser:pp%3Ass@proxy.example:3128", "HTTP_PROXY": "http://other:word@proxy.example:8080"}
    assert known_secrets(gateway, [], environ) == [basic("puser", "pp:ss"), "pp:ss", basic("other", "word"), "word"]


def test_a_proxy_toolwire_cannot_use_hides_nothing_and_stops_nothing() -> None:
    gateway = config(
        {"name": "a", "base_url": "https://api.example.com/v1"},
        {"name": "b", "base_url": "http://user:after@api.example.org/v1"},
    )
    environ = {"HTTPS_PROXY": "socks5://user:secret@proxy.example:1080"}
    assert known_secrets(gateway, [], environ) == ["after", "after"]


def test_a_loopback_upstream_goes_by_no_proxy() -> None:
    gateway = config({"name": "a", "base_url": "http://127.0.0.1:1/v1"})
    assert known_secrets(gateway, [], {"HTTP_PROXY": "http://user:secret@proxy.example:8080"}) == []


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, ()),
        ("Bearer abc", ()),
        ("basic " + basic("u", "p"), ()),
        ("Basic " + basic("u", "p:q"), (basic("u", "p:q"), "p:q")),
        ("Basic " + basic("nopassword", ""), (basic("nopassword", ""), "")),
        ("Basic not base64!", ("not base64!",)),
        ("Basic dTpw!!", ("dTpw!!",)),  # "u:p" once the "!!" is dropped, which base64 does not allow
        ("Basic " + base64.b64encode(b"u:\xff").decode(), (base64.b64encode(b"u:\xff").decode(), "\ufffd")),
    ],
)
def test_basic_credentials(header: str | None, expected: tuple[str, ...]) -> None:
    assert tuple(_basic_credentials(header)) == expected


def test_the_gateways_redactor_hides_them_all() -> None:
    gateway = config({"name": "a", "base_url": "https://user:url-password@api.example.com/v1", "api_key_env": "KEY"})
    environ = {"KEY": "k3y", "HTTPS_PROXY": "http://puser:proxy-password@proxy.example:3128"}
    redactor = observability(gateway, client_keys=[b"client-key"], admin_keys=[b"admin-key"], environ=environ).redactor
    text = f"k3y client-key admin-key url-password proxy-password {basic('puser', 'proxy-password')}"
    assert redactor.text(text) == " ".join(["[redacted]"] * 6)


def test_a_client_key_that_is_not_utf8_is_hidden_as_it_reads() -> None:
    assert known_secrets(config(), [b"\xffraw-bytes-key"], {}) == ["\ufffdraw-bytes-key"]


def test_an_upstream_without_a_url_does_not_end_the_search() -> None:
    gateway = config({"name": "m", "kind": "mock"}, {"name": "a", "base_url": "http://user:behind-the-mock@127.0.0.1:1/v1"})
    assert known_secrets(gateway, [], {}) == ["behind-the-mock", "behind-the-mock"]
