"""What the reliability tests share: raw HTTP on a socket, SSE reading, the error shape,
a process's resources from /proc, and ``TcpTrap``, an upstream that is not a server.

Everything talks to 127.0.0.1 only, and every wait has a deadline.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

import httpx
import orjson

from tests.support.gateway import UPSTREAM_KEY, GatewayProcess
from toolwire.protocol import TERMINAL_EVENT_TYPES, SSEDecoder

JSON = dict[str, Any]
ERROR_FIELDS = {"message", "type", "param", "code"}


# ---------------------------------------------------------------- requests and answers


def responses_url(gateway: GatewayProcess) -> str:
    return gateway.base_url + "/responses"


def assert_openai_error(response: httpx.Response, status: int | None = None) -> JSON:
    """The response is an OpenAI-shaped JSON error (4xx unless ``status`` says otherwise)."""
    text = response.text
    if status is None:
        assert 400 <= response.status_code < 500, (response.status_code, text)
    else:
        assert response.status_code == status, (response.status_code, text)
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == ERROR_FIELDS, error
    assert isinstance(error["message"], str) and error["message"].strip(), error
    assert isinstance(error["type"], str) and error["type"], error
    assert error["param"] is None or isinstance(error["param"], str), error
    assert error["code"] is None or isinstance(error["code"], str), error
    for trace in ("Traceback", 'File "', "site-packages"):
        assert trace not in text, text
    return dict(error)


def read_events(body: Iterable[bytes]) -> list[JSON]:
    decoder = SSEDecoder()
    events: list[JSON] = []
    for chunk in body:
        events.extend(orjson.loads(event.data) for event in decoder.feed(chunk))
    events.extend(orjson.loads(event.data) for event in decoder.flush())
    return events


def stream(gateway: GatewayProcess, body: JSON, *, timeout: float = 30.0, headers: dict[str, str] | None = None) -> list[JSON]:
    """POST a streaming request; the decoded events (the answer must be 200 SSE)."""
    with httpx.stream(
        "POST", responses_url(gateway), json={**body, "stream": True}, headers=headers, timeout=timeout
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return read_events(response.iter_raw())


def terminal(events: list[JSON]) -> JSON:
    """The one terminal event, which must be the last, after contiguous sequence numbers."""
    assert [e["sequence_number"] for e in events] == list(range(len(events))), [e["type"] for e in events]
    ends = [e for e in events if e["type"] in TERMINAL_EVENT_TYPES]
    assert len(ends) == 1, [e["type"] for e in events]
    assert events[-1] is ends[0], [e["type"] for e in events]
    return ends[0]


def failure_message(events: list[JSON]) -> str:
    """The stream ended in ``response.failed``: its error message."""
    end = terminal(events)
    assert end["type"] == "response.failed", end
    error = end["response"]["error"]
    assert isinstance(error["message"], str) and error["message"], error
    return str(error["message"])


def output_text(response: JSON) -> str:
    return "".join(
        part.get("text", "")
        for item in response.get("output") or ()
        if item.get("type") == "message"
        for part in item.get("content") or ()
    )


def http_request(path: str, body: bytes, *, headers: dict[str, str] | None = None) -> bytes:
    """A complete HTTP/1.1 POST as bytes (Content-Length set unless ``headers`` frame it)."""
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    framing = {name.lower() for name in headers or {}}
    if not framing & {"content-length", "transfer-encoding"}:
        lines.append(f"Content-Length: {len(body)}")
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@dataclass
class RawAnswer:
    status: int
    headers: dict[str, str]
    body: bytes


def read_answer(sock: socket.socket, timeout: float = 10.0) -> RawAnswer:
    """Read one HTTP response with a Content-Length from ``sock``."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"connection closed before a whole response head: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return RawAnswer(int(status_line.split()[1]), headers, rest[:length])


def open_stream(gateway: GatewayProcess, body: JSON, *, until: str, timeout: float = 20.0) -> tuple[socket.socket, bytes]:
    """Send a streaming request on a raw socket and read until ``until`` appears.

    Returns the open socket (the caller closes it: that is the client going away) and
    what was read.
    """
    sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=timeout)
    try:
        sock.sendall(http_request("/v1/responses", orjson.dumps({**body, "stream": True})))
        seen = b""
        deadline = time.monotonic() + timeout
        while until.encode() not in seen:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {until!r} within {timeout} s; read {seen[-500:]!r}")
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"the gateway closed the stream before {until!r}: {seen[-500:]!r}")
            seen += chunk
    except BaseException:
        sock.close()
        raise
    return sock, seen


