"""A forward HTTP proxy on 127.0.0.1 for tests, sending every request to one local port.

Clients send a proxy the whole URL (``POST http://upstream.invalid:8000/v1/chat/completions``).
``ForwardProxy`` records that URL and the ``Proxy-Authorization`` it came with, forwards
the request to ``127.0.0.1:<target_port>`` whatever host it names, and streams the answer
back unchanged. A host that resolves nowhere (``.invalid``, RFC 2606) in the client's
URL then proves that the request went through the proxy.

An https upstream is reached through a tunnel instead: ``CONNECT upstream.invalid:443``,
then TLS inside it. ``tunnel_url`` is a second port for those (aiohttp serves no
``CONNECT``): it records the target and the ``Proxy-Authorization``, connects to
``127.0.0.1:<target_port>``, answers ``200`` and passes the bytes both ways, seeing none
of what the TLS inside carries. Like ``ChatUpstream`` it is a ``ThreadedServer``: aiohttp
in a background thread with its own loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from tests.support.threaded_server import Recorded, ThreadedServer

# Hop-by-hop headers (RFC 9110 §7.6.1) and the framing the two sides set themselves.
_NOT_FORWARDED = frozenset(
    {"connection", "keep-alive", "proxy-authorization", "proxy-connection", "te", "trailer",
     "transfer-encoding", "upgrade", "host", "content-length"}
)


@dataclass(frozen=True)
class ProxiedRequest:
    method: str
    url: str
    """The absolute URL the client asked the proxy for (``host:port`` for a ``CONNECT``)."""
    proxy_authorization: str | None
    forwarded_headers: dict[str, str]


class ForwardProxy(ThreadedServer):
    """``with ForwardProxy(upstream.port) as proxy:`` ... ``proxy.url``, ``proxy.requests``."""

    def __init__(self, target_port: int) -> None:
        super().__init__()
        self.target_port = target_port
        self._requests = Recorded[ProxiedRequest]("proxied request")
        self._session: aiohttp.ClientSession | None = None
        self._tunnels: asyncio.Server | None = None
        self._open_tunnels: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def tunnel_url(self) -> str:
        """The proxy for https upstreams (``CONNECT``)."""
        assert self._tunnels is not None, "ForwardProxy is not started"
        return f"http://127.0.0.1:{self._tunnels.sockets[0].getsockname()[1]}"

    @property
    def requests(self) -> list[ProxiedRequest]:
        return self._requests.snapshot()

    def _make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        return app

    async def _on_start(self) -> None:
        self._session = aiohttp.ClientSession(auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar())
        self._tunnels = await asyncio.start_server(self._tunnel, "127.0.0.1", 0)

    async def _on_stop(self) -> None:
        if self._tunnels is not None:
            self._tunnels.close()
            self._tunnels = None
        for tunnel in list(self._open_tunnels):  # a client's kept-alive tunnel ends with the proxy
            tunnel.cancel()
        await asyncio.gather(*self._open_tunnels, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _tunnel(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._open_tunnels.add(task)
        try:
            head = (await client_reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            method, target, _ = head.split("\r\n", 1)[0].split(" ", 2)
            headers = dict(
                (name.strip().lower(), value.strip())
                for name, _, value in (line.partition(":") for line in head.split("\r\n")[1:] if line)
            )
            self._requests.append(ProxiedRequest(method, target, headers.get("proxy-authorization"), {}))
            if method != "CONNECT":
                client_writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
            client_writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await asyncio.gather(_pipe(client_reader, upstream_writer), _pipe(upstream_reader, client_writer))
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._open_tunnels.discard(task)
            client_writer.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        forwarded = {name: value for name, value in request.headers.items() if name.lower() not in _NOT_FORWARDED}
        self._requests.append(
            ProxiedRequest(request.method, request.raw_path, request.headers.get("Proxy-Authorization"), forwarded)
        )
        assert self._session is not None
        target = f"http://127.0.0.1:{self.target_port}{request.rel_url}"
        async with self._session.request(request.method, target, headers=forwarded, data=await request.read()) as answer:
            response = web.StreamResponse(
                status=answer.status,
                headers={name: value for name, value in answer.headers.items() if name.lower() not in _NOT_FORWARDED},
            )
            await response.prepare(request)
            async for data in answer.content.iter_any():
                await response.write(data)
            await response.write_eof()
            return response


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until the reading side ends, then end the writing side."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(OSError):
            writer.close()
