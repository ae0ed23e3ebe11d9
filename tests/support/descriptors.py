"""The files this process holds open, read from ``/proc/self/fd`` (Linux)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def open_descriptors_of(path: Path) -> list[str]:
    """The descriptors of this process open on ``path`` (their numbers, as names)."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            if os.readlink(fd) == str(path):
                found.append(fd.name)
    return found
