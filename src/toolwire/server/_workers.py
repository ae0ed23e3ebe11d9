"""``toolwire serve --workers N``: N server processes, each with its own listening socket.

uvicorn's own workers share one listening socket, and whichever worker wakes first
accepts: with keep-alive clients one worker can end up holding nearly every connection
while the others idle (measured: 15 and 16 of wrk's 16 connections on one of two
workers). Here each worker binds the address itself with ``SO_REUSEPORT``, so the
kernel spreads new connections evenly over the workers.

The parent only supervises: it checks the address is free before starting anyone,
forwards SIGINT and SIGTERM (each worker then shuts down gracefully, as a single server
does), restarts a worker that dies on its own, and gives up when a worker dies right
after starting (it would only die again). It also makes the private directory where
the workers reach each other (``_siblings``: one scrape of ``/metrics`` or one look at
the inspector sees every worker), gives each worker its place there (a worker started
again takes the place of the one it replaces), and removes it at the end.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from multiprocessing.context import SpawnProcess
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from ._log_lines import configure_logging as configure_logging
from ._siblings import WorkerPlace

log = logging.getLogger("toolwire.server")

_EARLY_DEATH_SECONDS = 5.0
_POLL_SECONDS = 0.2
_MAX_SOCKET_PATH = 107  # bytes of a Unix socket's path on Linux, less its NUL


def reuse_port_supported() -> bool:
    """Linux spreads connections over ``SO_REUSEPORT`` listeners; elsewhere uvicorn's workers are used."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def _socket(host: str, *, reuse_port: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    return sock


def check_address(host: str, port: int) -> int:
    """Raise ``OSError`` unless ``host:port`` is free; the port (a free one when ``port`` is 0).

    The probe binds *without* ``SO_REUSEPORT``: a socket already listening there, even
    another gateway's reuse-port socket, makes it fail, so two gateways never silently
    share one port.
    """
    with _socket(host, reuse_port=False) as probe:
        probe.bind((host, port))
        return int(probe.getsockname()[1])


def _serve_worker(config: dict[str, Any], log_level: str, place: WorkerPlace | None = None) -> None:
    """One worker process: its own reuse-port socket, and a uvicorn server on it; ``place``
    among its siblings, for the app to find in the environment."""
    configure_logging(log_level)
    if place is not None:
        os.environ.update(place.environment())
    sock = _socket(config["host"], reuse_port=True)
    sock.bind((config["host"], config["port"]))
    sock.set_inheritable(True)
    uvicorn.Server(uvicorn.Config(**config)).run(sockets=[sock])


def _siblings_directory() -> Path:
    """A new private directory (mode 0700) for the workers' sockets, in the temporary
    directory unless its path is too long for a Unix socket's."""
    directory = Path(tempfile.mkdtemp(prefix="toolwire-workers-"))
    if len(bytes(directory / "999.sock")) <= _MAX_SOCKET_PATH:
        return directory
    directory.rmdir()
    return Path(tempfile.mkdtemp(prefix="toolwire-workers-", dir="/tmp"))


def run_workers(config: dict[str, Any], workers: int, log_level: str) -> int:
    """Run ``workers`` processes serving ``config`` (``uvicorn.Config`` keywords) until a
    signal stops them; the exit status for the command."""
    try:
        port = check_address(config["host"], config["port"])
    except OSError as exc:
        log.error("cannot listen on %s:%s: %s", config["host"], config["port"], exc.strerror or exc)
        return 1
    config = {**config, "port": port, "workers": 1}
    context = multiprocessing.get_context("spawn")
    stopping = False
    directory = _siblings_directory()

    def start(index: int) -> tuple[SpawnProcess, float]:
        place = WorkerPlace(directory, index, workers)
        process = context.Process(target=_serve_worker, args=(config, log_level, place))
        process.start()
        return process, time.monotonic()

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for process, _ in running:
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGTERM)

    running = [start(index) for index in range(workers)]
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    log.info("%d workers on %s:%d (pids %s)", workers, config["host"], port,
             ", ".join(str(process.pid) for process, _ in running))
    status = 0
    settled = False
    try:
        while not stopping:
            time.sleep(_POLL_SECONDS)
            if not settled and all(time.monotonic() - started >= _EARLY_DEATH_SECONDS for _, started in running):
                settled = True
                log.info("workers past start-up: one that exits from now on is replaced")
            for index, (process, started) in enumerate(running):
                if process.is_alive() or stopping:
                    continue
                if time.monotonic() - started < _EARLY_DEATH_SECONDS:
                    log.error("worker %s exited (%s) right after starting; stopping", process.pid, process.exitcode)
                    status = 1
                    stop(signal.SIGTERM, None)
                    break
                log.warning("worker %s exited (%s); starting another", process.pid, process.exitcode)
                running[index] = start(index)
        for process, _ in running:
            process.join()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(directory, ignore_errors=True)
    return status
