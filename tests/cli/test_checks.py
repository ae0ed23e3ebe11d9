"""``serve_problems``: every reason a configuration cannot be served, decided without I/O."""

from __future__ import annotations

import pytest

from toolwire.cli import with_flags
from toolwire.cli._checks import serve_problems
from toolwire.config import GatewayConfig, parse_config

UPSTREAM = '[[upstreams]]\nname = "local"\nbase_url = "{url}"\ndefault = true\n{extra}\n'


def config(url: str = "http://127.0.0.1:8000/v1", extra: str = "", server: str = "") -> GatewayConfig:
    return parse_config(f"[server]\n{server}\n" + UPSTREAM.format(url=url, extra=extra))


def test_a_plain_local_configuration_has_no_problem() -> None:
    assert serve_problems(config(), {}) == []


def test_no_upstream_at_all() -> None:
    assert serve_problems(GatewayConfig(), {}) == [
        "no upstream: pass --upstream URL (or a shortcut such as ollama, or mock), or --config FILE."
    ]


def test_an_upstream_key_variable_that_is_not_set() -> None:
    problems = serve_problems(config(extra='api_key_env = "DEEPSEEK_KEY"'), {})
    assert problems == ["the upstream 'local' takes its key from DEEPSEEK_KEY, which is not set."]
    assert serve_problems(config(extra='api_key_env = "DEEPSEEK_KEY"'), {"DEEPSEEK_KEY": "sk-x"}) == []


@pytest.mark.parametrize("url", ["http://user:pw@127.0.0.1:8000/v1", "http://:pw@127.0.0.1:8000/v1", "http://user@h/v1"])
def test_credentials_in_the_url_and_a_key_are_refused(url: str) -> None:
    problems = serve_problems(config(url, 'api_key_env = "KEY"'), {"KEY": "sk-x"})
    assert problems == ["the upstream 'local' has credentials in its URL and a key in KEY: give one of them."]
    assert serve_problems(config(url), {}) == []  # the URL's credentials alone are fine


def test_an_upstream_without_an_address_does_not_hide_the_next_ones_problems() -> None:
    both = GatewayConfig.model_validate(
        {
            "upstreams": [
                {"name": "mock", "kind": "mock"},
                {"name": "remote", "base_url": "http://u:p@127.0.0.1:8000/v1", "api_key_env": "KEY"},
            ]
        }
    )
    assert serve_problems(both, {"KEY": "sk-x"}) == [
        "the upstream 'remote' has credentials in its URL and a key in KEY: give one of them."
    ]


def test_a_proxy_that_cannot_be_used_names_the_upstream() -> None:
    problems = serve_problems(config("https://api.example.com/v1"), {"HTTPS_PROXY": "socks5://127.0.0.1:1080"})
    assert len(problems) == 1 and problems[0].startswith("the upstream 'local': ") and "HTTPS_PROXY" in problems[0]
    # a loopback upstream is never proxied, so the same proxy is no problem for it
    assert serve_problems(config(), {"HTTPS_PROXY": "socks5://127.0.0.1:1080", "HTTP_PROXY": "socks5://x"}) == []


@pytest.mark.parametrize(("store", "expected"), [("bogus://x", "--store: unknown store 'bogus'"), ("memory://x", "--store: memory://x: a memory store takes no host or path")])
def test_a_store_url_that_makes_no_sense(store: str, expected: str) -> None:
    (problem,) = serve_problems(config(server=f'store = "{store}"'), {})
    assert problem.startswith(expected)
    assert serve_problems(config(server='store = "none"'), {}) == []


def test_client_keys_variable_that_holds_no_key() -> None:
    problems = serve_problems(config(server='api_key_env = "KEYS"'), {"KEYS": " , "})
    assert problems == ["--api-key-env names KEYS, which holds no key."]
    assert serve_problems(config(server='api_key_env = "KEYS"'), {}) == problems  # not set at all
    assert serve_problems(config(server='api_key_env = "KEYS"'), {"KEYS": "a,b"}) == []


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.4", "::", "gateway.example"])
def test_an_open_address_needs_client_keys_or_the_explicit_flag(host: str) -> None:
    assert serve_problems(config(server=f'host = "{host}"'), {}) == [
        f"refusing to listen on {host} without client keys: anyone who can reach it could use your upstream. "
        "Create keys with 'toolwire keys create NAME' (in the gateway's --store), set --api-key-env VAR (VAR "
        "holding comma-separated keys), or pass --insecure-no-auth if this is really what you want."
    ]
    assert serve_problems(config(server=f'host = "{host}"\ninsecure_no_auth = true'), {}) == []
    assert serve_problems(config(server=f'host = "{host}"\napi_key_env = "KEYS"'), {"KEYS": "k"}) == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.8.9.10"])
def test_loopback_needs_no_keys(host: str) -> None:
    assert serve_problems(config(server=f'host = "{host}"'), {}) == []


def test_cross_references_of_the_file_are_problems_with_their_place() -> None:
    broken = GatewayConfig.model_validate(
        {"upstreams": [{"name": "local", "kind": "mock"}], "models": [{"name": "m", "upstream": "elsewhere"}]}
    )
    assert serve_problems(broken, {}) == ["models[0].upstream: unknown upstream 'elsewhere' (known: local)"]


def test_every_problem_is_reported_at_once() -> None:
    problems = serve_problems(
        config(extra='api_key_env = "MISSING"', server='host = "0.0.0.0"\nstore = "bogus://"'), {}
    )
    assert len(problems) == 3


def test_flags_override_the_file_and_upstream_becomes_the_default() -> None:
    merged = with_flags(config(server="port = 9000"), {"port": 9100, "host": None}, upstream="mock")
    assert merged.server.port == 9100 and merged.server.host == "127.0.0.1"
    assert [(u.name, u.default) for u in merged.upstreams] == [("local", False), ("mock", True)]


def test_admin_keys_must_hold_a_key_and_differ_from_client_keys() -> None:
    problems = serve_problems(config(server='admin_key_env = "ADMIN"'), {"ADMIN": ""})
    assert problems == ["--admin-key-env names ADMIN, which holds no key."]
    assert serve_problems(config(server='admin_key_env = "ADMIN"'), {}) == problems  # not set at all
    shared = config(server='admin_key_env = "ADMIN"\napi_key_env = "KEYS"')
    assert serve_problems(shared, {"ADMIN": "same", "KEYS": "other,same"}) == [
        "an admin key is also a client key (--api-key-env): give the admin API a key of its own."
    ]


def test_an_open_address_is_served_when_the_store_holds_keys() -> None:
    asked: list[bool] = []

    def store_has_keys() -> bool:
        asked.append(True)
        return True

    assert serve_problems(config(server='host = "0.0.0.0"'), {}, store_has_keys=store_has_keys) == []
    assert asked == [True]
    # on loopback the store is never asked
    assert serve_problems(config(), {}, store_has_keys=store_has_keys) == [] and asked == [True]
