"""``UpstreamConnector``: aiohttp's TCP connector, whose connections resume only what is paused.

aiohttp's ``StreamReader`` asks its connection's protocol to resume reading every time a
reader takes a piece of the body while the buffer is under its low-water mark, paused or
not; the protocol then feeds its HTTP parser an empty read and resumes the transport.
The body of a streamed answer is buffered one HTTP chunk to a piece, and a model server
writes one chunk per SSE event, so reading a 44-event answer made 44 such calls: 35 µs
of the 71 it took to read an answer that had arrived whole (in process), 6.7 % of the
gateway's instructions per request (bench/RESULTS.md, 2026-12-04).

The protocol here (``_ResumeWhenPaused``) passes a resume to aiohttp only when reading is
paused: by flow control (the reader's buffer over its high-water mark, too many chunks
unread, decompressed bytes piling up) or by a buffer the protocol cannot drain yet. Those
pauses, and everything else, stay aiohttp's own code. A resume when nothing is paused has
nothing to do: the parser only keeps bytes back when it was paused, and the transport is
reading.

aiohttp has no public way to choose its connections' protocol: the connector keeps the
factory it makes them with in ``_factory`` (aiohttp 3.x; pinned in pyproject.toml). If
that ever changes, ``UpstreamConnector`` raises at once rather than quietly reading
without it (tests/upstream/test_connector.py).
"""

from __future__ import annotations

import functools
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler


class _ResumeWhenPaused(ResponseHandler):
    """A client connection's protocol that ignores a resume when reading is not paused."""

    def resume_reading(self, resume_parser: bool = True) -> None:
        if self._reading_paused or self._buffer_paused:
            super().resume_reading(resume_parser)


class UpstreamConnector(aiohttp.TCPConnector):
    """``aiohttp.TCPConnector`` (same arguments) making ``_ResumeWhenPaused`` connections."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        made_by = getattr(self, "_factory", None)
        if not isinstance(made_by, functools.partial) or made_by.func is not ResponseHandler:
            raise RuntimeError("this aiohttp makes its connections differently: UpstreamConnector needs updating")
        protocol: type[ResponseHandler] = _ResumeWhenPaused
        self._factory = functools.partial(protocol, *made_by.args, **made_by.keywords)
