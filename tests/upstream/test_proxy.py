"""``proxy_for``: which proxy the environment names for an upstream, as curl reads it."""

from __future__ import annotations

import pytest

from toolwire.upstream import Proxy, UnusableProxy, proxy_for
from toolwire.upstream._proxy import aiohttp_arguments

HOSTED = "https://api.deepseek.com/v1"


@pytest.mark.parametrize(
    ("url", "environ", "expected"),
    [
        (HOSTED, {}, None),
        (HOSTED, {"HTTPS_PROXY": "http://proxy.corp:3128"}, "http://proxy.corp:3128"),
        (HOSTED, {"https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:2"}, "http://lower:1"),
        (HOSTED, {"HTTP_PROXY": "http://proxy.corp:3128"}, None),  # only for http:// upstreams
        ("http://gpu-box:8000/v1", {"HTTP_PROXY": "http://proxy.corp:3128"}, "http://proxy.corp:3128"),
        (HOSTED, {"ALL_PROXY": "http://all:3128"}, "http://all:3128"),
        (HOSTED, {"HTTPS_PROXY": "http://own:1", "ALL_PROXY": "http://all:2"}, "http://own:1"),
        (HOSTED, {"https_proxy": "", "ALL_PROXY": "http://all:2"}, "http://all:2"),  # empty is unset
        (HOSTED, {"HTTPS_PROXY": "proxy.corp:3128"}, "http://proxy.corp:3128"),  # no scheme: http
        (HOSTED, {"HTTPS_PROXY": "https://proxy.corp"}, "https://proxy.corp"),
        (HOSTED, {"HTTPS_PROXY": "http://[fd00::1]:3128"}, "http://[fd00::1]:3128"),
    ],
)
def test_the_proxy_comes_from_the_variable_for_the_scheme(url: str, environ: dict[str, str], expected: str | None) -> None:
    proxy = proxy_for(url, environ)
    assert (proxy.url if proxy else None) == expected


@pytest.mark.parametrize(
    ("url", "no_proxy"),
    [
        (HOSTED, "*"),
        (HOSTED, "api.deepseek.com"),
        (HOSTED, "deepseek.com"),
        (HOSTED, ".deepseek.com"),
        (HOSTED, "other.org, deepseek.com"),
        (HOSTED, "API.DEEPSEEK.COM"),
        ("http://gpu-box:8000/v1", "gpu-box:8000"),
        ("http://10.1.2.3:8000/v1", "10.0.0.0/8"),
        ("http://10.1.2.3:8000/v1", "10.1.2.3"),
        ("http://[fd00::5]:8000/v1", "fd00::/16"),
    ],
)
def test_no_proxy_names_hosts_domains_ports_and_networks(url: str, no_proxy: str) -> None:
    environ = {"HTTPS_PROXY": "http://proxy:1", "HTTP_PROXY": "http://proxy:1"}
    assert proxy_for(url, environ) is not None
    assert proxy_for(url, {**environ, "NO_PROXY": no_proxy}) is None
    assert proxy_for(url, {**environ, "no_proxy": no_proxy}) is None


@pytest.mark.parametrize(
    ("url", "no_proxy"),
    [
        (HOSTED, "seek.com"),  # a suffix, not a domain
        (HOSTED, "api.deepseek.com.evil"),
        ("http://gpu-box:8000/v1", "gpu-box:9000"),
        ("http://10.1.2.3:8000/v1", "10.9.0.0/16"),
        ("http://gpu-box:8000/v1", " , "),
    ],
)
def test_no_proxy_does_not_match_more_than_it_names(url: str, no_proxy: str) -> None:
    environ = {"HTTPS_PROXY": "http://proxy:1", "HTTP_PROXY": "http://proxy:1", "NO_PROXY": no_proxy}
    assert proxy_for(url, environ) is not None


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:11434/v1", "http://localhost:8000/v1", "http://127.5.6.7/v1", "http://[::1]:8080/v1",
     "http://ollama.localhost/v1"],
)
def test_a_model_server_on_this_machine_is_never_behind_a_proxy(url: str) -> None:
    assert proxy_for(url, {"HTTP_PROXY": "http://proxy.corp:3128", "ALL_PROXY": "http://proxy.corp:3128"}) is None


def test_credentials_in_the_proxy_url_become_a_header_and_leave_the_url() -> None:
    proxy = proxy_for(HOSTED, {"HTTPS_PROXY": "http://me%40corp:p%3Ass@proxy.corp:3128"})
    assert proxy == Proxy("http://proxy.corp:3128", {"Proxy-Authorization": "Basic bWVAY29ycDpwOnNz"})
    assert "p:ss" not in proxy.url and "me@corp" not in proxy.url


