"""SIGTERM drains: stop accepting at once, let running streams finish within
``--shutdown-grace``, then end the rest with ``response.failed``, and exit.

Each test runs its own gateway (SIGTERM ends it) and reads its streams in threads
while the main thread signals the process and probes its port.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest

from tests.support.chat_upstream import ChatUpstream, Stall, Text
from tests.support.gateway import GatewayProcess

from .conftest import StartGateway
from .helpers import (
    TcpTrap,
    assert_openai_error,
    failure_message,
    http_request,
    output_text,
    read_events,
    responses_url,
    terminal,
    wait_until,
)

BODY = {"model": "m", "input": "hi", "stream": True}


@dataclass
class Reader:
    """A streaming request read to its end in a thread."""

    gateway: GatewayProcess
    body: dict[str, Any] = field(default_factory=lambda: dict(BODY))
    events: list[dict[str, Any]] = field(default_factory=list)
    error: BaseException | None = None
    first_event_at: float | None = None
    done_at: float | None = None

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            with httpx.stream("POST", responses_url(self.gateway), json=self.body, timeout=60) as response:
                assert response.status_code == 200, response.read()
                chunks = []
                for chunk in response.iter_raw():
                    if self.first_event_at is None and b"output_text.delta" in chunk:
                        self.first_event_at = time.monotonic()
                    chunks.append(chunk)
                self.events = read_events(chunks)
        except BaseException as exc:
            self.error = exc
        finally:
            self.done_at = time.monotonic()

    def wait_streaming(self) -> None:
        assert wait_until(lambda: self.first_event_at is not None or self.done_at is not None, timeout=30)
        assert self.error is None and self.first_event_at is not None, self.error

    def join(self, timeout: float) -> list[dict[str, Any]]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the stream was still open {timeout} s later"
        assert self.error is None, self.error
        return self.events


def refuses_connections(gateway: GatewayProcess) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=1):
            return False
    except OSError:
        return True


def exits_cleanly(gateway: GatewayProcess, timeout: float) -> bool:
    """The process ended its shutdown and exited: status 0, or killed by the SIGTERM that
    uvicorn re-raises once its graceful shutdown is done (so a supervisor sees 143)."""
    assert gateway.process is not None
    status = gateway.process.wait(timeout=timeout)
    return status in (0, -signal.SIGTERM) and "Finished server process" in gateway.log()


def test_sigterm_stops_accepting_and_lets_a_running_stream_finish(
    upstream: ChatUpstream, start_gateway: StartGateway
) -> None:
    gateway = start_gateway(upstream.base_url, "--shutdown-grace", "60")
    release = threading.Event()
    upstream.enqueue(
        Stall(after_chunks=3, seconds=120, release=release, reply=Text("An answer that takes its time but arrives whole."))
    )
    reader = Reader(gateway)
    reader.wait_streaming()

    assert gateway.process is not None
    gateway.process.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    assert wait_until(lambda: refuses_connections(gateway), timeout=30), "still accepting 30 s after SIGTERM"
    refused_at = time.monotonic()
    assert reader.done_at is None, "the stream ended before the gateway stopped accepting"
    release.set()  # the upstream goes on: the running stream may finish

    events = reader.join(timeout=30)
    end = terminal(events)
    assert end["type"] == "response.completed", end
    assert output_text(end["response"]) == "An answer that takes its time but arrives whole."
    assert exits_cleanly(gateway, timeout=20), gateway.log()[-2000:]
    print(f"\nrefusing connections {(refused_at - signalled) * 1000:.0f} ms after SIGTERM; stream completed after it")


def test_sigterm_fails_the_streams_still_running_after_the_grace_period(
    upstream: ChatUpstream, start_gateway: StartGateway
) -> None:
    """Grace 3 s: a stream whose upstream goes on after SIGTERM completes; one stalled for
    ten minutes is ended with ``response.failed`` once the grace is over; the process exits."""
    grace = 3.0
    gateway = start_gateway(upstream.base_url, "--shutdown-grace", str(int(grace)))
    quick, stalled = "quick one", "stalled one"
    release = threading.Event()
    upstream.responder = lambda request: (
        Stall(after_chunks=3, seconds=120, release=release, reply=Text("The quick answer, complete."))
        if quick in orjson.dumps(request).decode()
        else Stall(after_chunks=3, seconds=600, reply=Text("The stalled answer never completes."))
    )
    finishing = Reader(gateway, {**BODY, "input": quick})
    hanging = Reader(gateway, {**BODY, "input": stalled})
    finishing.wait_streaming()
    hanging.wait_streaming()

    assert gateway.process is not None
    gateway.process.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    assert wait_until(lambda: refuses_connections(gateway), timeout=30), "still accepting 30 s after SIGTERM"
    release.set()

    end = terminal(finishing.join(timeout=30))
    assert end["type"] == "response.completed", end
    assert output_text(end["response"]) == "The quick answer, complete."

    message = failure_message(hanging.join(timeout=30))
    assert hanging.done_at is not None
    assert "shutting down" in message, message
    assert hanging.done_at - signalled >= grace * 0.9, "failed before the grace period was over"
    assert exits_cleanly(gateway, timeout=20), gateway.log()[-2000:]
    assert wait_until(lambda: len(upstream.disconnects) == 1, timeout=30), upstream.disconnects
    print(f"\nstalled stream failed {hanging.done_at - signalled:.2f} s after SIGTERM (grace {grace:g} s)")


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
def test_a_request_still_waiting_for_its_first_byte_after_the_grace_gets_an_openai_error(
    start_gateway: StartGateway, streaming: bool
) -> None:
    """The upstream never answers; nothing was sent to the client when the grace period
    ends. The client should get an OpenAI-shaped 503 (try again elsewhere), not
    uvicorn's plain-text "Internal Server Error" 500 or a reset connection."""
    with TcpTrap("silent") as trap:
        gateway = start_gateway(trap.url, "--shutdown-grace", "1", "--upstream-timeout", "60")
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                outcome["response"] = httpx.post(responses_url(gateway), json={**BODY, "stream": streaming}, timeout=60)
            except httpx.HTTPError as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=call, daemon=True)
        thread.start()
        assert trap.wait_for(lambda conns: any(c.request.startswith(b"POST") for c in conns), timeout=20)
        assert gateway.process is not None
        gateway.process.send_signal(signal.SIGTERM)
        thread.join(timeout=30)
        assert not thread.is_alive()
        assert exits_cleanly(gateway, timeout=20), gateway.log()[-2000:]
    assert "response" in outcome, f"no HTTP answer: {outcome.get('error')!r}"
    response: httpx.Response = outcome["response"]
    error = assert_openai_error(response, 503)
    assert "shutting down" in error["message"], error


