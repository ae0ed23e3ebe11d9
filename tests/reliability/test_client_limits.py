"""Clients that send nothing, send slowly, send too much, stop reading or hold WebSockets
open cannot exhaust the gateway.

The real gateway runs in front of `HostileUpstream` (whose ``honest`` answers are normal
and whose ``endless-text`` stream never ends), most cases with a low open-files limit
(``ulimit -n 256``: its caps come out at 135 connections and 48 streams) and more
misbehaving clients than that limit allows. Each case checks what the clients get (408,
431, 503 with ``retry-after``, or a closed connection) and that the trip is counted in
``/metrics``, then that an honest request is served, the gateway's memory is back near
where it started and no file descriptor is left behind. Timeouts are lowered by flags so
the cases end quickly; nothing here asserts how long anything took.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import threading
from collections.abc import Iterator

import httpx
import orjson
import pytest
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from tests.support.gateway import GatewayProcess
from tests.support.hostile_upstream import HostileUpstream, prompt

from .conftest import StartGateway
from .helpers import (
    ProcessStats,
    gateway_pid,
    http_request,
    output_text,
    process_stats,
    responses_url,
    stream,
    terminal,
    wait_until,
)

MiB = 2**20
OPEN_FILES = 256
MEMORY_SLACK = 8 * MiB


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileUpstream]:
    with HostileUpstream() as server:
        yield server


def upstream_url(hostile: HostileUpstream) -> str:
    return f"http://127.0.0.1:{hostile.port}/v1"


class RawClient:
    """A client on a raw socket that sends ``first`` and then only what the test says."""

    def __init__(self, port: int, first: bytes = b"") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if first:
            self.sock.sendall(first)
        self.sock.setblocking(False)
        self.received = b""
        self.closed = False

    def poll(self) -> bool:
        """Read what has arrived (keeping the first 64 KiB); True once the gateway has
        closed the connection."""
        for _ in range(64):  # an endless answer is read a bounded amount at a time
            if self.closed:
                break
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                break
            except ConnectionResetError:
                self.closed = True
                break
            if not data:
                self.closed = True
            self.received += data[: max(0, 65536 - len(self.received))]
        return self.closed

    @property
    def status(self) -> int | None:
        match = re.match(rb"HTTP/1\.1 (\d{3}) ", self.received)
        return int(match[1]) if match else None

    def header(self, name: str) -> str | None:
        head = self.received.partition(b"\r\n\r\n")[0].decode("latin-1")
        match = re.search(rf"^{name}: (.*)\r?$", head, re.M | re.I)
        return match[1].strip() if match else None

    def error_message(self) -> str:
        return str(orjson.loads(self.received.partition(b"\r\n\r\n")[2])["error"]["message"])

    def send(self, data: bytes) -> None:
        self.sock.setblocking(True)
        try:
            self.sock.sendall(data)
        finally:
            self.sock.setblocking(False)

    def close(self) -> None:
        self.sock.close()


def all_closed(clients: list[RawClient]) -> bool:
    return sum(client.poll() for client in clients) == len(clients)


def tripped(gateway: GatewayProcess) -> dict[str, float]:
    text = httpx.get(gateway.url + "/metrics", timeout=10).text
    return {m[1]: float(m[2]) for m in re.finditer(r'^toolwire_limits_tripped_total{limit="([^"]+)"} (\S+)$', text, re.M)}


def connections(gateway: GatewayProcess, state: str) -> int:
    text = httpx.get(gateway.url + "/metrics", timeout=10).text
    match = re.search(rf'^toolwire_client_connections{{state="{state}"}} (\S+)$', text, re.M)
    return int(float(match[1])) if match else -1


def honest(gateway: GatewayProcess, marker: str) -> None:
    events = stream(gateway, {"model": "m", "input": prompt("honest", marker)})
    assert output_text(terminal(events)["response"]) == f"echo {marker}"


def settled(pid: int, baseline: ProcessStats) -> ProcessStats:
    wait_until(
        lambda: (now := process_stats(pid)).rss_bytes <= baseline.rss_bytes + MEMORY_SLACK and now.fds <= baseline.fds,
        timeout=30,
        interval=0.2,
    )
    return process_stats(pid)


def assert_recovered(gateway: GatewayProcess, before: ProcessStats, case: str) -> None:
    honest(gateway, f"after-{case}")
    after = settled(gateway_pid(gateway), before)
    print(f"\n{case}: RSS {before.rss_mib:.1f} -> {after.rss_mib:.1f} MiB, fds {before.fds} -> {after.fds}")
    assert after.rss_bytes <= before.rss_bytes + MEMORY_SLACK, (before, after)
    assert after.fds <= before.fds, (before, after)


def caps(gateway: GatewayProcess) -> tuple[int, int]:
    match = re.search(r"at most (\d+) client connections and (\d+) streams", gateway.log())
    assert match, gateway.log()
    return int(match[1]), int(match[2])


def warmed_up(gateway: GatewayProcess) -> ProcessStats:
    honest(gateway, "warm-up")
    return process_stats(gateway_pid(gateway))


# ---------------------------------------------------------------- silent and slow clients


def test_silent_and_slow_head_clients_beyond_the_descriptor_limit(
    hostile: HostileUpstream, start_gateway: StartGateway
) -> None:
    gateway = start_gateway(upstream_url(hostile), "--client-header-timeout", "3", open_files=OPEN_FILES)
    max_connections, _ = caps(gateway)
    before = warmed_up(gateway)
    counted = tripped(gateway)

    partial_head = b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    clients = [RawClient(gateway.port, b"" if n % 2 else partial_head) for n in range(OPEN_FILES + 150)]
    try:
        # The gateway keeps serving while they are all there: the ones that waited longest
        # for a request make room for a newcomer.
        honest(gateway, "during")
        assert wait_until(lambda: all_closed(clients), timeout=60, interval=0.2), (
            f"{sum(not c.closed for c in clients)} of {len(clients)} still open"
        )
    finally:
        for client in clients:
            client.close()

    for client in clients:
        assert client.status in (None, 408), client.received[:300]
        if client.status == 408:
            assert "client_header_timeout" in client.error_message()
            assert client.header("connection") == "close"
    assert not any(client.received for client in clients[1::2]), "a silent client got an answer"
    now = tripped(gateway)
    ended = sum(now.get(k, 0) - counted.get(k, 0) for k in ("client_header_timeout", "max_connections_reclaimed"))
    assert ended == len(clients), (counted, now)
    assert now.get("max_connections_reclaimed", 0) > 0  # there were more than max_connections
    assert len(clients) > max_connections
    assert_recovered(gateway, before, "silent and slow-head clients")


def test_a_request_already_on_its_way_is_not_reclaimed(hostile: HostileUpstream, start_gateway: StartGateway) -> None:
    """A newcomer at the cap closes the connection that waited longest for a request, but
    not one whose request has arrived and is not read yet. An honest client connects and
    waits (the oldest connection); the gateway is stopped (SIGSTOP) while one silent
    client more than the cap connects and then the honest one sends its request; when it resumes,
    it accepts the newcomers first, and the request is served while a silent client is
    closed instead."""
    gateway = start_gateway(upstream_url(hostile), "--max-connections", "10")
    pid = gateway_pid(gateway)
    before = warmed_up(gateway)
    body = orjson.dumps({"model": "m", "input": prompt("honest", "first"), "stream": True})
    honest_client = RawClient(gateway.port)
    assert wait_until(lambda: connections(gateway, "waiting") == 1, timeout=10)  # accepted
    silent: list[RawClient] = []
    os.kill(pid, signal.SIGSTOP)
    try:
        silent = [RawClient(gateway.port) for _ in range(11)]  # the cap and one more: room must be made
        honest_client.send(http_request("/v1/responses", body, headers={"Content-Length": str(len(body)), "Connection": "close"}))
    finally:
        os.kill(pid, signal.SIGCONT)
    try:
        assert wait_until(honest_client.poll, timeout=30, interval=0.05), honest_client.received[-300:]
        assert honest_client.status == 200, honest_client.received[:300]
        assert b"response.completed" in honest_client.received
        assert wait_until(lambda: any(client.poll() for client in silent), timeout=10)
        # A silent client made room (reclaimed) or was refused past the cap: which one, and
        # whether the request is read before or after the newcomers are accepted, depends
        # on the order the resumed event loop takes them in; either way the cap held (one
        # silent client more than it) and the request already on its way was served.
        counts = tripped(gateway)
        assert counts.get("max_connections_reclaimed", 0) + counts.get("max_connections", 0) >= 1, counts
    finally:
        honest_client.close()
        for client in silent:
            client.close()
    assert_recovered(gateway, before, "request on its way")


def test_slow_bodies_beyond_the_descriptor_limit_get_408_and_newcomers_503(
    hostile: HostileUpstream, start_gateway: StartGateway
) -> None:
    gateway = start_gateway(upstream_url(hostile), "--client-body-timeout", "4", open_files=OPEN_FILES)
    max_connections, _ = caps(gateway)
    before = warmed_up(gateway)
    counted = tripped(gateway)

    head = http_request("/v1/responses", b"", headers={"Content-Length": "100000"})
    clients = [RawClient(gateway.port, head + b'{"model": "m", ') for _ in range(max_connections + 60)]
    try:
        refused: list[httpx.Response] = []

        def busy_answer() -> bool:
            """An honest request while every connection is busy: 503 with retry-after (or,
            past the overflow, a connection closed at once: then try again)."""
            try:
                answer = httpx.post(responses_url(gateway), json={"model": "m", "input": "honest x"}, timeout=10)
            except httpx.TransportError:
                return False
            if answer.status_code == 503:
                refused.append(answer)
            return answer.status_code == 503

        assert wait_until(busy_answer, timeout=20, interval=0.05)
        assert refused[0].headers["retry-after"] == "1"
        assert "max_connections" in refused[0].json()["error"]["message"]
        assert wait_until(lambda: all_closed(clients), timeout=60, interval=0.2), (
            f"{sum(not c.closed for c in clients)} of {len(clients)} still open"
        )
    finally:
        for client in clients:
            client.close()

    # Admitted: reading its body (408 when it is too slow), or answered 503 at once by
    # max_streams (48 here) and then closed when the rest of its body is too slow. Not
    # admitted: 503 by max_connections, or closed at once past the overflow.
    statuses = [client.status for client in clients]
    assert set(statuses) <= {408, 503, None}, statuses
    assert statuses.count(408) >= 1
    refused_by: dict[str, int] = {"max_streams": 0, "max_connections": 0}
    for client in clients:
        if client.status == 408:
            assert "client_body_timeout" in client.error_message()
        if client.status == 503:
            assert client.header("retry-after") == "1"
            refused_by["max_streams" if "max_streams" in client.error_message() else "max_connections"] += 1
    now = tripped(gateway)
    assert now["client_body_timeout"] - counted.get("client_body_timeout", 0) == statuses.count(408) + refused_by["max_streams"]
    assert now["max_connections"] > counted.get("max_connections", 0)
    assert_recovered(gateway, before, "slow bodies")


def test_a_body_that_drips_below_the_minimum_rate_is_cut(hostile: HostileUpstream, start_gateway: StartGateway) -> None:
    """Never silent for as long as ``client_body_timeout`` (an nginx-style gap timeout
    would wait for it forever), but far below ``client_body_min_rate`` on average."""
    gateway = start_gateway(
        upstream_url(hostile), "--client-body-timeout", "1", "--client-body-min-rate", "1024", open_files=OPEN_FILES
    )
    before = warmed_up(gateway)
    client = RawClient(gateway.port, http_request("/v1/responses", b"", headers={"Content-Length": "100000"}))
    stop = threading.Event()

    def drip() -> None:
        while not stop.wait(0.2):  # pacing, not waiting for a condition
            try:
                client.send(b" ")
            except OSError:
                return

    dripping = threading.Thread(target=drip, daemon=True)
    dripping.start()
    try:
        assert wait_until(client.poll, timeout=30, interval=0.1)
    finally:
        stop.set()
        dripping.join(timeout=5)
        client.close()
    assert client.status == 408, client.received
    assert "client_body_min_rate 1024 bytes/s" in client.error_message()
    assert_recovered(gateway, before, "dripping body")


def test_a_refused_body_still_dripping_in_is_cut(hostile: HostileUpstream, start_gateway: StartGateway) -> None:
    """413 at once for a body declared too large; the client keeps dripping it in, which
    on plain uvicorn keeps the connection forever (each byte cancels the keep-alive timer)."""
    gateway = start_gateway(upstream_url(hostile), "--client-body-timeout", "1", "--max-body-bytes", "1000")
    before = warmed_up(gateway)
    client = RawClient(gateway.port, http_request("/v1/responses", b"", headers={"Content-Length": "5000"}))
    stop = threading.Event()

    def drip() -> None:
        while not stop.wait(0.2):
            try:
                client.send(b" ")
            except OSError:
                return

    dripping = threading.Thread(target=drip, daemon=True)
    dripping.start()
    try:
        assert wait_until(client.poll, timeout=30, interval=0.1)
    finally:
        stop.set()
        dripping.join(timeout=5)
        client.close()
    assert client.status == 413, client.received
    assert tripped(gateway)["client_body_timeout"] == 1
    assert_recovered(gateway, before, "refused body")


# ---------------------------------------------------------------- heads, idle connections


def test_a_head_too_large_gets_431(hostile: HostileUpstream, start_gateway: StartGateway) -> None:
    gateway = start_gateway(upstream_url(hostile), "--max-header-bytes", "8192")
    before = warmed_up(gateway)
    # All of it at once: what came after the gateway closed would reset the connection
    # (and could take the 431 with it before the test reads it).
    client = RawClient(gateway.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 12288)
    try:
        assert wait_until(client.poll, timeout=20, interval=0.05)
    finally:
        client.close()
    assert client.status == 431, client.received
    assert "max_header_bytes" in client.error_message()
    assert tripped(gateway)["max_header_bytes"] == 1
    assert_recovered(gateway, before, "large head")


def test_a_head_as_large_as_allowed_is_served(hostile: HostileUpstream, start_gateway: StartGateway) -> None:
    gateway = start_gateway(upstream_url(hostile), "--max-header-bytes", "16384")
    answer = httpx.get(gateway.url + "/healthz", headers={"x-padding": "a" * 15000}, timeout=10)
    assert answer.status_code == 200


def test_an_idle_keep_alive_connection_is_closed(hostile: HostileUpstream, start_gateway: StartGateway) -> None:
    gateway = start_gateway(upstream_url(hostile), "--keep-alive-timeout", "1")
    before = warmed_up(gateway)
    client = RawClient(gateway.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    try:
        assert wait_until(lambda: client.poll() or b'"ok"' in client.received, timeout=20, interval=0.05)
        assert client.status == 200 and not client.closed
        assert wait_until(client.poll, timeout=20, interval=0.05)
    finally:
        client.close()
    assert tripped(gateway)["keep_alive_timeout"] >= 1
    assert_recovered(gateway, before, "idle keep-alive")


# ---------------------------------------------------------------- streams


def test_past_max_streams_a_request_gets_503_and_retry_after(hostile: HostileUpstream, start_gateway: StartGateway) -> None:
    gateway = start_gateway(upstream_url(hostile), "--max-streams", "2")
    before = warmed_up(gateway)
    hostile.closed.clear()
    held = http_request("/v1/responses", orjson.dumps({"model": "m", "input": prompt("stall"), "stream": True}))
    holders = [RawClient(gateway.port, held) for _ in range(2)]
    try:
        assert wait_until(
            lambda: all(not h.poll() and b"response.output_text.delta" in h.received for h in holders), timeout=20
        )
        answer = httpx.post(responses_url(gateway), json={"model": "m", "input": prompt("honest", "x")}, timeout=10)
        assert answer.status_code == 503, answer.text
        assert answer.headers["retry-after"] == "1"
        assert "max_streams" in answer.json()["error"]["message"]
        assert answer.json()["error"]["code"] == "gateway_busy"
    finally:
        for holder in holders:
            holder.close()
    assert hostile.closed.wait_for_first(timeout=20).behaviour == "stall"
    assert tripped(gateway)["max_streams"] == 1
    assert_recovered(gateway, before, "max streams")


def test_a_client_that_stops_reading_is_dropped(hostile: HostileUpstream, start_gateway: StartGateway) -> None:
    """Backpressure first (the gateway stops reading the upstream, its memory flat), then,
    after ``client_send_timeout`` with nothing taken, the client is dropped and the
    upstream request cancelled."""
    gateway = start_gateway(upstream_url(hostile), "--client-send-timeout", "2")
    before = warmed_up(gateway)
    hostile.closed.clear()
    request = http_request("/v1/responses", orjson.dumps({"model": "m", "input": prompt("endless-text"), "stream": True}))
    sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        sock.sendall(request)
        assert sock.recv(1024).startswith(b"HTTP/1.1 200")
        closed = hostile.closed.wait_for_first(timeout=60)  # the client reads nothing more
    finally:
        sock.close()
    assert closed.behaviour == "endless-text"
    assert tripped(gateway)["client_send_timeout"] == 1
    assert_recovered(gateway, before, "client that stopped reading")


# ---------------------------------------------------------------- WebSockets

WEBSOCKET_HANDSHAKE = (
    b"GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


def test_websockets_beyond_the_descriptor_limit_count_against_max_connections(
    hostile: HostileUpstream, start_gateway: StartGateway
) -> None:
    """An upgraded connection keeps its place under ``max_connections`` until it closes:
    more WebSocket handshakes than the descriptor limit allows get 101 up to the cap,
    then 503 with ``retry-after`` (or, past the overflow, a connection closed at once),
    and the places come back when the WebSockets close. No pings, so the accepted ones
    stay for as long as the test holds them."""
    gateway = start_gateway(upstream_url(hostile), "--ws-ping-interval", "0", open_files=OPEN_FILES)
    max_connections, _ = caps(gateway)
    before = warmed_up(gateway)
    counted = tripped(gateway)

    clients = [RawClient(gateway.port, WEBSOCKET_HANDSHAKE) for _ in range(OPEN_FILES + 150)]
    try:
        assert wait_until(lambda: sum(c.poll() or c.status == 101 for c in clients) == len(clients), timeout=60), (
            f"{sum(not c.closed and c.status != 101 for c in clients)} of {len(clients)} neither upgraded nor closed"
        )
        statuses = [client.status for client in clients]
        print(f"\n{len(clients)} handshakes, {max_connections} places: "
              f"{statuses.count(101)} upgraded, {statuses.count(503)} told 503, {statuses.count(None)} closed")
        assert set(statuses) <= {101, 503, None}, statuses
        assert 0 < statuses.count(101) <= max_connections, statuses.count(101)
        assert statuses.count(503) >= 1
        for client in clients:
            if client.status == 503:
                assert client.closed and client.header("retry-after") == "1"
                assert "max_connections" in client.error_message()
            elif client.status is None:
                assert client.closed
            else:
                assert not client.closed
        # Every place is held by a WebSocket: an honest request is told to come back.
        refused = httpx.post(responses_url(gateway), json={"model": "m", "input": "honest x"}, timeout=10)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    finally:
        for client in clients:
            client.close()
    assert_recovered(gateway, before, "WebSockets beyond the descriptor limit")  # their places came back
    assert tripped(gateway)["max_connections"] - counted.get("max_connections", 0) >= statuses.count(503) + 1


def websocket(gateway: GatewayProcess) -> ClientConnection:
    return ws_connect(f"ws://127.0.0.1:{gateway.port}/v1/responses", open_timeout=20, max_size=None)


def ws_create(ws: ClientConnection, text: str) -> None:
    ws.send(orjson.dumps({"type": "response.create", "model": "m", "input": text}).decode())


def ws_event(ws: ClientConnection) -> dict[str, object]:
    event: dict[str, object] = orjson.loads(ws.recv(timeout=30))
    return event


def test_past_max_streams_a_websocket_response_gets_an_error_event_and_the_connection_stays(
    hostile: HostileUpstream, start_gateway: StartGateway
) -> None:
    """Responses over WebSocket hold places under ``max_streams`` as HTTP ones do, in one
    count: two held WebSocket responses refuse a third (an ``error`` event, 503, with
    ``retry-after``) and an HTTP request; the refused connection stays and is served
    once a place is free."""
    gateway = start_gateway(upstream_url(hostile), "--max-streams", "2")
    before = warmed_up(gateway)
    hostile.closed.clear()
    with contextlib.ExitStack() as opened:
        holders = [opened.enter_context(websocket(gateway)) for _ in range(2)]
        for holder in holders:
            ws_create(holder, prompt("stall"))
            while ws_event(holder)["type"] != "response.output_text.delta":
                pass
        with websocket(gateway) as refused:
            ws_create(refused, prompt("honest", "over the cap"))
            event = ws_event(refused)
            assert (event["type"], event["status"], event["headers"]) == ("error", 503, {"retry-after": "1"}), event
            error = event["error"]
            assert isinstance(error, dict) and error["code"] == "gateway_busy"
            assert "max_streams" in error["message"]
            answer = httpx.post(responses_url(gateway), json={"model": "m", "input": prompt("honest", "x")}, timeout=10)
            assert answer.status_code == 503 and "max_streams" in answer.json()["error"]["message"]

            for holder in holders:
                holder.close()
            assert wait_until(lambda: len(hostile.closed.snapshot()) == 2, timeout=20)
            ws_create(refused, prompt("honest", "after the holders"))
            events = [ws_event(refused)]
            while events[-1]["type"] not in ("response.completed", "response.failed", "error"):
                events.append(ws_event(refused))
            response = terminal(events)["response"]
            assert isinstance(response, dict) and output_text(response) == "echo after the holders"
    assert tripped(gateway)["max_streams"] == 2
    assert_recovered(gateway, before, "max streams over WebSocket")
