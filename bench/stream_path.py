"""Where a streamed answer's CPU goes in the gateway, layer by layer, in process.

    python -m bench.stream_path [--quick] [--reads event|answer]

One event loop (uvloop, as the gateway runs), no sockets: the canned upstream's text
answer (a role chunk, 40 text chunks, the finish and usage chunks, ``[DONE]``) is fed
into a real ``aiohttp.StreamReader`` one SSE event per loop iteration, as an upstream
streaming token by token is read at one connection (``--reads answer``: all of it in one
read, as a busy gateway finds it), and each row adds one layer of what the gateway does
with it. The ASGI ``send`` at the end does nothing, so the sockets' own cost (the same
for the bare relay and for toolwire) is left out. Each row is the minimum over rounds of
the mean ``time.process_time`` per stream.

- ``reader``: the reads alone (``iter_any``), one loop iteration per event;
- ``relay``: and each read handed to ``send`` as it came (what ``bench/relay.py`` does);
- ``batches``: toolwire's ``SSEBatches`` instead, as the Chat backend reads: SSE decoding
  and ``orjson.loads`` of each event up to ``[DONE]``, but the plain text chunks after the
  first read from their bytes (``PlainContentFrames``);
- ``translated``: and every chunk through the Chat stream translator (``start``,
  ``feed``, ``finish``);
- ``encoded``: and each batch's events serialized and framed by ``SseTransport``;
- ``pump``: the gateway's own ``pump`` and ``Answer`` around all of that (what the
  exchange notes, the end held while the response is kept).

What a layer adds is its cost minus that of the layer under it (``BELOW``): the relay and
``batches`` both add to the reads, each later row to the one before it.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import uvloop
from aiohttp.base_protocol import BaseProtocol

from toolwire.protocol import PlainContentFrames, parse_request
from toolwire.server._answer import Answer, pump
from toolwire.server._exchange import Exchange
from toolwire.server._http_responses import SseTransport
from toolwire.server.observe import Redactor
from toolwire.translate import ChatStreamTranslator, translate_request
from toolwire.upstream._sse_batches import SSEBatches, parse_json_object

from . import upstream as canned
from .bodies import build

LAYERS = ("reader", "relay", "batches", "translated", "encoded", "pump")
BELOW = {"relay": "reader", "batches": "reader", "translated": "batches", "encoded": "translated", "pump": "encoded"}
"""The layer each one adds to: the relay and toolwire's decoding both start from the reads."""


@dataclass
class LayerCost:
    layer: str
    us_per_stream: float
    added_us: float  # over the layer it adds to
    over: str  # that layer (BELOW), "" for the first


class _Transport:
    """What ``BaseProtocol`` asks of a transport while a reader pauses and resumes it."""

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False


class _Response:
    """The part of ``aiohttp.ClientResponse`` that ``SSEBatches`` reads."""

    content_type = "text/event-stream"

    def __init__(self, content: aiohttp.StreamReader) -> None:
        self.content = content


async def _send(message: Any) -> None:
    pass


async def _receive() -> Any:
    await asyncio.Event().wait()


async def _keep(response: dict[str, Any]) -> None:
    pass


