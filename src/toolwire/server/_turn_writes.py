"""``TurnWrites``: what a connection writes in one turn of the event loop, as one write.

uvicorn writes each ASGI message to the socket as it comes: a streamed answer's head
(``http.response.start``) in one system call, each part of its body in another. When an
answer is ready at once (the upstream's whole stream already read), its head, its events
and its end are three writes, each a system call and, on a local connection, the
receiver's work done in the sender's time as well. ``TurnWrites`` is the transport a
client connection's protocol (and its request cycles) write to: the bytes written during
one turn of the event loop are joined and handed to the socket's transport once, at the
end of the turn (``loop.call_soon``). Nothing waits longer than that turn, and the bytes
keep the order they were written in.

Everything else is the socket transport's. Closing (or ending the write side) hands over
what is held first, so an answer's last bytes go out before the connection closes;
aborting drops it, as aborting drops what the socket transport holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


class TurnWrites(asyncio.Transport):
    """``transport`` as its protocol sees it, with the writes of one turn of ``loop`` joined."""

    __slots__ = ("_held", "_loop", "transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.transport = transport
        self._loop = loop
        self._held: list[bytes] | None = None

    # ------------------------------------------------------------------ writing, joined

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if self._held is None:
            self._held = [bytes(data)]
            self._loop.call_soon(self.flush)
        else:
            self._held.append(bytes(data))

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        """Hand what is held to the socket's transport (at the end of the turn it was
        written in, or before the connection closes)."""
        held, self._held = self._held, None
        if held and not self.transport.is_closing():
            self.transport.write(b"".join(held))  # (one piece alone is joined as itself, uncopied)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def abort(self) -> None:
        self._held = None
        self.transport.abort()

    # ------------------------------------------------------------------ the socket transport's

    def can_write_eof(self) -> bool:
        return self.transport.can_write_eof()

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + sum(len(data) for data in self._held or ())

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.transport.set_write_buffer_limits(high, low)

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.transport.get_protocol()

    def is_reading(self) -> bool:
        return self.transport.is_reading()

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()
