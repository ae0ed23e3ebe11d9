"""Run the real gateway (``toolwire serve``) as a subprocess on loopback, for tests.

The process is started exactly as a user would start it, so the CLI, uvicorn and the
app factory are all exercised. Its combined log is kept in a file that tests can read
(for example to prove that no key ever appears in it).
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

UPSTREAM_KEY_ENV = "TOOLWIRE_TEST_UPSTREAM_KEY"
UPSTREAM_KEY = "sk-upstream-secret-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class GatewayProcess:
    """``toolwire serve --upstream URL ...`` on a free port; ``base_url`` ends in ``/v1``.

    ``upstream_url=None`` starts it with no ``--upstream`` (its ``--config`` has them).
    """

    def __init__(
        self,
        upstream_url: str | None,
        log_path: Path,
        *extra_args: str,
        env: dict[str, str] | None = None,
        open_files: int | None = None,
    ) -> None:
        """``open_files`` sets the process's open-files limit (soft and hard), as ``ulimit -n`` would."""
        self.port = free_port()
        self.open_files = open_files
        self.log_path = log_path
        upstream = ["--upstream", upstream_url, "--upstream-key-env", UPSTREAM_KEY_ENV] if upstream_url else []
        self.args = [
            sys.executable, "-m", "toolwire", "serve",
            "--host", "127.0.0.1", "--port", str(self.port),
            *upstream,
            "--store", f"sqlite:///{log_path.with_suffix('.sqlite3')}",
            *extra_args,
        ]
        self.env = {**os.environ, UPSTREAM_KEY_ENV: UPSTREAM_KEY, **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def start(self, timeout: float = 20.0) -> GatewayProcess:
        log = self.log_path.open("ab")
        limit = self.open_files
        self.process = subprocess.Popen(
            self.args, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=None if limit is None else lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)),
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.process.returncode}:\n{self.log()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"gateway did not become healthy within {timeout} s:\n{self.log()}")

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> GatewayProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
