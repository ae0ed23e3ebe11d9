"""An upstream that answers with exact bytes, for what no well-behaved HTTP server sends.

``raw_upstream(*answers)`` serves, on a free loopback port in the running event loop, one
connection per answer: it reads the request's head and body, then writes the answer's
pieces in order (a float among them pauses that many seconds), then closes, or keeps the
connection open when the answer ends with ``HOLD``. A status line that is not HTTP, a
body shorter than its ``Content-Length``, an error body that breaks off, bytes that are
not UTF-8, a declared length far larger than what comes: the cases the scripted servers
of tests/support, which speak HTTP through aiohttp, cannot make.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

HOLD = object()
"""Ends an answer that keeps its connection open until the client closes it."""

Piece = bytes | float | object


@contextlib.asynccontextmanager
async def raw_upstream(*answers: Sequence[Piece]) -> AsyncIterator[str]:
    """Serve ``answers``, one per connection in order; yield the base URL (``.../v1``)."""
    queue = list(answers)
    handlers: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
                0,
            )
            await reader.readexactly(length)
            pieces = queue.pop(0) if queue else [b"HTTP/1.1 500 Script Ran Out\r\nContent-Length: 0\r\n\r\n"]
            for piece in pieces:
                if piece is HOLD:
                    await reader.read()  # until the client goes
                elif isinstance(piece, float):
                    await writer.drain()
                    await asyncio.sleep(piece)
                else:
                    assert isinstance(piece, bytes)
                    writer.write(piece)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            handlers.discard(task)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()
        for task in list(handlers):
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()
