"""A real ``redis-server`` for the tests: started on a free 127.0.0.1 port, no persistence,
and stoppable and restartable on the same port (to test a gateway riding out a restart)."""

from __future__ import annotations

import contextlib
import ctypes
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

REDIS_SERVER = shutil.which("redis-server")
MISSING_REASON = (
    "REDIS STORE TESTS SKIPPED: no redis-server binary on PATH. Install the Debian package "
    "'redis-server' (apt-get install -y redis-server); CI installs it, and must not skip these."
)


class RedisServer:
    """One ``redis-server`` process; ``url`` stays valid across ``stop()`` / ``start()``."""

    def __init__(self, directory: Path) -> None:
        assert REDIS_SERVER is not None, MISSING_REASON
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert self._process is None, "redis-server is already running"
        log = (self.directory / "redis.log").open("ab")
        self._process = subprocess.Popen(
            [
                str(REDIS_SERVER),
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(self.directory),
                "--daemonize", "no",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        log.close()
        deadline = time.monotonic() + 10
        while not self._answers_ping():
            if self._process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self._process.returncode}; see {self.directory}/redis.log")
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not answer PING within 10 s")
            time.sleep(0.02)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.send_signal(signal.SIGCONT)  # in case it was paused
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): connections open, nothing answered."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self._process is not None
        self._process.send_signal(signal.SIGCONT)

    @property
    def running(self) -> bool:
        return self._process is not None

    def _answers_ping(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith(b"+PONG")
        return False


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before ``exec``: SIGKILL it when the test process dies, however it dies.

    A test killed from outside (mutation testing's timeout, a CI job cancelled) runs no
    teardown; a server it had paused (SIGSTOP) would otherwise stay behind, stopped, for
    good. SIGKILL ends a stopped process too. Linux only; elsewhere a no-op. Linux sends it
    when the *thread* that started the server ends: ``start`` is called from the test's
    main thread (fixtures and the event loop's), never from a worker thread.
    """
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
