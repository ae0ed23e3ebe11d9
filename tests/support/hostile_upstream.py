"""A Chat Completions upstream that misbehaves on request: answers that never end.

`HostileUpstream` answers ``POST /v1/chat/completions`` according to the first word of
the request's last user message, so one gateway in front of it can be sent honest and
hostile requests side by side (``POST /v1/responses`` too, for the hostile answers, which
are the same bytes whatever the protocol):

* ``honest`` -- a normal answer, streamed or not as asked (the rest of the message is
  echoed back as ``echo <rest>``);
* ``endless-line`` -- 200 ``text/event-stream``, then ``data: {"x": "aaaa...`` with no line
  end, as fast as the gateway reads (streaming), or a JSON body that never ends
  (``{"x": "aaaa...``, chunked) for a non-streaming request;
* ``endless-event`` -- ``data: aaaa...`` lines of 1 KiB, never a blank line;
* ``gzip-line`` -- the endless line (or JSON body), ``Content-Encoding: gzip``: a few KiB
  on the wire for every MiB the gateway decompresses (a compression bomb);
* ``zstd-line`` -- the same bomb with ``Content-Encoding: zstd`` (which aiohttp decodes
  with ``backports.zstd``, a dependency of the gateway);
* ``brotli`` -- ``Content-Encoding: br``, which the gateway never asked for and cannot
  decode (no brotli library: aiohttp decodes gzip, deflate and, with ``backports.zstd``,
  zstd);
* ``endless-text`` -- a valid stream of text deltas that never finishes, as fast as the
  gateway reads;
* ``stall`` -- one valid text delta, then silence (a stream held open).

Every hostile answer runs until the peer closes the connection; each one the gateway
closed is recorded in `closed` (with the bytes written before), so a test can wait for
the gateway to let go. Run alone (``python -m tests.support.hostile_upstream --port 0``),
it prints ``listening on 127.0.0.1:PORT`` and serves until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from backports import zstd

from tests.support.chat_upstream import ReplyContext, Text, completion_payload, stream_payloads
from tests.support.threaded_server import Recorded, ThreadedServer

__all__ = ["BEHAVIOURS", "Closed", "HostileUpstream", "prompt"]

BEHAVIOURS = ("honest", "endless-line", "endless-event", "gzip-line", "zstd-line", "brotli", "endless-text", "stall")
_PIECE = b"a" * 65536


@dataclass(frozen=True)
class Closed:
    """A hostile answer whose connection the peer closed."""

    behaviour: str
    stream: bool
    bytes_written: int
    """Bytes handed to the socket before the close was noticed (compressed, for gzip)."""
    noticed_at: float


def prompt(behaviour: str, text: str = "") -> str:
    """The user message that asks for ``behaviour``."""
    return f"{behaviour} {text}".strip()


def _user_text(body: Any) -> str:
    """The last user message of a Chat request, or a Responses request's ``input`` text."""
    if isinstance(body.get("input"), str):
        return str(body["input"])
    for message in reversed(body.get("messages") or body.get("input") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else "".join(p.get("text", "") for p in content or ())
    return ""


Writer = Callable[[bytes], Awaitable[None]]


class HostileUpstream(ThreadedServer):
    def __init__(self, *, port: int = 0) -> None:
        super().__init__(port=port, handler_cancellation=True)
        self.closed = Recorded[Closed]("hostile answer closed by its peer")
        self.requests = 0

    def _make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/chat/completions", self._answer)
        app.router.add_post("/v1/responses", self._answer)
        app.router.add_get("/v1/models", self._models)
        return app

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "tests"}]})

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        body = orjson.loads(await request.read())
        behaviour, _, rest = _user_text(body).partition(" ")
        stream = body.get("stream") is True
        if behaviour not in BEHAVIOURS or behaviour == "honest":
            return await self._honest(request, body, rest, stream)
        content_type = "text/event-stream" if stream else "application/json"
        headers = {"Content-Type": content_type}
        if behaviour == "gzip-line":
            headers["Content-Encoding"] = "gzip"
        elif behaviour == "zstd-line":
            headers["Content-Encoding"] = "zstd"
        elif behaviour == "brotli":
            headers["Content-Encoding"] = "br"
        response = web.StreamResponse(status=200, headers=headers)
        await response.prepare(request)
        written = 0

        async def write(data: bytes) -> None:
            nonlocal written
            await response.write(data)
            written += len(data)

        try:
            if behaviour == "gzip-line":
                await _gzip_forever(write, stream)
            elif behaviour == "zstd-line":
                await _zstd_forever(write, stream)
            elif behaviour == "brotli":
                await write(_PIECE)  # junk: nothing here can decode it anyway
                await _forever(write, _PIECE)
            elif behaviour == "endless-event":
                await _forever(write, b"data: " + b"a" * 1017 + b"\n")
            elif behaviour == "endless-text":
                await _endless_text(write, str(body.get("model", "m")), forever=True)
            elif behaviour == "stall":
                await _endless_text(write, str(body.get("model", "m")), forever=False)
                await asyncio.Event().wait()
            else:
                await write(b'data: {"x": "' if stream else b'{"x": "')
                await _forever(write, _PIECE)
        except ConnectionError:
            self.closed.append(Closed(behaviour, stream, written, time.monotonic()))
        except asyncio.CancelledError:  # aiohttp cancels the handler of a peer that left
            self.closed.append(Closed(behaviour, stream, written, time.monotonic()))
            raise
        return response

    async def _honest(self, request: web.Request, body: Any, text: str, stream: bool) -> web.StreamResponse:
        ctx = ReplyContext(request_index=self.requests, model=str(body.get("model", "m")))
        reply = Text(f"echo {text}".strip())
        if not stream:
            return web.Response(body=orjson.dumps(completion_payload(reply, ctx)), content_type="application/json")
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        payload = b"".join(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in stream_payloads(reply, ctx))
        await response.write(payload + b"data: [DONE]\n\n")
        await response.write_eof()
        return response


async def _forever(write: Writer, piece: bytes) -> None:
    while True:
        await write(piece)


async def _gzip_forever(write: Writer, stream: bool) -> None:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip framing
    await write(compressor.compress(b'data: {"x": "' if stream else b'{"x": "'))
    mebibyte = _PIECE * 16
    while True:
        await write(compressor.compress(mebibyte) + compressor.flush(zlib.Z_SYNC_FLUSH))


async def _zstd_forever(write: Writer, stream: bool) -> None:
    compressor = zstd.ZstdCompressor(level=19)
    await write(compressor.compress(b'data: {"x": "' if stream else b'{"x": "'))
    mebibyte = _PIECE * 16
    while True:
        await write(compressor.compress(mebibyte, mode=zstd.ZstdCompressor.FLUSH_BLOCK))


async def _endless_text(write: Writer, model: str, *, forever: bool) -> None:
    words = " ".join(["word"] * 200)
    chunk = {"id": "chatcmpl-endless", "object": "chat.completion.chunk", "created": 0, "model": model,
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": words}, "finish_reason": None}]}
    event = b"data: " + orjson.dumps(chunk) + b"\n\n"
    await write(event)
    while forever:
        await write(event * 16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = HostileUpstream(port=args.port).start()
    print(f"listening on 127.0.0.1:{server.port}", flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
