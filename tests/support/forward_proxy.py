"""A forward HTTP proxy on 127.0.0.1 for tests, sending every request to one local port.

Clients send a proxy the whole URL (``POST http://upstream.invalid:8000/v1/chat/completions``).
``ForwardProxy`` records that URL and the ``Proxy-Authorization`` it came with, forwards
the request to ``127.0.0.1:<target_port>`` whatever host it names, and streams the answer
back unchanged. A host that resolves nowhere (``.invalid``, RFC 2606) in the client's
URL then proves that the request went through the proxy. Like ``ChatUpstream`` it runs
aiohttp in a background thread with its own loop.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from dataclasses import dataclass
from types import TracebackType

import aiohttp
from aiohttp import web

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


class ForwardProxy:
    """``with ForwardProxy(upstream.port) as proxy:`` ... ``proxy.url``, ``proxy.requests``."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._requests: list[ProxiedRequest] = []
        self._lock = threading.Lock()
        self._port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        if self._port is None:
            raise RuntimeError("ForwardProxy is not started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def requests(self) -> list[ProxiedRequest]:
        with self._lock:
            return list(self._requests)

    def start(self) -> ForwardProxy:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="forward-proxy", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        asyncio.run_coroutine_threadsafe(self._serve(), loop).result(timeout=10)
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._close(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> ForwardProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        self._port = sock.getsockname()[1]
        self._runner = runner
        self._session = aiohttp.ClientSession(auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar())

    async def _close(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        forwarded = {name: value for name, value in request.headers.items() if name.lower() not in _NOT_FORWARDED}
        with self._lock:
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
