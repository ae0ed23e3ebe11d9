"""``toolwire._addresses``: a host as a URL's authority writes it."""

from __future__ import annotations

import pytest

from toolwire._addresses import url_host


@pytest.mark.parametrize(
    ("host", "written"),
    [("::1", "[::1]"), ("fe80::1%eth0", "[fe80::1%eth0]"), ("127.0.0.1", "127.0.0.1"), ("api.example.com", "api.example.com")],
)
def test_an_ipv6_host_is_bracketed_and_no_other(host: str, written: str) -> None:
    assert url_host(host) == written