def test_sigterm_while_a_whole_reply_is_being_sent_lets_it_be_and_logs_it_as_sent(
    upstream: ChatUpstream, start_gateway: StartGateway
) -> None:
    """SIGTERM right after a large non-streamed reply began, to a client that reads none
    of it: the gateway exits cleanly and logs the exchange as answered (200, completed).
    (uvicorn takes the whole reply in one write; a server whose ``send`` waits for the
    client is tests/server/test_shutdown_reply.py.)"""
    gateway = start_gateway(upstream.base_url, "--shutdown-grace", "1")
    upstream.enqueue(Text("many words " * 2_000_000))  # 22 MB: more than the sockets buffer, under the upstream body limit
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(60)
        sock.connect(("127.0.0.1", gateway.port))
        sock.sendall(http_request("/v1/responses", orjson.dumps({"model": "m", "input": "say a lot", "stream": False})))
        assert sock.recv(12, socket.MSG_PEEK) == b"HTTP/1.1 200"  # the reply has begun; nobody reads on
        assert gateway.process is not None
        gateway.process.send_signal(signal.SIGTERM)
        assert exits_cleanly(gateway, timeout=60), gateway.log()[-2000:]
    lines = [orjson.loads(line[line.index("{"):]) for line in gateway.log().splitlines() if '"request_id"' in line]
    assert [(line["status"], line["outcome"]) for line in lines] == [(200, "completed")], lines
    assert "Traceback" not in gateway.log()
