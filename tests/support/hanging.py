"""A loopback address where connecting hangs, as it does to an unreachable host."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def hanging_port() -> Iterator[int]:
    """A listening socket that accepts nothing, its queue already full: a new connection
    to the port it yields hangs in the handshake (the kernel drops the SYN)."""
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        port = full.getsockname()[1]
        fillers: list[socket.socket] = []
        try:
            for _ in range(4):
                filler = socket.socket()
                filler.setblocking(False)
                fillers.append(filler)
                try:
                    filler.connect(("127.0.0.1", port))
                except BlockingIOError:
                    continue  # on its way, as every one must be
                raise AssertionError("a connection to a socket that accepts nothing completed at once")
            yield port
        finally:
            for filler in fillers:
                filler.close()
