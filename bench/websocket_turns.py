"""Codex's built-in provider's turns, for ``bench.compare --websocket``: one WebSocket, each
request continuing the last response.

Codex configured with ``openai_base_url`` (what most users do for a proxy) speaks Responses
over a WebSocket: its first request sends the whole input, each later one the same fields
(instructions, tools, ...), ``previous_response_id`` and only its new items. Here the first
request is the benchmark body (a captured Codex request), each later one the body's fields
with ``previous_response_id`` and a short user message; after ``TURNS_PER_CONVERSATION``
turns the conversation starts over on the same connection, so that every run covers the
same lengths of conversation. A run lasts ``duration`` seconds of turns, one at a time, and
says how many there were, the gateway's CPU per turn, and the p50 of a turn (sent to
terminal event read). An event is told by its first bytes (``{"type":"...``, as the gateway
writes every event), so reading one costs the client about what reading SSE bytes does.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect

TURNS_PER_CONVERSATION = 100
USER_TEXT = "Go on with the next step, and say what you changed."
COMPLETED = '{"type":"response.completed"'
"""How a completed response's terminal event begins, as the gateway writes it."""
_TERMINAL = (COMPLETED, '{"type":"response.failed"', '{"type":"response.incomplete"', '{"type":"error"')


@dataclass(frozen=True)
class TurnsResult:
    turns: int
    turns_per_second: float
    p50_ms: float
    cpu_us_per_turn: float
    errors: int


def responses_url(gateway_url: str) -> str:
    """The WebSocket URL of the gateway at ``gateway_url`` (``http://HOST:PORT``)."""
    return gateway_url.replace("http://", "ws://", 1) + "/v1/responses"


def run(url: str, body: bytes, duration: float, cpu_seconds: Callable[[], float]) -> TurnsResult:
    """Turns over one WebSocket to ``url`` (``ws://.../v1/responses``) for ``duration`` seconds;
    ``cpu_seconds()`` reads the gateway's CPU time."""
    return asyncio.run(_run(url, orjson.loads(body), cpu_seconds, duration=duration))


def run_turns(url: str, body: bytes, turns: int) -> TurnsResult:
    """``turns`` turns over one WebSocket to ``url``, however long they take (a conversation's
    first requests are not counted among them; its CPU figure is not read)."""
    return asyncio.run(_run(url, orjson.loads(body), lambda: 0.0, turns=turns))


async def _run(
    url: str,
    fields: dict[str, Any],
    cpu_seconds: Callable[[], float],
    *,
    duration: float = float("inf"),
    turns: float = float("inf"),
) -> TurnsResult:
    first = orjson.dumps({"type": "response.create", **fields}).decode()
    latencies: list[float] = []
    errors = 0
    async with connect(url, max_size=None, compression=None, open_timeout=60) as socket:
        previous, length = await _start(socket, first), 0
        cpu_before, started = cpu_seconds(), time.perf_counter()
        while time.perf_counter() - started < duration and len(latencies) < turns:
            if length == TURNS_PER_CONVERSATION:
                previous, length = await _start(socket, first), 0  # a conversation's first request: not timed
            length += 1
            turn = {"type": "response.create", **fields, "previous_response_id": previous,
                    "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": USER_TEXT}]}]}  # fmt: skip
            sent = time.perf_counter()
            last = await exchange(socket, orjson.dumps(turn).decode())
            latencies.append(time.perf_counter() - sent)
            if last.startswith(COMPLETED):
                previous = orjson.loads(last)["response"]["id"]
            else:
                errors += 1
                previous, length = await _start(socket, first), 0
        elapsed, cpu = time.perf_counter() - started, cpu_seconds() - cpu_before
    turns = len(latencies)
    return TurnsResult(turns, turns / elapsed, statistics.median(latencies) * 1000, cpu / max(turns, 1) * 1e6, errors)


async def _start(socket: ClientConnection, first: str) -> str:
    last = await exchange(socket, first)
    if not last.startswith(COMPLETED):
        raise RuntimeError(f"a conversation's first request did not complete: {last[:300]}")
    response_id: str = orjson.loads(last)["response"]["id"]
    return response_id


async def exchange(socket: ClientConnection, message: str) -> str:
    """Send ``message``; the answer's terminal event."""
    await socket.send(message)
    while True:
        event = await asyncio.wait_for(socket.recv(), 120)
        if isinstance(event, str) and event.startswith(_TERMINAL):
            return event
