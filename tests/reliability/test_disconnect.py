"""A client that goes away: the upstream request is cancelled at once, nothing leaks.

"At once" is checked by events, not by the clock: the upstream would keep its
connection open for minutes (a stall of ``STALL`` seconds, an ``--upstream-timeout`` as
long), so the upstream seeing its connection close within ``NOTICED_WITHIN`` seconds of
the client leaving can only be the gateway cancelling it. The latency, from the client's
close to the upstream noticing (both clocks are this process's ``time.monotonic()``: the
scripted upstream and the TcpTrap run in threads here), is printed, never asserted.

Leaks are measured on the gateway process from /proc: open file descriptors (client
and upstream sockets), threads, and resident memory, before and after 50 disconnects.
"""

from __future__ import annotations

import socket
import statistics
import threading
import time
from collections.abc import Iterator

import orjson
import pytest

from tests.support.chat_upstream import ChatUpstream, Stall, Text
from tests.support.gateway import GatewayProcess

from .conftest import StartGateway
from .helpers import (
    ProcessStats,
    TcpTrap,
    gateway_pid,
    http_request,
    open_stream,
    output_text,
    process_stats,
    stream,
    terminal,
    wait_until,
)

STALL = 600
NOTICED_WITHIN = 60  # a bound on the wait, far below STALL: never a measured duration
ANSWER = "This answer stalls after a few words and never finishes while anyone listens."
BODY = {"model": "m", "input": "talk to me"}
DISCONNECTS = 50


@pytest.fixture(scope="module")
def gateway_d(_session_upstream: ChatUpstream, start_module_gateway: StartGateway) -> Iterator[GatewayProcess]:
    """A gateway of its own, so its resources reflect only these tests."""
    yield start_module_gateway(_session_upstream.base_url)


def leave_mid_stream(gateway: GatewayProcess, upstream: ChatUpstream) -> float:
    """Open a stream, read until text is flowing, close the socket; the cancel latency."""
    before = len(upstream.disconnects)
    upstream.enqueue(Stall(after_chunks=3, seconds=STALL, reply=Text(ANSWER)))
    sock, _ = open_stream(gateway, BODY, until="response.output_text.delta")
    sock.close()
    closed_at = time.monotonic()
    assert wait_until(lambda: len(upstream.disconnects) > before, timeout=NOTICED_WITHIN), "the upstream never saw the close"
    return upstream.disconnects[before].noticed_at - closed_at


def test_leaving_mid_stream_cancels_the_upstream(gateway_d: GatewayProcess, upstream: ChatUpstream) -> None:
    latency = leave_mid_stream(gateway_d, upstream)
    print(f"disconnect-to-cancel latency: {latency * 1000:.1f} ms")


def silent_upstream_exchange(start_gateway: StartGateway, streaming: bool) -> float:
    """The client leaves while the gateway still waits for the upstream's first byte."""
    with TcpTrap("silent") as trap:
        gateway = start_gateway(trap.url, "--upstream-timeout", str(STALL))
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
            sock.sendall(http_request("/v1/responses", orjson.dumps({**BODY, "stream": streaming})))
            # The gateway sent its request upstream: it now waits for the first byte.
            assert trap.wait_for(lambda conns: any(c.request.startswith(b"POST") for c in conns), timeout=20)
        closed_at = time.monotonic()
        posts = [c for c in trap.connections if c.request.startswith(b"POST")]
        trap.wait_for(lambda conns: all(c.closed_at is not None for c in posts), timeout=NOTICED_WITHIN)
        noticed = [c.closed_at for c in posts if c.closed_at is not None]
        assert noticed, f"the upstream connection was still open {NOTICED_WITHIN} s after the client left"
        return max(noticed) - closed_at


def test_leaving_before_the_first_byte_cancels_the_upstream(start_gateway: StartGateway) -> None:
    """A streaming request whose upstream has not answered yet (a long prompt, a queue):
    the client gives up; the gateway must not hold the upstream request for the whole
    ``--upstream-timeout``."""
    latency = silent_upstream_exchange(start_gateway, streaming=True)
    print(f"disconnect-to-cancel latency: {latency * 1000:.1f} ms")


def test_leaving_a_non_streaming_request_cancels_the_upstream(start_gateway: StartGateway) -> None:
    latency = silent_upstream_exchange(start_gateway, streaming=False)
    print(f"disconnect-to-cancel latency: {latency * 1000:.1f} ms")


def settle(pid: int, baseline: ProcessStats, timeout: float = 10.0) -> ProcessStats:
    """The process's stats once its fds are back near the baseline (or at the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        now = process_stats(pid)
        if now.fds <= baseline.fds + 2 or time.monotonic() > deadline:
            return now
        time.sleep(0.1)


def test_fifty_disconnects_leak_nothing(gateway_d: GatewayProcess, upstream: ChatUpstream) -> None:
    pid = gateway_pid(gateway_d)
    for _ in range(3):  # warm up: pools, caches, lazy imports
        upstream.enqueue(Text("warm"))
        stream(gateway_d, BODY)
        leave_mid_stream(gateway_d, upstream)
    baseline = settle(pid, process_stats(pid), timeout=2)

    latencies = [leave_mid_stream(gateway_d, upstream) for _ in range(DISCONNECTS)]
    after = settle(pid, baseline)

    upstream.enqueue(Text("still serving"))
    assert output_text(terminal(stream(gateway_d, BODY))["response"]) == "still serving"
    print(
        f"\n{DISCONNECTS} disconnects: cancel latency median {statistics.median(latencies) * 1000:.1f} ms, "
        f"max {max(latencies) * 1000:.1f} ms; fds {baseline.fds} -> {after.fds}, "
        f"threads {baseline.threads} -> {after.threads}, RSS {baseline.rss_mib:.1f} -> {after.rss_mib:.1f} MiB"
    )
    assert after.fds <= baseline.fds + 2, (baseline, after)
    assert after.threads <= baseline.threads + 1, (baseline, after)
    assert after.rss_bytes - baseline.rss_bytes < 16 * 2**20, (baseline, after)
    log = gateway_d.log()
    assert "Traceback" not in log and "ASGI callable returned without completing" not in log


def test_concurrent_disconnects_leak_nothing(gateway_d: GatewayProcess, upstream: ChatUpstream) -> None:
    """Ten clients at a time leave together, five times over."""
    pid = gateway_pid(gateway_d)
    baseline = settle(pid, process_stats(pid), timeout=2)
    before = len(upstream.disconnects)
    sockets: list[socket.socket] = []
    lock = threading.Lock()

    def open_one() -> None:
        sock, _ = open_stream(gateway_d, BODY, until="response.output_text.delta")
        with lock:
            sockets.append(sock)

    for _ in range(5):
        upstream.enqueue(*[Stall(after_chunks=3, seconds=STALL, reply=Text(ANSWER))] * 10)
        sockets.clear()
        threads = [threading.Thread(target=open_one) for _ in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(sockets) == 10
        for sock in sockets:
            sock.close()
    assert wait_until(lambda: len(upstream.disconnects) - before == 50, timeout=NOTICED_WITHIN), len(upstream.disconnects) - before
    after = settle(pid, baseline)
    assert after.fds <= baseline.fds + 2, (baseline, after)
    assert after.threads <= baseline.threads + 1, (baseline, after)
