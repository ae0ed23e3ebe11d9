"""``take_buffered``: the same bytes as aiohttp's ``readany``, and the same flow control,
whatever the reader holds; anything it does not handle left to ``readany``."""

from __future__ import annotations

import asyncio
import runpy
from pathlib import Path

import aiohttp
import pytest
from aiohttp import StreamReader
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.upstream import _buffered
from toolwire.upstream._buffered import take_buffered

LIMIT = 64  # the reader's low-water mark in bytes; 8 chunks (aiohttp: max(4, limit // 16), halved)


class Connection:
    """A connection's protocol as ``UpstreamConnector``'s are: a resume counts only when
    reading is paused."""

    def __init__(self) -> None:
        self.paused = False
        self.resumes = 0

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self, resume_parser: bool = True) -> None:
        if self.paused:
            self.paused = False
            self.resumes += 1


def reader(connection: Connection) -> StreamReader:
    made = StreamReader(connection, LIMIT, loop=asyncio.get_running_loop())  # type: ignore[arg-type]
    made.begin_http_chunk_receiving()
    return made


def feed(made: StreamReader, chunks: list[bytes]) -> None:
    """Chunks as aiohttp's parser gives them: each one begun, fed and ended."""
    for chunk in chunks:
        made.begin_http_chunk_receiving()
        made.feed_data(chunk)
        made.end_http_chunk_receiving()


def state(made: StreamReader, connection: Connection) -> tuple[object, ...]:
    splits = made._http_chunk_splits
    return (made._size, made._cursor, list(splits or ()), made.total_bytes, connection.paused, connection.resumes)


chunk = st.binary(min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(chunk, max_size=30), min_size=1, max_size=6))
def test_taking_the_buffer_is_reading_it_with_readany(arrivals: list[list[bytes]]) -> None:
    """Bursts of chunks arrive (some past the reader's marks, so it pauses), each burst read
    at once: the bytes, the sizes, the chunk ends and the pauses and resumes agree."""

    async def both() -> None:
        ours, theirs = Connection(), Connection()
        taken, read = reader(ours), reader(theirs)
        for burst in arrivals:
            feed(taken, burst)
            feed(read, burst)
            assert state(taken, ours) == state(read, theirs)
            expected = await read.readany() if burst else b""
            assert (take_buffered(taken) or b"") == expected
            assert state(taken, ours) == state(read, theirs)

    asyncio.run(both())


async def test_a_reader_paused_past_its_marks_resumes_once_all_is_taken() -> None:
    for chunks in ([b"x" * 40] * 4, [b"y"] * 20):  # past the bytes' high-water mark (128); past the chunks' (16)
        connection = Connection()
        made = reader(connection)
        feed(made, chunks)
        assert connection.paused
        assert take_buffered(made) == b"".join(chunks)
        assert (connection.paused, connection.resumes, made._size) == (False, 1, 0)


async def test_one_chunk_is_taken_as_it_is() -> None:
    made = reader(Connection())
    piece = b'data: {"n":1}\n\n'
    feed(made, [piece])
    assert take_buffered(made) is piece  # not copied
    assert take_buffered(made) is None


async def test_nothing_buffered_is_left_to_readany_which_waits() -> None:
    made = reader(Connection())
    assert take_buffered(made) is None
    made.feed_eof()
    assert take_buffered(made) is None
    assert await made.readany() == b""


async def test_an_error_is_left_to_readany_which_raises_it() -> None:
    made = reader(Connection())
    feed(made, [b"data: 1\n\n"])
    made.set_exception(aiohttp.ClientPayloadError("cut"))
    assert take_buffered(made) is None
    with pytest.raises(aiohttp.ClientPayloadError):
        await made.readany()


async def test_a_first_chunk_partly_read_is_left_to_readany() -> None:
    made = reader(Connection())
    feed(made, [b"abcdef", b"ghi"])
    assert await made.read(2) == b"ab"
    assert take_buffered(made) is None
    assert await made.readany() == b"cdefghi"


async def test_the_total_timeout_is_kept_as_readany_keeps_it() -> None:
    class Expired:
        def assert_timeout(self) -> None:
            raise TimeoutError

    made = StreamReader(Connection(), LIMIT, timer=Expired(), loop=asyncio.get_running_loop())  # type: ignore[arg-type]
    made.feed_data(b"data: 1\n\n")
    with pytest.raises(TimeoutError):
        take_buffered(made)


def test_an_aiohttp_whose_reader_keeps_its_body_differently_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    slots = tuple(name for name in StreamReader.__slots__ if name != "_buffer_offset")
    monkeypatch.setattr(StreamReader, "__slots__", slots)
    with pytest.raises(RuntimeError) as raised:
        runpy.run_path(str(Path(_buffered.__file__)))
    assert str(raised.value) == "this aiohttp keeps a body's reader differently: toolwire.upstream._buffered needs updating"
