"""Load: 200 concurrent streams, each getting its own answer; memory that stays flat.

Every request carries a unique marker that the scripted upstream echoes back (its
``responder``), so a lost, duplicated or crossed answer shows. The 200 streams are
held open together: each client waits at a barrier after its first event until all
200 have theirs, so the concurrency is a fact, not a hope.

The soak (``-m soak``) runs a mixed workload (streams, tool calls, JSON answers,
upstream errors, cut streams, clients that leave) at moderate concurrency for
``TOOLWIRE_SOAK_SECONDS`` (150 by default: a few minutes, inside what CI allows) and
samples the gateway's RSS, fds and threads every few seconds. Beside it, the hostile run
(``bench.hostile``, also ``-m soak``) puts honest Codex traffic and hostile peers on the
gateway at once for ``TOOLWIRE_HOSTILE_SECONDS`` (60 by default).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import secrets
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.support.chat_upstream import (
    Call,
    ChatUpstream,
    Cut,
    HttpError,
    Reply,
    Stall,
    Text,
    ToolCalls,
)
from tests.support.gateway import GatewayProcess
from toolwire.protocol import SSEDecoder

from .conftest import StartGateway
from .helpers import ProcessStats, gateway_pid, output_text, process_stats, terminal

CONCURRENCY = 200
MiB = 2**20
TOOLS = [{"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]


def last_user_text(request: Any) -> str:
    for message in reversed(request.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    return ""


def echo(request: Any) -> Reply:
    """``<kind> <marker>`` in, the matching scripted reply out."""
    kind, _, marker = last_user_text(request).partition(" ")
    match kind:
        case "stall":
            return Stall(after_chunks=2, seconds=0.5, reply=Text(f"echo {marker}"))
        case "tools":
            return ToolCalls([Call("exec_command", json.dumps({"cmd": f"echo {marker}"}))])
        case "error":
            return HttpError(400, {"error": {"message": f"refused {marker}", "type": "invalid_request_error"}})
        case "cut":
            return Cut(after_chunks=3, reply=Text(f"echo {marker} and more words to cut"))
        case "leave":
            return Stall(after_chunks=3, seconds=30, reply=Text(f"echo {marker} and more words"))
        case _:
            return Text(f"echo {marker}")


@pytest.fixture(scope="module")
def loaded(_session_upstream: ChatUpstream, start_module_gateway: StartGateway) -> Iterator[GatewayProcess]:
    yield start_module_gateway(_session_upstream.base_url)


@pytest.fixture
def echoing(upstream: ChatUpstream) -> Iterator[ChatUpstream]:
    upstream.responder = echo
    yield upstream


async def read_stream(response: aiohttp.ClientResponse, first_event: asyncio.Event | None = None) -> list[dict[str, Any]]:
    decoder = SSEDecoder()
    events: list[dict[str, Any]] = []
    async for data in response.content.iter_any():
        events.extend(orjson.loads(event.data) for event in decoder.feed(data))
        if first_event is not None and events and not first_event.is_set():
            first_event.set()
    return events


async def one_stream(session: aiohttp.ClientSession, url: str, index: int, barrier: asyncio.Barrier) -> tuple[str, list[dict[str, Any]]]:
    marker = f"m{index:03d}-{secrets.token_hex(6)}"
    try:
        async with session.post(url, json={"model": "m", "input": f"stall {marker}", "stream": True}) as response:
            assert response.status == 200, await response.text()
            opened = asyncio.Event()
            reading = asyncio.ensure_future(read_stream(response, opened))
            waiting = asyncio.ensure_future(opened.wait())
            await asyncio.wait({reading, waiting}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if not opened.is_set():
                await reading  # raises, or the stream ended with no event at all
                raise AssertionError(f"stream {index} ended without an event")
            await barrier.wait()  # every stream is open before any is read to the end
            return marker, await reading
    except BaseException:
        await barrier.abort()
        raise


def check_own_answer(marker: str, events: list[dict[str, Any]]) -> str:
    end = terminal(events)
    assert end["type"] == "response.completed", end
    text = output_text(end["response"])
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == deltas == f"echo {marker}", (marker, text, deltas)
    return str(end["response"]["id"])


async def burst(gateway: GatewayProcess, count: int) -> list[tuple[str, list[dict[str, Any]]]]:
    barrier = asyncio.Barrier(count)
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=180)) as session:
        async with asyncio.timeout(240):
            return await asyncio.gather(*(one_stream(session, gateway.base_url + "/responses", i, barrier) for i in range(count)))


async def settled(pid: int, seconds: float = 1.0) -> ProcessStats:
    await asyncio.sleep(seconds)
    return process_stats(pid)


async def test_200_concurrent_streams_each_get_their_own_answer(loaded: GatewayProcess, echoing: ChatUpstream) -> None:
    pid = gateway_pid(loaded)
    await burst(loaded, 10)  # warm up
    before = await settled(pid)
    started = time.monotonic()
    results = await burst(loaded, CONCURRENCY)
    took = time.monotonic() - started
    after_first = await settled(pid)

    ids = [check_own_answer(marker, events) for marker, events in results]
    assert len(results) == CONCURRENCY
    assert len(set(ids)) == CONCURRENCY, "two clients got the same response"
    markers = [marker for marker, _ in results]
    asked = Counter(last_user_text(request).partition(" ")[2] for request in echoing.chat_requests)
    assert all(asked[marker] == 1 for marker in markers), "a request reached the upstream twice or never"

    results = await burst(loaded, CONCURRENCY)
    for marker, events in results:
        check_own_answer(marker, events)
    after_second = await settled(pid)
    print(
        f"\n{CONCURRENCY} concurrent streams in {took:.1f} s; gateway RSS {before.rss_mib:.1f} MiB before, "
        f"{after_first.rss_mib:.1f} after the first burst, {after_second.rss_mib:.1f} after the second; "
        f"fds {before.fds} -> {after_first.fds} -> {after_second.fds}; threads {before.threads} -> {after_second.threads}"
    )
    assert after_first.rss_bytes - before.rss_bytes < 150 * MiB, (before, after_first)
    assert after_second.rss_bytes - after_first.rss_bytes < 32 * MiB, (after_first, after_second)
    # The upstream connections stay pooled (keep-alive) and the second burst reuses them...
    assert after_first.fds <= before.fds + CONCURRENCY + 10, (before, after_first)
    assert after_second.fds <= after_first.fds + 5, (after_first, after_second)
    # ...until they have been idle for the pool's keep-alive time: then none is left over.
    deadline = time.monotonic() + 40
    while (idle := process_stats(pid)).fds > before.fds + 5 and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    print(f"fds after the pool's idle connections closed: {idle.fds} (in {time.monotonic() - deadline + 40:.0f} s)")
    assert idle.fds <= before.fds + 5, (before, idle)


# ---------------------------------------------------------------- the soak

SOAK_SECONDS = float(os.environ.get("TOOLWIRE_SOAK_SECONDS", "150"))
WARM_UP = min(20.0, SOAK_SECONDS / 4)
SOAK_CONCURRENCY = 16
SAMPLE_EVERY = 3.0
KINDS = ["text"] * 12 + ["tools"] * 3 + ["json"] * 2 + ["error", "cut", "leave"]


async def soak_request(session: aiohttp.ClientSession, url: str, kind: str, outcomes: Counter[str]) -> None:
    marker = secrets.token_hex(8)
    body: dict[str, Any] = {"model": "m", "input": f"{kind} {marker}", "stream": kind != "json"}
    if kind == "tools":
        body["tools"] = TOOLS
    async with session.post(url, json=body) as response:
        if kind == "error":
            error = (await response.json())["error"]
            assert response.status == 400 and marker in error["message"], error
        elif kind == "json":
            answer = await response.json()
            assert output_text(answer) == f"echo {marker}", answer
        elif kind == "leave":
            await response.content.readuntil(b"response.output_text.delta")
            response.close()  # the client goes away mid-stream
        else:
            events = await read_stream(response)
            end = terminal(events)
            if kind == "cut":
                assert end["type"] == "response.failed", end
            elif kind == "tools":
                [call] = end["response"]["output"]
                assert json.loads(call["arguments"]) == {"cmd": f"echo {marker}"}, call
            else:
                assert output_text(end["response"]) == f"echo {marker}", end
    outcomes[kind] += 1


@pytest.mark.soak
async def test_soak_memory_stays_flat(loaded: GatewayProcess, echoing: ChatUpstream) -> None:
    pid = gateway_pid(loaded)
    url = loaded.base_url + "/responses"
    outcomes: Counter[str] = Counter()
    failures: list[BaseException] = []
    samples: list[tuple[float, ProcessStats]] = []
    started = time.monotonic()
    deadline = started + SOAK_SECONDS
    rng = random.Random(7)

    async def worker(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < deadline and len(failures) < 5:
            try:
                await soak_request(session, url, rng.choice(KINDS), outcomes)
            except Exception as exc:
                failures.append(exc)

    async def sampler() -> None:
        while time.monotonic() < deadline:
            samples.append((time.monotonic() - started, process_stats(pid)))
            await asyncio.sleep(SAMPLE_EVERY)

    connector = aiohttp.TCPConnector(limit=SOAK_CONCURRENCY * 2)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        async with asyncio.timeout(SOAK_SECONDS + 90):
            await asyncio.gather(sampler(), *(worker(session) for _ in range(SOAK_CONCURRENCY)))
    await asyncio.sleep(1.0)
    samples.append((time.monotonic() - started, process_stats(pid)))

    assert not failures, failures[:5]
    measured = [(t, s) for t, s in samples if t >= WARM_UP]
    assert len(measured) >= 4, samples
    baseline = measured[0][1]
    final = statistics.median(s.rss_bytes for _, s in measured[-3:])
    growth = final - baseline.rss_bytes
    slope = _slope([(t, s.rss_bytes / MiB) for t, s in measured]) * 60
    total = sum(outcomes.values())
    print(
        f"\nsoak {SOAK_SECONDS:.0f} s at {SOAK_CONCURRENCY} concurrent: {total} requests "
        f"({total / SOAK_SECONDS:.0f}/s) {dict(outcomes)}; RSS after warm-up {baseline.rss_mib:.1f} MiB, "
        f"end {final / MiB:.1f} MiB (growth {growth / MiB:+.1f} MiB, trend {slope:+.2f} MiB/min); "
        f"peak {max(s.rss_bytes for _, s in samples) / MiB:.1f} MiB; fds {baseline.fds} -> {samples[-1][1].fds}; "
        f"threads {baseline.threads} -> {samples[-1][1].threads}; "
        f"RSS samples {[round(s.rss_mib, 1) for _, s in samples]}"
    )
    assert growth < 24 * MiB, (baseline, final)
    assert samples[-1][1].fds <= baseline.fds + 10, (baseline, samples[-1][1])
    assert samples[-1][1].threads <= baseline.threads + 2, (baseline, samples[-1][1])


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0


# ---------------------------------------------------------------- hostile peers

HOSTILE_SECONDS = float(os.environ.get("TOOLWIRE_HOSTILE_SECONDS", "60"))
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.soak
def test_hostile_peers_beside_honest_codex_traffic(tmp_path: Path) -> None:
    """``python -m bench.hostile`` at CI size: endless upstream answers, silent and slow
    clients beyond the connection cap, oversized bodies and a client that stops reading,
    all at once with honest Codex requests. Every honest request is served, every hostile
    one ends as it should, the gateway's RSS stays under the bench's ceiling and comes
    back, and no descriptor is left behind."""
    figures = tmp_path / "hostile.json"
    command = [sys.executable, "-m", "bench.hostile", "--seconds", f"{HOSTILE_SECONDS:g}",
               "--json", str(figures), "--work-dir", str(tmp_path / "work")]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=HOSTILE_SECONDS + 300)
    print(result.stdout[-6000:])
    assert figures.exists(), f"bench.hostile did not finish:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    data = json.loads(figures.read_text())
    assert data["verdict"] and all(data["verdict"].values()), (data["verdict"], data["unexpected"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert data["peers"]["honest Codex requests"]["expected"] > 0
    tripped = data["limits_tripped"]
    for limit in ("upstream_max_line_bytes", "upstream_max_event_bytes", "upstream_max_body_bytes",
                  "max_connections_reclaimed", "max_body_bytes", "client_body_timeout"):
        assert tripped.get(limit, 0) > 0, (limit, tripped)
