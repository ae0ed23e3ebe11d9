"""``HttpEndpoint``: an upstream's address is resolved again after five minutes, as the
README says, so a moved upstream (a redeployed model server, a DNS failover) is followed
without restarting the gateway, and a busy gateway does not look it up per request.

The connector's resolver is replaced by one that answers for a made-up name with the
scripted upstream's loopback address and counts the lookups; its clock (aiohttp's DNS
cache reads ``time.monotonic`` through ``aiohttp.connector``) is moved by hand.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import aiohttp.connector
import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from tests.support.chat_upstream import ChatUpstream, Text
from toolwire.upstream import HttpEndpoint

NAME = "model-server.test"


def counting_resolver(lookups: list[str]) -> type[AbstractResolver]:
    """A resolver class (aiohttp makes its own) answering every lookup of ``NAME`` with
    127.0.0.1 and noting it in ``lookups``."""

    class CountingResolver(AbstractResolver):
        def __init__(self, *_: object, **__: object) -> None:
            pass

        async def resolve(
            self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
        ) -> list[ResolveResult]:
            assert host == NAME, f"only {NAME} is looked up here, not {host}"
            lookups.append(host)
            return [{"hostname": host, "host": "127.0.0.1", "port": port, "family": socket.AF_INET, "proto": 0, "flags": 0}]

        async def close(self) -> None:
            pass

    return CountingResolver


async def test_an_upstream_address_is_looked_up_again_after_five_minutes_not_before(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1_000.0]
    monkeypatch.setattr(aiohttp.connector, "monotonic", lambda: now[0])
    lookups: list[str] = []
    monkeypatch.setattr(aiohttp.connector, "DefaultResolver", counting_resolver(lookups))
    port = urlsplit(upstream.base_url).port
    endpoint = HttpEndpoint(upstream.base_url.replace(f"127.0.0.1:{port}", f"{NAME}:{port}"), "/chat/completions")
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    lookups_after = []
    try:
        # Each request comes more than 15 s after the one before, once its connection,
        # idle, has been dropped: each opens a connection and needs the address.
        for seconds in (0.0, 60.0, 285.0, 301.0, 580.0, 602.0):
            now[0] = 1_000.0 + seconds
            upstream.enqueue(Text("hi"))
            answer = await endpoint.post_for_json(body)
            assert answer["choices"][0]["message"]["content"] == "hi"
            lookups_after.append(len(lookups))
    finally:
        await endpoint.aclose()
    assert len(upstream.chat_requests) == 6
    # Looked up at 0 s, kept until 300 s are past (at 301 s), then kept until 601 s are.
    assert lookups_after == [1, 1, 1, 2, 2, 3]
