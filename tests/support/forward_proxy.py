"""A forward HTTP proxy on 127.0.0.1 for tests, sending every request to one local port.

Clients send a proxy the whole URL (``POST http://upstream.invalid:8000/v1/chat/completions``).
``ForwardProxy`` records that URL and the ``Proxy-Authorization`` it came with, forwards
the request to ``127.0.0.1:<target_port>`` whatever host it names, and streams the answer
back unchanged. A host that resolves nowhere (``.invalid``, RFC 2606) in the client's
URL then proves that the request went through the proxy. Like ``ChatUpstream`` it is a
``ThreadedServer``: aiohttp in a background thread with its own loop.
"""

from __future__ import annotations

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
    """The absolute URL the client asked the proxy for."""
    proxy_authorization: str | None
    forwarded_headers: dict[str, str]


class ForwardProxy(ThreadedServer):
    """``with ForwardProxy(upstream.port) as proxy:`` ... ``proxy.url``, ``proxy.requests``."""

    def __init__(self, target_port: int) -> None:
        super().__init__()
        self.target_port = target_port
        self._requests = Recorded[ProxiedRequest]("proxied request")
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> list[ProxiedRequest]:
        return self._requests.snapshot()

    def _make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        return app

    async def _on_start(self) -> None:
        self._session = aiohttp.ClientSession(auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar())

    async def _on_stop(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

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
