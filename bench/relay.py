"""A bare relay on toolwire's HTTP stack: the floor of any Python gateway built on it.

    python -m bench.relay --upstream http://127.0.0.1:PORT/v1 --chat v1=bench/out/bodies/v1.chat.json ...

An ASGI callable served the way ``toolwire serve`` serves its app: uvicorn with uvloop
and httptools, no access log, one process. For each ``POST /v1/responses`` it reads the
whole request body and discards it, POSTs a fixed, pre-translated Chat Completions body
to ``{upstream}/chat/completions`` through one pooled ``aiohttp.ClientSession`` set up as
toolwire's upstream client sets up its own (``toolwire.upstream._http``, with its
connector, ``UpstreamConnector``), and streams
the upstream's bytes back unchanged as ``text/event-stream``. No parsing, no
translation, no logging: what is left is what uvicorn + aiohttp cost per request.

Which Chat body goes upstream: one relay serves every benchmark body, and the request's
``X-Bench-Body`` header names the one to send (``--chat NAME=PATH`` for each). A header
lookup costs next to nothing, and one process per upstream kind is measured and
CPU-watched exactly like the one-worker gateway; one relay per body would double the
processes for no better figure. The body has to follow the request, not be fixed,
because the canned upstream's tool answer (``--reply tool``) depends on it, and the
relay should move the same bytes upstream as toolwire does for that request.

Like ``bench.upstream``, it binds its port itself (``--port 0``: any free one) and
prints ``listening on HOST:PORT`` on stdout once the socket accepts connections
(``bench.procs.Service`` reads that line).
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp
import uvicorn

from toolwire.upstream._connector import UpstreamConnector

BODY_HEADER = "X-Bench-Body"
"""The request header naming the benchmark body (``--chat NAME=...``) to send upstream."""

_BODY_HEADER = BODY_HEADER.lower().encode()
_STREAM_HEAD = [(b"content-type", b"text/event-stream")]
_UPSTREAM_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
_Scope = dict[str, Any]


class Relay:
    """The ASGI app: ``POST /v1/responses`` -> the chosen Chat body upstream -> its bytes back."""

    def __init__(self, upstream_url: str, chats: dict[bytes, bytes]) -> None:
        self.url = upstream_url.rstrip("/") + "/chat/completions"
        self.chats = chats
        self.session: aiohttp.ClientSession | None = None

    async def __call__(self, scope: _Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # The session settings of toolwire.upstream._http.HttpEndpoint, with its
                # defaults; like it, the headers go with each request.
                self.session = aiohttp.ClientSession(
                    connector=UpstreamConnector(limit=1000, ttl_dns_cache=300),
                    timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=300.0),
                    auto_decompress=True,
                    cookie_jar=aiohttp.DummyCookieJar(),
                )
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.session is not None:
                    await self.session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: _Scope, receive: Any, send: Any) -> None:
        more_body = True
        while more_body:  # read the client's body to the end, and drop it
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            more_body = message.get("more_body", False)
        if scope["method"] != "POST" or scope["path"] != "/v1/responses":
            await _plain(send, 404, b"not found\n")
            return
        chat = self.chats.get(next((v for k, v in scope["headers"] if k == _BODY_HEADER), b""))
        if chat is None:
            await _plain(send, 400, f"{BODY_HEADER} names none of the relay's bodies\n".encode())
            return
        assert self.session is not None
        started = False
        try:
            async with self.session.post(self.url, data=chat, headers=_UPSTREAM_HEADERS) as response:
                await send({"type": "http.response.start", "status": response.status, "headers": _STREAM_HEAD})
                started = True
                async for data in response.content.iter_any():
                    await send({"type": "http.response.body", "body": data, "more_body": True})
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            if not started:
                await _plain(send, 502, f"upstream: {exc or type(exc).__name__}\n".encode())
                return
            # The stream ends short of its end marker: the wrk script counts the response as bad.
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _plain(send: Any, status: int, text: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": text, "more_body": False})


def _chat_option(value: str) -> tuple[bytes, bytes]:
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError("takes NAME=PATH")
    return name.encode(), Path(path).read_bytes()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.relay", description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the Chat Completions base URL, e.g. http://127.0.0.1:PORT/v1")
    parser.add_argument("--chat", type=_chat_option, action="append", required=True, metavar="NAME=PATH",
                        help=f"a pre-translated Chat body, sent when the request's {BODY_HEADER} is NAME; repeatable")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed on stdout)")
    args = parser.parse_args(argv)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(2048)  # uvicorn's default backlog; connections wait here until it serves
    host, port = sock.getsockname()[:2]
    print(f"listening on {host}:{port}", flush=True)
    config = uvicorn.Config(
        Relay(args.upstream, dict(args.chat)), loop="uvloop", http="httptools", access_log=False,
        log_level="warning", lifespan="on",
    )
    uvicorn.Server(config).run(sockets=[sock])
    sys.exit(0)


if __name__ == "__main__":
    main()
