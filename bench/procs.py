"""Subprocesses of a benchmark run and what /proc says about them (CPU time, RSS)."""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (uvicorn ``--workers N`` forks workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, ()))
    return tree


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` and its descendants so far."""
    total = 0
    for member in descendants(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
    return total / _TICKS


def memory_kib(pid: int, field: str = "VmRSS") -> int:
    """``VmRSS`` (or ``VmHWM``, ...) of ``pid`` and its descendants, in KiB."""
    total = 0
    for member in descendants(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith(field + ":"):
                    total += int(line.split()[1])
    return total


def bench_environment(work: Path) -> dict[str, str]:
    """The environment of every process the bench starts: this one's, with the state
    directory in ``work``, so that a gateway's default store (``sqlite://``) is the bench's
    own file and never the user's (a long-history run with ``store`` true writes 1.4 MB a
    turn)."""
    return {**os.environ, "XDG_STATE_HOME": str((work / "state").resolve())}


@dataclass
class Service:
    """A server subprocess on loopback, with its log in a file; stopped on exit."""

    name: str
    args: list[str]
    log_path: Path
    port: int = 0
    health_path: str | None = None  # GET this until 200; None: wait for "listening on HOST:PORT"
    process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self, timeout: float = 60.0) -> Service:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        env = bench_environment(self.log_path.parent)
        if self.health_path is None:
            with self.log_path.open("wb") as log:
                self.process = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=log, env=env)
            self.port = self._read_port(deadline)
            return self
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, env=env)
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.log()[-4000:]}")
            try:
                with urllib.request.urlopen(self.url + self.health_path, timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer {self.health_path} within {timeout:g} s:\n{self.log()[-4000:]}")

    def _read_port(self, deadline: float) -> int:
        assert self.process is not None and self.process.stdout is not None
        fd = self.process.stdout.fileno()  # raw reads: a buffered read would hide data from select
        line = b""
        while time.monotonic() < deadline and b"\n" not in line:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                data = os.read(fd, 4096)
                if not data:
                    break
                line += data
            elif self.process.poll() is not None:
                break
        text = line.split(b"\n", 1)[0].decode(errors="replace").strip()
        if not text.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"{self.name} did not start ({text!r}):\n{self.log()[-4000:]}")
        return int(text.rsplit(":", 1)[1])

    def stop(self, timeout: float = 15.0) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                for member in reversed(descendants(process.pid)):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(member, signal.SIGKILL)
                process.wait()
        if process.stdout is not None:
            process.stdout.close()

    def __enter__(self) -> Service:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def upstream_service(log_dir: Path, *flags: str, name: str = "upstream") -> Service:
    return Service(name, [sys.executable, "-m", "bench.upstream", "--port", "0", *flags], log_dir / f"{name}.log")


def relay_service(upstream_url: str, chats: dict[str, Path], log_dir: Path, name: str = "relay") -> Service:
    """``bench.relay`` in front of ``upstream_url``, sending ``chats[NAME]`` for ``X-Bench-Body: NAME``."""
    args = [sys.executable, "-m", "bench.relay", "--upstream", upstream_url, "--port", "0"]
    for body, path in chats.items():
        args += ["--chat", f"{body}={path}"]
    return Service(name, args, log_dir / f"{name}.log")


_GATEWAY_PREFIX: list[str] | None = None


def gateway_command() -> list[str]:
    """``python -m toolwire serve`` (or without ``serve`` while the CLI has a single command)."""
    global _GATEWAY_PREFIX
    if _GATEWAY_PREFIX is None:
        base = [sys.executable, "-m", "toolwire"]
        probe = subprocess.run([*base, "--help"], capture_output=True, text=True, timeout=60)
        has_commands = re.search(r"Commands\b[\s\S]*\bserve\b", probe.stdout) is not None
        _GATEWAY_PREFIX = [*base, "serve"] if has_commands else base
    return list(_GATEWAY_PREFIX)


def gateway_service(upstream_url: str, log_dir: Path, *flags: str, name: str = "gateway") -> Service:
    port = free_port()
    args = [*gateway_command(), "--upstream", upstream_url, "--host", "127.0.0.1", "--port", str(port), *flags]
    return Service(name, args, log_dir / f"{name}.log", port=port, health_path="/healthz")
