"""How many client connections and ``/v1/responses`` exchanges one server process takes.

Each client connection holds a file descriptor, and each exchange one more for its
upstream connection; a process that runs out of descriptors can no longer accept
anyone (measured on uvicorn: with ``ulimit -n 1024``, 1,100 silent connections stopped
the gateway serving for as long as they stayed). So the caps are derived from the
process's open-files limit unless set: ``max_streams`` a quarter of what is left after
``RESERVED_FILES`` (at most 1024), ``max_connections`` the rest (at most 4096), minus
the few connections kept for being told 503 when every other one is busy
(``overflow``). Caps that are set but do not fit under the limit are an error at start,
not a surprise under load.

``raise_open_files_limit`` lifts the soft limit to the hard one at start, as Go's
runtime does: the soft default (often 1024) exists for programs that use ``select``.
"""

from __future__ import annotations

import contextlib
import resource
from dataclasses import dataclass

RESERVED_FILES = 64
"""For everything but client and upstream connections: the listening socket, the event
loop, the store, logs and captures, DNS lookups, a readiness check's connections."""
DEFAULT_MAX_CONNECTIONS = 4096
DEFAULT_MAX_STREAMS = 1024


@dataclass(frozen=True, slots=True)
class Capacity:
    max_connections: int
    max_streams: int
    overflow: int
    """Connections past ``max_connections`` accepted only to be answered 503."""

    @property
    def files_needed(self) -> int:
        return self.max_connections + self.overflow + self.max_streams + RESERVED_FILES


def overflow_for(max_connections: int) -> int:
    return max(4, min(64, max_connections // 16))


def open_files_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def raise_open_files_limit() -> int:
    """Lift the soft open-files limit to the hard one; the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        # An infinite hard limit is refused as a soft one by some kernels: keep the soft one then.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return open_files_limit()


def capacity(max_connections: int | None, max_streams: int | None, open_files: int) -> Capacity:
    """The caps for a process that may open ``open_files`` descriptors; ``ValueError``
    (saying what to change) when the ones set do not fit."""
    usable = open_files - RESERVED_FILES
    streams = max_streams if max_streams is not None else max(1, min(DEFAULT_MAX_STREAMS, usable // 4))
    if max_connections is not None:
        connections = max_connections
    else:
        room = usable - streams
        connections = min(DEFAULT_MAX_CONNECTIONS, room - overflow_for(room))
    fitted = Capacity(connections, streams, overflow_for(connections))
    if connections < 1 or fitted.files_needed > open_files:
        raise ValueError(
            f"{fitted.max_connections} connections (max_connections) and {fitted.max_streams} streams "
            f"(max_streams) need {fitted.files_needed} open files, and this process may open {open_files} "
            "(ulimit -n): raise the limit, or set lower caps."
        )
    return fitted
