"""``bench.upstream --pace-ms``: a stream's events are written that far apart, as a model
generating tokens writes them, and the bytes are those of the unpaced answer. The spacing
is checked from below only (a loaded machine only ever makes it longer)."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
import uvloop

from bench import upstream as canned

from .comparisons import ROOT

T = TypeVar("T")
PACE = 0.005
STREAM_REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
    b"Content-Length: 15\r\n%s\r\n{\"stream\":true}"
)


async def _read_answer(port: int, extra_header: bytes = b"") -> tuple[list[tuple[float, bytes]], bool]:
    """The answer's reads with their times, and whether the server closed the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(STREAM_REQUEST % extra_header)
    reads: list[tuple[float, bytes]] = []
    closed = False
    try:
        while not b"".join(data for _, data in reads).endswith(canned._LAST_CHUNK):
            data = await asyncio.wait_for(reader.read(65536), 5)
            if not data:
                closed = True
                break
            reads.append((time.monotonic(), data))
        if not closed:
            closed = await asyncio.wait_for(reader.read(1), 0.5 if extra_header else 0.05) == b""
    except TimeoutError:
        pass
    finally:
        writer.close()
    return reads, closed


async def _serving(upstream: canned.Upstream, client: Callable[[int], Awaitable[T]]) -> T:
    """``client(port)`` run against ``upstream`` served on a free port."""
    ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(canned.serve("127.0.0.1", 0, upstream, ready=ready.set_result))
    try:
        return await client(await ready)
    finally:
        server.cancel()
        with pytest.raises(asyncio.CancelledError):
            await server


def test_paced_events_come_apart_with_the_unpaced_bytes() -> None:
    upstream = canned.Upstream(pace=PACE)
    reads, closed = uvloop.run(_serving(upstream, _read_answer))
    writes = upstream.text.paced_writes[False]
    assert b"".join(data for _, data in reads) == b"".join(upstream.text.stream_writes[False])
    assert len(reads) == len(writes) == len(upstream.text.events)  # each event read on its own
    assert reads[-1][1].endswith(b"data: [DONE]\n\n\r\n" + canned._LAST_CHUNK)  # the body ends with the last event
    assert reads[-1][0] - reads[0][0] >= (len(writes) - 1) * PACE
    assert not closed  # keep-alive


def test_a_closing_connection_closes_after_the_last_paced_event() -> None:
    upstream = canned.Upstream(pace=PACE)
    reads, closed = uvloop.run(_serving(upstream, lambda port: _read_answer(port, b"Connection: close\r\n")))
    assert b"".join(data for _, data in reads) == b"".join(upstream.text.stream_writes[True])
    assert closed


def test_a_client_that_leaves_mid_stream_stops_the_writes() -> None:
    upstream = canned.Upstream(pace=PACE)
    errors: list[dict[str, object]] = []

    async def leave_early(port: int) -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: errors.append(context))
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(STREAM_REQUEST % b"")
        await asyncio.wait_for(reader.read(65536), 5)
        writer.close()
        await asyncio.sleep(10 * PACE)  # the writes still due find the transport closing

    uvloop.run(_serving(upstream, leave_early))
    assert upstream.requests == 1
    assert errors == []


def test_the_pace_cannot_be_negative() -> None:
    """Run as a process: a server that took the pace would serve, not exit."""
    command = [sys.executable, "-m", "bench.upstream", "--port", "0", "--pace-ms", "-1"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2 and "--pace-ms cannot be negative" in result.stderr


@pytest.mark.parametrize("text", ["-0.5", "nan", "inf", "-inf"])
def test_a_pace_is_a_finite_number_of_milliseconds(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="cannot be negative"):
        canned.pace_ms(text)
    assert canned.pace_ms("0") == 0.0 and canned.pace_ms("20") == 20.0
