"""Open many concurrent streaming requests and keep them open (for the RSS measurement).

    python -m bench.hold --port P --body v1.json [--body v2.json] --streams 500

Raw asyncio sockets, one HTTP/1.1 request per connection (bodies used in turn). A stream
counts as open once its status line is ``200`` and the first text delta
(``response.output_text.delta``) has arrived, i.e. the gateway has parsed and translated
the request, reached the upstream and translated its first chunks. When every stream is
open, one JSON line ``{"open": N, "seconds": T}`` goes to stdout; the streams then stay
open until stdin is closed, and are closed together.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

READY_MARKER = b"response.output_text.delta"


def request_bytes(port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Content-Length: {len(body)}"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def open_stream(port: int, payload: bytes, timeout: float) -> asyncio.StreamWriter:
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    writer.write(payload)
    await writer.drain()
    head = b""
    tail = b""
    async with asyncio.timeout(timeout):
        while READY_MARKER not in tail:
            data = await reader.read(65536)
            if not data:
                raise ConnectionError(f"closed before the first text delta: {(head + tail)[:300]!r}")
            if len(head) < 16:
                head += data[: 16 - len(head)]
                if len(head) >= 12 and not head.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")):
                    raise ConnectionError(f"not 200: {head + data[:300]!r}")
            tail = tail[-64:] + data
    return writer


async def hold(port: int, payloads: list[bytes], streams: int, timeout: float, parallel: int) -> None:
    started = time.monotonic()
    limit = asyncio.Semaphore(parallel)

    async def one(index: int) -> asyncio.StreamWriter:
        async with limit:
            return await open_stream(port, payloads[index % len(payloads)], timeout)

    results = await asyncio.gather(*(one(i) for i in range(streams)), return_exceptions=True)
    writers = [result for result in results if isinstance(result, asyncio.StreamWriter)]
    failures = [repr(result) for result in results if isinstance(result, BaseException)]
    print(json.dumps({"open": len(writers), "failed": len(failures), "first_failures": failures[:3],
                      "seconds": round(time.monotonic() - started, 3)}), flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes our stdin
    for writer in writers:
        writer.close()
    await asyncio.gather(*(writer.wait_closed() for writer in writers), return_exceptions=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hold", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/v1/responses")
    parser.add_argument("--body", type=Path, action="append", required=True, help="a body file (repeatable)")
    parser.add_argument("--header", action="append", default=[], help="NAME: VALUE (repeatable)")
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--parallel", type=int, default=64, help="connections being opened at once")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    for header in args.header:
        name, _, value = header.partition(":")
        headers[name.strip()] = value.strip()
    payloads = [request_bytes(args.port, args.path, path.read_bytes(), headers) for path in args.body]
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(hold(args.port, payloads, args.streams, args.timeout, args.parallel))
    else:
        uvloop.run(hold(args.port, payloads, args.streams, args.timeout, args.parallel))


if __name__ == "__main__":
    main()