class StreamPath:
    """One streamed answer through the gateway's layers; ``run(layer)`` goes as far as ``layer``."""

    def __init__(self, body: str = "v2", send: Callable[[Any], Awaitable[None]] = _send, reads: str = "event") -> None:
        self.send = send  # the ASGI send at the end: a no-op when measuring
        self.frames = [b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in canned.text_chunks(40)]
        self.frames.append(b"data: [DONE]\n\n")
        if reads == "answer":
            self.frames = [b"".join(self.frames)]
        elif reads != "event":
            raise ValueError(f"reads: event or answer, not {reads!r}")
        self.request = parse_request(build(body).data)
        self.tools = translate_request(self.request).tools
        self.redact = Redactor([]).redact_json

    def _translator(self) -> ChatStreamTranslator:
        return ChatStreamTranslator(self.request, self.tools, response_id="resp_1", created_at=1, model="m")

    async def run(self, layer: str) -> None:
        if layer not in LAYERS:
            raise ValueError(f"no layer {layer!r}: one of {', '.join(LAYERS)}")
        loop = asyncio.get_running_loop()
        protocol = BaseProtocol(loop)
        protocol.transport = _Transport()  # type: ignore[assignment]
        reader = aiohttp.StreamReader(protocol, 2**16, loop=loop)
        feeding = asyncio.create_task(self._feed(reader))
        await getattr(self, "_" + layer)(reader)
        await feeding

    async def _feed(self, reader: aiohttp.StreamReader) -> None:
        for frame in self.frames:
            reader.feed_data(frame)
            await asyncio.sleep(0)
        reader.feed_eof()

    async def _reader(self, reader: aiohttp.StreamReader) -> None:
        async for _ in reader.iter_any():
            pass

    async def _relay(self, reader: aiohttp.StreamReader) -> None:
        send = self.send
        await send({"type": "http.response.start", "status": 200, "headers": []})
        async for data in reader.iter_any():
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _sse_batches(self, reader: aiohttp.StreamReader) -> SSEBatches:
        # as the Chat backend reads: plain chunks from their bytes once their shape is known
        return SSEBatches(_Response(reader), 300.0, parse_json_object, frames=PlainContentFrames(), where="the canned upstream")  # type: ignore[arg-type]

    async def _batches(self, reader: aiohttp.StreamReader) -> None:
        async for _ in self._sse_batches(reader):
            pass

    async def _translated(self, reader: aiohttp.StreamReader) -> None:
        machine = self._translator()
        events = machine.start()
        async for batch in self._sse_batches(reader):
            for chunk in batch:
                events.extend(machine.feed(chunk))
        events.extend(machine.finish(completed_at=1, ended_cleanly=True))

    async def _encoded(self, reader: aiohttp.StreamReader) -> None:
        machine, transport = self._translator(), SseTransport(self.send, _receive)
        await transport.open_stream()
        events = machine.start()
        async for batch in self._sse_batches(reader):
            for chunk in batch:
                events.extend(machine.feed(chunk))
            await transport.send_events(events, last=False)
            events = []
        await transport.send_events(machine.finish(completed_at=1, ended_cleanly=True), last=True)

    async def _pump(self, reader: aiohttp.StreamReader) -> None:
        answer = Answer(Exchange("resp_1", b"{}"), SseTransport(self.send, _receive), self.redact)
        batches = self._sse_batches(reader)
        try:
            await pump(answer, batches, self._translator(), _keep)
        finally:
            await batches.aclose()  # as the gateway's OpenStream does on leaving the stream


def measure(body: str = "v2", *, quick: bool = False, reads: str = "event") -> list[LayerCost]:
    """Each layer's CPU per stream (µs), the minimum over 9 rounds of 300 streams
    (``quick``: one round of 10, a smoke run)."""
    streams, rounds = (10, 1) if quick else (300, 9)
    path = StreamPath(body, reads=reads)
    loop = uvloop.new_event_loop()
    try:

        async def many(layer: str, count: int) -> None:
            for _ in range(count):
                await path.run(layer)

        costs: list[LayerCost] = []
        for layer in LAYERS:
            loop.run_until_complete(many(layer, max(1, streams // 3)))  # warm-up
            best = float("inf")
            for _ in range(rounds):
                started = time.process_time()
                loop.run_until_complete(many(layer, streams))
                best = min(best, (time.process_time() - started) / streams * 1e6)
            over = BELOW.get(layer, "")
            below = next((c.us_per_stream for c in costs if c.layer == over), 0.0)
            costs.append(LayerCost(layer, best, best - below, over))
        return costs
    finally:
        loop.close()


def table(costs: list[LayerCost]) -> str:
    rows = ["| layer | µs per stream | added by the layer | over |", "| --- | ---: | ---: | --- |"]
    rows += [
        f"| `{c.layer}` | {c.us_per_stream:.0f} | {c.added_us:+.0f} | {c.over} |" for c in costs
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.stream_path", description=__doc__.splitlines()[0])
    parser.add_argument("--body", default="v2", help="the request whose tools the translator is given (default v2)")
    parser.add_argument("--quick", action="store_true", help="few streams and rounds: a smoke run")
    parser.add_argument("--reads", choices=["event", "answer"], default="event",
                        help="one SSE event per read (default), or the whole answer in one read")
    args = parser.parse_args(argv)
    print(table(measure(args.body, quick=args.quick, reads=args.reads)))


if __name__ == "__main__":
    main()
