"""``toolwire serve --workers N``: every worker gets its share of connections, and they stop together.

Real processes on loopback: the gateway's supervisor and its workers, a scripted
upstream, keep-alive clients. Which worker holds a connection is read from ``/proc``
(the socket inodes each worker has open, matched against ``/proc/net/tcp``).
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.reliability.helpers import wait_until
from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV, GatewayProcess, free_port
from tests.support.served import chat_config
from toolwire.cli._serve import uvicorn_protocols
from toolwire.config import ServerConfig
from toolwire.server import _workers
from toolwire.server._factory import MODEL_OVERRIDE_ENV
from toolwire.server._settings import CONFIG_ENV
from toolwire.server._workers import run_workers

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; SO_REUSEPORT workers are Linux only")

CONNECTIONS = 24
BODY = orjson.dumps({"model": "m", "input": "hi", "stream": True})


@pytest.fixture
def upstream() -> Iterator[ChatUpstream]:
    with ChatUpstream() as server:
        server.responder = lambda request: Text("hello")
        yield server


def workers_of(pid: int) -> list[int]:
    """The worker processes under the supervisor ``pid`` (not multiprocessing's resource tracker)."""
    found = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"resource_tracker" not in command:
            found.append(int(child))
    return found


def sockets_on(port: int, state: str) -> set[str]:
    """Socket inodes in ``state`` (01 established, 0A listening) whose local port is ``port``."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        if local_port == port and fields[3] == state:
            inodes.add(fields[9])
    return inodes


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def stream_once(connection: http.client.HTTPConnection) -> bytes:
    connection.request("POST", "/v1/responses", BODY, {"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200
    return response.read()


def wait_for_workers(gateway: GatewayProcess, count: int) -> list[int]:
    """The workers' pids, once ``count`` of them listen on the gateway's port."""
    assert gateway.process is not None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        workers = workers_of(gateway.process.pid)
        if len(workers) == count and len(sockets_on(gateway.port, "0A")) == count:
            return workers
        time.sleep(0.05)
    raise AssertionError(f"{count} workers did not start listening")


def test_connections_spread_over_every_worker(upstream: ChatUpstream, tmp_path: Path) -> None:
    with GatewayProcess(upstream.base_url, tmp_path / "gateway.log", "--workers", "2") as gateway:
        workers = wait_for_workers(gateway, 2)
        connections = [http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=20) for _ in range(CONNECTIONS)]
        try:
            for connection in connections:
                assert b"response.completed" in stream_once(connection)
            held = sockets_on(gateway.port, "01")
            shares = {worker: len(socket_inodes(worker) & held) for worker in workers}
        finally:
            for connection in connections:
                connection.close()
        assert sum(shares.values()) == CONNECTIONS, shares
        # The kernel hashes connections over the workers' sockets: each gets a fair share
        # (fewer than 4 of 24 on one side happens with probability ~1e-4 by chance).
        assert min(shares.values()) >= 4, shares
        # Each worker logs its own exchanges (a line once its exchange has closed, which
        # may be just after its client had the whole answer).
        wait_until(lambda: gateway.log().count('"outcome":"completed"') >= CONNECTIONS, timeout=10)
        assert gateway.log().count('"outcome":"completed"') == CONNECTIONS


def test_sigterm_stops_every_worker(upstream: ChatUpstream, tmp_path: Path) -> None:
    gateway = GatewayProcess(upstream.base_url, tmp_path / "gateway.log", "--workers", "2").start()
    assert gateway.process is not None
    process = gateway.process
    workers = wait_for_workers(gateway, 2)
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=20)
    assert b"response.completed" in stream_once(connection)
    connection.close()
    process.terminate()
    assert process.wait(timeout=20) == 0
    for worker in workers:
        assert not Path(f"/proc/{worker}").exists() or "Z" in Path(f"/proc/{worker}/stat").read_text().split()[2]


def test_a_taken_port_is_a_clear_error(upstream: ChatUpstream, tmp_path: Path) -> None:
    with GatewayProcess(upstream.base_url, tmp_path / "first.log", "--workers", "2") as first:
        args = [
            sys.executable, "-m", "toolwire", "serve", "--upstream", upstream.base_url,
            "--host", "127.0.0.1", "--port", str(first.port), "--workers", "2", "--store", "none",
        ]
        result = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 1
        assert f"cannot listen on 127.0.0.1:{first.port}" in result.stderr
        assert "Traceback" not in result.stderr


def test_a_worker_that_dies_is_replaced(upstream: ChatUpstream, tmp_path: Path) -> None:
    with GatewayProcess(upstream.base_url, tmp_path / "gateway.log", "--workers", "2") as gateway:
        assert gateway.process is not None
        workers = wait_for_workers(gateway, 2)
        # In the start-up window a death stops the gateway; wait until it is over.
        assert wait_until(lambda: "workers past start-up" in gateway.log(), timeout=30), gateway.log()
        os.kill(workers[0], 9)

        def replaced() -> bool:
            assert gateway.process is not None
            now = workers_of(gateway.process.pid)
            return len(now) == 2 and workers[0] not in now

        assert wait_until(replaced, timeout=20), f"no new worker: {workers_of(gateway.process.pid)}"
        assert "starting another" in gateway.log()
        connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=20)
        assert b"response.completed" in stream_once(connection)
        connection.close()


def test_a_gateway_process_logs_its_format_and_makes_records_without_what_it_does_not_print() -> None:
    """``configure_logging``: the format's fields, and no caller, thread or process looked
    up for a record (the format prints none of them)."""
    script = (
        "import logging\n"
        "from toolwire.server._log_lines import configure_logging\n"
        "configure_logging('info')\n"
        "records = []\n"
        "capture = logging.Handler()\n"
        "capture.emit = records.append\n"
        "logging.getLogger().addHandler(capture)\n"
        "logging.getLogger('toolwire.exchange').info('%s', '{\"request_id\":\"resp_1\"}')\n"
        "logging.getLogger('toolwire.exchange').debug('not at info')\n"
        "(record,) = records\n"
        "print(record.lineno, record.thread, record.process, record.processName)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["0", "None", "None", "None"]  # line 0: no caller looked up
    (line,) = done.stderr.splitlines()
    date, clock, rest = line.split(" ", 2)
    assert time.strptime(f"{date} {clock.split(',')[0]}", "%Y-%m-%d %H:%M:%S") and len(clock.split(",")[1]) == 3
    assert rest == 'INFO toolwire.exchange: {"request_id":"resp_1"}'


def test_the_supervisor_run_here_serves_through_workers_that_see_each_other_and_cleans_up(
    upstream: ChatUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run_workers`` in this process (the tests above run it in a gateway process): its
    two workers each serve a share of the connections and reach each other (one scrape of
    ``/metrics`` holds both shares, by worker); a worker killed past start-up is replaced
    in its place (the scrape after it still has workers 0 and 1); SIGTERM stops them and
    ``run_workers`` returns 0, with the signal handlers it replaced given back and the
    workers' private directory removed."""
    monkeypatch.setenv(UPSTREAM_KEY_ENV, UPSTREAM_KEY)
    monkeypatch.setenv(CONFIG_ENV, chat_config(upstream.base_url).model_dump_json())
    monkeypatch.setenv(MODEL_OVERRIDE_ENV, "")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the workers' directory goes
    port = free_port()
    config = {
        "app": "toolwire.server._factory:app_from_env", "factory": True, "host": "127.0.0.1", "port": port,
        "log_level": "warning", "access_log": False, **uvicorn_protocols(ServerConfig()),
    }  # fmt: skip
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    seen: dict[str, Any] = {"streams": [], "scrapes": []}
    others = set(workers_of(os.getpid()))  # this process's children before (a test runner's own)

    def workers() -> list[int]:
        return sorted(set(workers_of(os.getpid())) - others)

    def serve_and_scrape() -> None:
        for _ in range(CONNECTIONS):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
            seen["streams"].append(stream_once(connection))
            connection.close()
        scrape = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        scrape.request("GET", "/metrics")
        seen["scrapes"].append(served_by_worker(scrape.getresponse().read().decode()))
        scrape.close()

    def client() -> None:
        # Taken as soon as the workers are started, well inside their start-up window.
        installed = wait_until(lambda: signal.getsignal(signal.SIGTERM) != handlers[signal.SIGTERM], timeout=2)
        try:
            assert installed
            assert wait_until(lambda: len(sockets_on(port, "0A")) == 2, timeout=30), "two workers listening"
            seen["directories"] = [path.name for path in tmp_path.iterdir()]
            serve_and_scrape()
            first = workers()
            time.sleep(_workers._EARLY_DEATH_SECONDS)  # past start-up: a death is a restart, not the end
            os.kill(first[0], signal.SIGKILL)
            assert wait_until(lambda: len(set(workers()) - set(first)) == 1, timeout=30), "replaced"
            assert wait_until(lambda: len(sockets_on(port, "0A")) == 2, timeout=30), "the new worker listening"
            serve_and_scrape()
        finally:
            if installed and not returned.is_set():  # (once returned, SIGTERM would end the test run)
                os.kill(os.getpid(), signal.SIGTERM)
            elif not installed:  # workers dead right after starting: run_workers gives up
                for worker in workers():
                    os.kill(worker, signal.SIGKILL)

    returned = threading.Event()
    thread = threading.Thread(target=client)
    thread.start()
    try:
        status = run_workers(config, 2, "warning")
    finally:
        returned.set()
        thread.join(60)
        left = workers()
        for worker in left:  # none, unless run_workers failed: never leave them to hang the run
            os.kill(worker, signal.SIGKILL)
    assert left == []
    assert status == 0
    assert len(seen["streams"]) == 2 * CONNECTIONS
    assert all(b"response.completed" in stream for stream in seen["streams"])
    before, after = seen["scrapes"]
    assert sorted(before) == [0, 1] and sum(before.values()) == CONNECTIONS, before
    assert sorted(after) == [0, 1], after  # the replacement took its predecessor's place
    assert len(seen["directories"]) == 1 and seen["directories"][0].startswith("toolwire-workers-")
    assert list(tmp_path.iterdir()) == [], "the workers' directory is removed"
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers


def served_by_worker(metrics: str) -> dict[int, float]:
    found = re.findall(r'^toolwire_requests_total\{[^}]*outcome="completed"[^}]*worker="([^"]+)"\} (\S+)$', metrics, re.M)
    return {int(worker) if worker.isdigit() else -1: float(count) for worker, count in found}


def test_a_workers_directory_removed_under_the_supervisor_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A temporary-files cleaner may remove the workers' directory while the gateway runs:
    the supervisor still stops as it would have (here: workers that cannot start, status 1),
    not with a traceback for a directory it no longer has to remove."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    config = {
        "app": "tests.server.no_such_module:app", "host": "127.0.0.1", "port": free_port(),
        "log_level": "critical", "access_log": False, **uvicorn_protocols(ServerConfig()),
    }  # fmt: skip
    removed = threading.Event()

    def cleaner() -> None:
        if wait_until(lambda: any(tmp_path.iterdir()), timeout=10):
            for directory in tmp_path.iterdir():
                directory.rmdir()  # empty: no worker has started listening
            removed.set()

    thread = threading.Thread(target=cleaner)
    thread.start()
    try:
        status = run_workers(config, 2, "critical")
    finally:
        thread.join(20)
    assert removed.is_set()
    assert status == 1