@pytest.mark.parametrize(
    ("value", "named"),
    [("socks5://127.0.0.1:1080", "socks5://127.0.0.1:1080"), ("socks5h://user:secret@proxy:1080", "socks5h://proxy:1080"),
     ("http://proxy:notaport", "http://proxy:notaport"), ("http://", "http://?")],
)
def test_a_proxy_toolwire_cannot_use_is_an_error_naming_the_variable(value: str, named: str) -> None:
    with pytest.raises(UnusableProxy) as raised:
        proxy_for(HOSTED, {"ALL_PROXY": value})
    message = str(raised.value)
    assert message.startswith(f"ALL_PROXY names the proxy {named},"), message
    assert "NO_PROXY" in message and "secret" not in message


def test_the_proxy_credentials_go_where_only_the_proxy_reads_them() -> None:
    """An http upstream's request goes to the proxy: its own header. An https upstream's
    goes through a tunnel to the upstream: the credentials belong on the CONNECT alone."""
    proxy = Proxy("http://proxy.corp:3128", {"Proxy-Authorization": "Basic abc"})
    assert aiohttp_arguments(proxy, "http://gpu-box:8000/v1") == (
        {"Proxy-Authorization": "Basic abc"}, {"proxy": "http://proxy.corp:3128"}
    )
    assert aiohttp_arguments(proxy, HOSTED) == (
        {}, {"proxy": "http://proxy.corp:3128", "proxy_headers": {"Proxy-Authorization": "Basic abc"}}
    )
    assert aiohttp_arguments(None, HOSTED) == ({}, {})


@pytest.mark.parametrize(
    ("url", "no_proxy"),
    [
        ("http://[fd00::5]:8000/v1", "[fd00::5]:8000"),
        ("http://[fd00::5]:8000/v1", "[fd00::5]"),
        ("http://[fd00::5]:8000/v1", "fd00::5"),
        ("http://10.1.2.3:8000/v1", "10.1.2.3/8"),  # a network written with host bits set
        (HOSTED, "gpu-box:8000, other.org ,deepseek.com"),
        (HOSTED, "10.0.0.0/8, deepseek.com"),
        (HOSTED, "nothing.org:443, deepseek.com"),
    ],
)
def test_no_proxy_in_every_form_it_is_written(url: str, no_proxy: str) -> None:
    assert proxy_for(url, {"HTTPS_PROXY": "http://proxy:1", "HTTP_PROXY": "http://proxy:1", "NO_PROXY": no_proxy}) is None


@pytest.mark.parametrize(
    ("url", "no_proxy"),
    [
        ("http://[fd00::5]:8000/v1", "[fd00::5]:9000"),
        ("http://[fd00::5]:8000/v1", "[fd00::6]"),
        ("http://gpu-box:8000/v1", "10.0.0.0/8"),  # a network never covers a host name
        ("http://10.1.2.3:8000/v1", "not a network/8"),
        ("http://gpu-box:8000/v1", "gpu-box:80:80"),
    ],
)
def test_no_proxy_entries_that_do_not_cover_the_upstream(url: str, no_proxy: str) -> None:
    assert proxy_for(url, {"HTTP_PROXY": "http://proxy:1", "NO_PROXY": no_proxy}) is not None


def test_lower_case_all_proxy_and_a_url_without_a_host() -> None:
    assert proxy_for(HOSTED, {"all_proxy": "http://all:1"}) == Proxy("http://all:1")
    assert proxy_for("file:///v1", {"ALL_PROXY": "http://all:1"}) is None


def test_a_proxy_user_without_a_password() -> None:
    proxy = proxy_for(HOSTED, {"HTTPS_PROXY": "http://me@proxy.corp:3128"})
    assert proxy == Proxy("http://proxy.corp:3128", {"Proxy-Authorization": "Basic bWU6"})  # "me:"


def test_the_refusal_says_what_works() -> None:
    with pytest.raises(ValueError) as raised:
        proxy_for(HOSTED, {"HTTPS_PROXY": "socks5://127.0.0.1:1080"})
    assert str(raised.value) == (
        "HTTPS_PROXY names the proxy socks5://127.0.0.1:1080, which toolwire cannot use: only http:// and https:// "
        "proxies with a host and a valid port are supported. Set NO_PROXY to the upstream's host to connect directly."
    )


def test_a_proxy_port_out_of_range_is_shown_as_given_without_its_credentials() -> None:
    with pytest.raises(UnusableProxy) as raised:
        proxy_for(HOSTED, {"HTTPS_PROXY": "http://me:secret-pw@proxy.corp:99999"})
    assert str(raised.value).startswith("HTTPS_PROXY names the proxy http://proxy.corp:99999, which toolwire cannot use")
    with pytest.raises(UnusableProxy) as raised:
        proxy_for(HOSTED, {"HTTPS_PROXY": "http://me:secret-pw@"})
    assert str(raised.value).startswith("HTTPS_PROXY names the proxy http://?, which")


def test_an_empty_no_proxy_entry_does_not_end_the_list() -> None:
    environ = {"HTTPS_PROXY": "http://proxy.internal:3128", "NO_PROXY": "other.example, ,,api.example.com"}
    assert proxy_for("https://api.example.com/v1", environ) is None
