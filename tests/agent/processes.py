"""Is a process still running? (A killed orphan can stay a zombie where PID 1 does not reap.)"""

from __future__ import annotations

import os
import time
from pathlib import Path


def is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}


def wait_until_stopped(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_running(pid):
            return True
        time.sleep(0.02)
    return False


def pid_from(path: Path, timeout: float = 20.0) -> int:
    """The pid a command wrote to ``path``, once it is there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.02)
    raise TimeoutError(f"{path} was not written")
