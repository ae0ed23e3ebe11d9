"""``run_workers``, the parent of ``toolwire serve --workers N``, run in this process over real
worker processes: the address checked first, a worker that dies at once stops it all, one
that dies later is replaced, SIGTERM stops them. ``toolwire serve --workers 2`` itself is
run in tests/cli/test_serve_command.py, and the real process in tests/server/test_workers.py.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolwire.cli._serve import uvicorn_protocols
from toolwire.config import GatewayConfig, ServerConfig
from toolwire.server._log_lines import LOG_FORMAT
from toolwire.server._settings import CONFIG_ENV
from toolwire.server._siblings import WorkerPlace
from toolwire.server._workers import (
    _serve_worker,
    _siblings_directory,
    check_address,
    reuse_port_supported,
    run_workers,
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def worker_config(port: int, app: str = "toolwire.server._factory:app_from_env") -> dict[str, Any]:
    """The uvicorn keywords ``toolwire serve`` hands its workers."""
    return {
        "app": app, "factory": True, "host": "127.0.0.1", "port": port, "log_level": "warning",
        "access_log": False, "loop": "asyncio", **uvicorn_protocols(ServerConfig()),
    }  # fmt: skip


@pytest.fixture
def mock_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    """The configuration the workers build their app from: the mock model, no store."""
    config = GatewayConfig.model_validate(
        {"server": {"store": "none"}, "upstreams": [{"name": "mock", "kind": "mock", "default": True}]}
    )
    monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())


@pytest.fixture
def supervisor_log(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[str]]]:
    caplog.set_level(logging.INFO, logger="toolwire.server")
    yield lambda: [r.getMessage() for r in list(caplog.records) if r.name == "toolwire.server"]


def wait_for(condition: Callable[[], Any], timeout: float = 60.0, unless: threading.Event | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (unless is not None and unless.is_set()):
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise TimeoutError("the condition did not come true")


def healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_address_is_checked_before_any_worker_starts(supervisor_log: Callable[[], list[str]]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert run_workers(worker_config(port), 2, "info") == 1
    assert supervisor_log() == [f"cannot listen on 127.0.0.1:{port}: Address already in use"]
    with pytest.raises(OSError), socket.socket() as again:
        again.bind(("127.0.0.1", 0))
        again.listen()
        check_address("127.0.0.1", again.getsockname()[1])
    with pytest.raises(OSError), socket.socket() as gateway:  # another gateway's worker holds the port
        gateway.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        gateway.bind(("127.0.0.1", 0))
        gateway.listen()
        check_address("127.0.0.1", gateway.getsockname()[1])
    assert check_address("127.0.0.1", 0) > 0
    assert check_address("::1", 0) > 0  # an IPv6 address gets an IPv6 socket
    assert reuse_port_supported()


@pytest.mark.usefixtures("mock_gateway")
def test_a_worker_that_dies_at_once_stops_everything(supervisor_log: Callable[[], list[str]]) -> None:
    status = run_workers(worker_config(free_port(), app="toolwire.nothing_here:app"), 2, "warning")
    assert status == 1
    assert any(re.fullmatch(r"worker \d+ exited \(\d+\) right after starting; stopping", line) for line in supervisor_log())


@pytest.mark.usefixtures("mock_gateway")
def test_a_worker_that_dies_later_is_replaced_and_sigterm_stops_all(supervisor_log: Callable[[], list[str]]) -> None:
    """Of two workers, the second dies: it is replaced (each worker is watched, not only
    the first), and the supervisor says once that the workers are past start-up."""
    port = free_port()
    seen: dict[str, Any] = {}
    returned = threading.Event()

    def operator() -> None:
        try:
            started = wait_for(lambda: [m for m in supervisor_log() if m.startswith("2 workers on")], unless=returned)
            seen["second"] = int(re.search(r"pids \d+, (\d+)\)", started[0])[1])  # type: ignore[index]
            wait_for(lambda: healthy(port))
            wait_for(lambda: "workers past start-up: one that exits from now on is replaced" in supervisor_log())
            os.kill(seen["second"], signal.SIGKILL)
            replaced = wait_for(lambda: [m for m in supervisor_log() if "; starting another" in m])
            seen["replaced"] = replaced[0]
            seen["healthy_again"] = wait_for(lambda: healthy(port))
        finally:
            if not returned.is_set():
                os.kill(os.getpid(), signal.SIGTERM)  # as a service manager stops the gateway

    helper = threading.Thread(target=operator)
    helper.start()
    try:
        status = run_workers(worker_config(port), 2, "warning")
    finally:
        returned.set()
        helper.join()
    assert status == 0
    assert seen["replaced"] == f"worker {seen['second']} exited (-9); starting another"
    assert seen["healthy_again"]
    assert supervisor_log().count("workers past start-up: one that exits from now on is replaced") == 1
    assert signal.getsignal(signal.SIGTERM) is not None and not healthy(port)


@pytest.mark.usefixtures("mock_gateway")
def test_a_worker_serves_its_own_reuse_port_socket_and_logs_as_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What each worker process runs (``_serve_worker``), run here: it logs in toolwire's
    format at the level given, binds the address with ``SO_REUSEPORT`` (so the other
    workers can bind it too), listens for the other workers where its place says, and
    serves it until SIGTERM."""
    port = free_port()
    seen: dict[str, Any] = {}
    returned = threading.Event()
    for name in WorkerPlace(tmp_path, 1, 2).environment():
        monkeypatch.setenv(name, "")  # (restored after: the worker sets them in its process)

    def operator() -> None:
        try:
            seen["healthy"] = wait_for(lambda: healthy(port), unless=returned)
            seen["listening for the others"] = (tmp_path / "1.sock").is_socket()
            with socket.socket() as sibling:  # another worker's socket, on the same address
                sibling.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                sibling.bind(("127.0.0.1", port))
                seen["shared"] = True
        finally:
            if not returned.is_set():
                os.kill(os.getpid(), signal.SIGTERM)

    # uvicorn raises the SIGTERM again once it has shut down, for the handler it found:
    # in a worker process the default one ends the process; here this one notes it.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.update(raised_again=True))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers = []  # as in a fresh worker process
    root.setLevel(logging.DEBUG)
    helper = threading.Thread(target=operator)
    helper.start()
    try:
        _serve_worker(worker_config(port), "warning", WorkerPlace(tmp_path, 1, 2))
        configured = root.handlers[:], root.level
    finally:
        returned.set()
        helper.join()
        signal.signal(signal.SIGTERM, previous)
        root.handlers = handlers
        root.setLevel(level)
    assert seen == {"healthy": True, "listening for the others": True, "shared": True, "raised_again": True}
    assert list(tmp_path.iterdir()) == []  # its socket removed when it stopped
    [handler], configured_level = configured
    assert configured_level == logging.WARNING
    assert handler.formatter is not None and handler.formatter._fmt == LOG_FORMAT


def test_the_workers_directory_is_private_and_short_enough_for_their_sockets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made = _siblings_directory()
    assert made.parent == tmp_path and made.name.startswith("toolwire-workers-")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    # "toolwire-workers-" and mkdtemp's 8 characters, then "/999.sock": 35 bytes after the base
    exact = tmp_path / ("e" * (107 - 35 - len(bytes(tmp_path)) - 1))
    exact.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(exact))
    fits = _siblings_directory()
    assert len(bytes(fits / "999.sock")) == 107 and fits.parent == exact, "a socket's path of 107 bytes fits"
    deep = tmp_path / ("d" * 90)  # a socket's path under it would pass the 107 bytes Linux allows
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    fallback = _siblings_directory()
    try:
        assert fallback.parent == Path("/tmp") and fallback.name.startswith("toolwire-workers-")
        assert stat.S_IMODE(fallback.stat().st_mode) == 0o700
        assert list(deep.iterdir()) == []  # (the one made there first is gone)
    finally:
        fallback.rmdir()
