"""``take_buffered``: all an answer's reader holds, taken at once, as ``readany`` returns it.

aiohttp's ``StreamReader`` keeps a chunked body as its HTTP chunks, and ``readany`` takes
them one at a time (``_read_nowait_chunk``: the chunk split off, the sizes and cursor
moved, the spent chunk ends dropped, the connection asked to resume reading), then joins
them. A model server writes one chunk per SSE event, so a loaded gateway, which finds
most of an answer waiting when it reads, took an answer's 44 chunks in 44 such steps:
5.7 % of its instructions per request (``bench.instructions``, bench/RESULTS.md
2026-12-06). ``take_buffered`` does the same bookkeeping once for all of them.

What it reads and writes of the reader is aiohttp's (3.14, pinned in pyproject.toml):
its buffer of chunks and the offset into the first, the buffered size and the cursor,
the chunk ends, the connection (asked to resume reading, as readany asks it once the
buffer is under its low-water marks), the error to raise and the total-timeout timer. A
reader in any state it does not handle (nothing buffered, an error set, a first chunk
partly read) is left to ``readany``; tests hold the two to the same bytes and the same
flow control (tests/upstream/test_buffered.py). If aiohttp's reader no longer has those
attributes, importing this module fails at once, rather than reading some other way.
"""

from __future__ import annotations

from aiohttp import StreamReader

_READ = (
    "_buffer", "_buffer_offset", "_size", "_cursor", "_http_chunk_splits", "_exception", "_protocol", "_timer",
)
if not set(_READ) <= set(StreamReader.__slots__):
    raise RuntimeError("this aiohttp keeps a body's reader differently: toolwire.upstream._buffered needs updating")


def take_buffered(content: StreamReader) -> bytes | None:
    """What ``content.readany()`` would return now without waiting: every chunk buffered,
    joined. None when it would wait (nothing buffered) or when ``readany`` is to answer
    (an error to raise, a first chunk partly read)."""
    buffer = content._buffer
    if not buffer or content._exception is not None or content._buffer_offset:
        return None
    content._timer.assert_timeout()  # (as readany does; the endpoints' streams have no total timeout)
    data = b"".join(buffer)  # (one chunk alone is joined as itself, uncopied)
    buffer.clear()
    content._size = 0
    cursor = content._cursor = content._cursor + len(data)
    splits = content._http_chunk_splits
    while splits and splits[0] < cursor:  # the ends of the chunks taken (the last one, at the cursor, stays)
        splits.popleft()
    # Nothing is left buffered, and at most one chunk end: under both low-water marks, where
    # readany's last step asks the connection to resume reading (it may feed the buffer again:
    # what comes is for the next read).
    content._protocol.resume_reading()
    return data