def wait_until(predicate: Any, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


# ---------------------------------------------------------------- a process from /proc


@dataclass(frozen=True)
class ProcessStats:
    fds: int
    threads: int
    rss_bytes: int

    @property
    def rss_mib(self) -> float:
        return self.rss_bytes / 2**20


def process_stats(pid: int) -> ProcessStats:
    """Open file descriptors, threads and resident memory of a live process."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            fields[name] = value.split()
    return ProcessStats(fds=fds, threads=int(fields["Threads"][0]), rss_bytes=int(fields["VmRSS"][0]) * 1024)


def gateway_pid(gateway: GatewayProcess) -> int:
    assert gateway.process is not None and gateway.process.poll() is None, "the gateway is not running"
    return gateway.process.pid


# ---------------------------------------------------------------- secrets


def leaked(text: str, secrets: Iterable[str] = (UPSTREAM_KEY,)) -> list[str]:
    """The secrets that appear in ``text``."""
    return [secret for secret in secrets if secret in text]


# ---------------------------------------------------------------- an upstream that is not a server


@dataclass
class TrapConnection:
    accepted_at: float
    request: bytes = b""
    closed_at: float | None = None
    """When the trap noticed the peer closed its side (monotonic)."""


class TcpTrap:
    """A TCP listener on 127.0.0.1 that never answers HTTP.

    ``mode="close"``: read the request, then close the connection without a byte of
    answer (a backend that crashes on every request). ``mode="silent"``: read the
    request and say nothing, holding the connection until the peer closes it (a backend
    that never sends its first byte). Every connection is recorded.
    """

    def __init__(self, mode: Literal["close", "silent"]) -> None:
        self.mode = mode
        self.connections: list[TrapConnection] = []
        self._changed = threading.Condition()
        self._sockets: list[socket.socket] = []
        trap = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                trap._handle(self.request)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler, bind_and_activate=True)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _handle(self, sock: socket.socket) -> None:
        record = TrapConnection(accepted_at=time.monotonic())
        with self._changed:
            self.connections.append(record)
            self._sockets.append(sock)
        sock.settimeout(120)
        try:
            while b"\r\n\r\n" not in record.request:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                record.request += chunk
            with self._changed:
                self._changed.notify_all()
            if self.mode == "silent":
                while sock.recv(65536):
                    pass
        except OSError:
            pass
        finally:
            with self._changed:
                record.closed_at = time.monotonic()
                self._changed.notify_all()

    def wait_for(self, predicate: Any, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self.connections), timeout)

    def __enter__(self) -> TcpTrap:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        with self._changed:
            for sock in self._sockets:
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=10)


@contextmanager
def dead_port_url() -> Iterator[str]:
    """A loopback URL where nothing listens (the port is held bound but not listening)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


# ---------------------------------------------------------------- nesting


def nest(value: Any, levels: int, use_dicts: bool = False) -> Any:
    """``value`` wrapped in ``levels`` lists (or ``{"k": ...}`` objects)."""
    for _ in range(levels):
        value = {"k": value} if use_dicts else [value]
    return value


def deepest_accepted_depth() -> int:
    """The deepest body ``parse_request`` accepts, found by asking it, not by reading its code."""
    from toolwire.errors import ClientError
    from toolwire.protocol import parse_request

    depth = 3
    while depth < 5000:
        body = {"model": "m", "input": "hi", "x": nest([], depth - 2)}
        try:
            parse_request(json.dumps(body))
        except ClientError:
            return depth - 1
        depth += 1
    return depth


def at_depth(body: JSON, path: tuple[str | int, ...], depth: int) -> JSON:
    """``body`` with a nested list put at ``path`` so that the whole body is ``depth`` deep.

    Objects missing along the path are created.
    """
    target: Any = body
    for part in path[:-1]:
        if isinstance(part, str) and part not in target:
            target[part] = {}
        target = target[part]
    target[path[-1]] = nest([], depth - len(path) - 1)
    return body
