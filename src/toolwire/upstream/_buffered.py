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
the chunk ends, the low-water marks under which the connection resumes reading, the
error to raise and the total-timeout timer. A reader in any state it does not handle
(nothing buffered, an error set, a first chunk partly read) is left to ``readany``;
tests hold the two to the same bytes and the same flow control
(tests/upstream/test_buffered.py). If aiohttp's reader no longer has those
attributes, importing this module fails at once, rather than reading some other way.
"""

from __future__ import annotations

from aiohttp import StreamReader

_READ = (
    "_buffer", "_buffer_offset", "_size", "_cursor", "_http_chunk_splits", "_low_water", "_low_water_chunks",
    "_exception", "_protocol", "_timer",
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
    data = buffer[0] if len(buffer) == 1 else b"".join(buffer)
    buffer.clear()
    size = len(data)
    content._size -= size
    cursor = content._cursor = content._cursor + size
    splits = content._http_chunk_splits
    while splits and splits[0] < cursor:  # the ends of the chunks taken
        splits.popleft()
    if content._size < content._low_water and (splits is None or len(splits) < content._low_water_chunks):
        content._protocol.resume_reading()  # (it may feed the buffer again: what comes is for the next read)
    return data
