"""``HttpEndpoint.stream`` and ``stream_bytes`` against the scripted Chat upstream: the
batches a streamed answer arrives in, where it ends, and how a broken, stalled, garbled
or oversized stream fails."""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp.base_protocol import BaseProtocol

from tests.reliability.helpers import wait_until
from tests.support.chat_upstream import ChatUpstream, Cut, HttpError, Raw, Stall, Text
from toolwire.errors import UpstreamError, UpstreamLimitError, UpstreamProtocolError
from toolwire.protocol import SSEDecoder, WholeAnswer
from toolwire.server._capacity import DEFAULT_MAX_STREAMS, RESERVED_FILES, raise_open_files_limit
from toolwire.upstream import HttpEndpoint, RetryPolicy, UpstreamLimits
from toolwire.upstream._sse_batches import QUIET, StallWatch, StreamStalled, parse_json_object

STREAMED = orjson.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
JSON = dict[str, Any]


@pytest.fixture
async def endpoint(upstream: ChatUpstream) -> AsyncIterator[HttpEndpoint]:
    made = HttpEndpoint(upstream.base_url, "/chat/completions", retry=RetryPolicy(backoff_seconds=0.0), timeout=5)
    yield made
    await made.aclose()


async def read_all(endpoint: HttpEndpoint, **kwargs: Any) -> tuple[list[list[JSON]], bool]:
    async with endpoint.stream(STREAMED, parse_json_object, **kwargs) as batches:
        read = [batch async for batch in batches]
    return read, batches.ended_cleanly


async def stream_failure(endpoint: HttpEndpoint, **kwargs: Any) -> UpstreamError:
    with pytest.raises(UpstreamError) as raised:
        await read_all(endpoint, **kwargs)
    return raised.value


def sse(*payloads: Any) -> list[bytes]:
    return [b"data: " + (p if isinstance(p, bytes) else orjson.dumps(p)) + b"\n\n" for p in payloads]


async def test_the_chunks_in_order_and_the_end_marker(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("hello there"))
    batches, clean = await read_all(endpoint)
    chunks = [chunk for batch in batches for chunk in batch]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == "hello there"
    assert clean and all(batches)


async def test_what_arrives_together_is_one_batch(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(Raw([b"".join(sse({"n": 1}, {"n": 2})), *sse({"n": 3}), b"data: [DONE]\n\n"]))
    batches, clean = await read_all(endpoint)
    assert [c["n"] for c in batches[0]][:2] == [1, 2]  # one write, one read
    assert [c["n"] for batch in batches for c in batch] == [1, 2, 3]
    assert clean


async def test_nothing_after_the_end_marker_is_read_as_data(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(Raw([b"".join([*sse({"n": 1}), b"data: [DONE]\n\n", *sse({"n": 2})]), *sse({"n": 3})]))
    batches, clean = await read_all(endpoint)
    assert batches == [[{"n": 1}]] and clean


async def test_a_terminal_object_ends_the_stream_and_the_rest_is_drained(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(Raw([*sse({"type": "a"}, {"type": "end"}, {"type": "after"}), b": tail\n\n"], linger=0.1))
    batches, clean = await read_all(endpoint, is_terminal=lambda event: event["type"] == "end")
    assert [event["type"] for batch in batches for event in batch] == ["a", "end"] and clean
    # the body was read to its end after the caller was done, so the connection is reused
    # (the upstream's thread notes the end once its last write returned: wait for it)
    assert wait_until(lambda: upstream.ended == [0], timeout=10)
    upstream.enqueue(Text("next"))
    await read_all(endpoint)
    assert len(upstream.requests) == 2


async def test_a_reader_that_stops_at_the_end_marker_leaves_nothing_to_finalize(
    endpoint: HttpEndpoint, upstream: ChatUpstream
) -> None:
    """The pipeline stops reading at the batch with the end marker, its reading suspended;
    leaving the stream closes it, so the event loop has no generator to finalize."""
    finalized: list[object] = []
    firstiter, finalizer = sys.get_asyncgen_hooks()
    assert finalizer is not None  # the running loop's

    def noting(agen: AsyncGenerator[Any, None]) -> None:
        finalized.append(agen)
        finalizer(agen)

    sys.set_asyncgen_hooks(firstiter, noting)
    try:
        upstream.enqueue(Text("hello there"))
        async with endpoint.stream(STREAMED, parse_json_object) as batches:
            async for _ in batches:
                if batches.ended_cleanly:
                    break
        del batches
        gc.collect()
        await asyncio.sleep(0)
    finally:
        sys.set_asyncgen_hooks(firstiter, finalizer)
    assert finalized == []


async def test_a_stream_that_stops_without_an_end_marker(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(Raw([*sse({"n": 1}), b"data: {\"n\": 2}"]))  # the last event lacks its blank line
    batches, clean = await read_all(endpoint)
    assert batches == [[{"n": 1}]] and not clean  # an unfinished event is no event (the SSE rules)


async def test_an_error_status_before_streaming_is_raised_on_opening(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(HttpError(400, {"error": {"message": "bad"}}))
    with pytest.raises(UpstreamError, match=r"^bad$"):
        async with endpoint.stream(STREAMED, parse_json_object):
            pytest.fail("the stream must not open")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "The upstream sent unparseable stream data: '{not json'."),
        (b"[1, 2]", "The upstream sent stream data that is not an object: '[1, 2]'."),
        (b"x" * 300, f"The upstream sent unparseable stream data: {'x' * 200!r}."),
    ],
)
async def test_data_that_is_not_an_object(endpoint: HttpEndpoint, upstream: ChatUpstream, data: bytes, message: str) -> None:
    upstream.enqueue(Raw(sse(data)))
    error = await stream_failure(endpoint)
    assert type(error) is UpstreamProtocolError and error.message == message


async def test_a_cut_stream(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(Cut(2, Text("a longer answer that is cut")))
    error = await stream_failure(endpoint)
    assert error.message == "The upstream closed the connection before the stream was complete."
    assert (error.status, error.code) == (502, None)


async def test_a_stalled_stream(upstream: ChatUpstream) -> None:
    upstream.enqueue(Stall(1, seconds=10))
    endpoint = HttpEndpoint(upstream.base_url, "/chat/completions", timeout=0.3)
    try:
        error = await stream_failure(endpoint)
    finally:
        await endpoint.aclose()
    assert (error.message, error.code) == ("The upstream stream stalled for more than 0.3 s.", "upstream_timeout")


def counting_looks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The stall watch's looks set from now on in the running loop, counted in the one item."""
    loop = asyncio.get_running_loop()
    looks = [0]
    call_at = loop.call_at

    def counting(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        looks[0] += getattr(callback, "__name__", "") == "_look"
        return call_at(when, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counting)
    return looks


@pytest.mark.parametrize("busy", [0.0, 1.2], ids=["waiting at once", "busy past the first look"])
async def test_a_stall_ends_the_read_one_timeout_after_the_wait_began(
    upstream: ChatUpstream, busy: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream's own watch (``StallWatch``), not aiohttp's timer, ends the wait, at the
    timeout. Busy for a while after the first batch (its client slow), the reader is found
    busy by the watch's first look, one timeout after the stream began; the next look finds
    it waiting, not long enough; the one after that ends the wait. A handful of looks in
    all: a look set in the past would run again at once, the loop spinning while it waits."""
    upstream.enqueue(Stall(1, seconds=30))
    endpoint = HttpEndpoint(upstream.base_url, "/chat/completions", timeout=1.0)
    loop = asyncio.get_running_loop()
    looks_set = counting_looks(monkeypatch)
    try:
        async with endpoint.stream(STREAMED, parse_json_object) as batches:
            reading = aiter(batches)
            await anext(reading)
            await asyncio.sleep(busy)
            waiting_since = loop.time()
            with pytest.raises(UpstreamError, match="stalled for more than 1 s") as raised:
                await anext(reading)
            waited = loop.time() - waiting_since
    finally:
        await endpoint.aclose()
    assert isinstance(raised.value.__cause__, StreamStalled)
    # at the timeout: not one timeout after the look that found the reader busy (1.8 s)
    assert 0.95 <= waited < 1.6, waited
    assert looks_set[0] <= 3, looks_set


async def test_a_reader_slower_than_the_timeout_is_no_stall(upstream: ChatUpstream) -> None:
    """Only the gateway's waiting counts: while it is busy with what it read (its client slow
    to take the answer), the upstream's silence is no stall, even past the timeout. aiohttp's
    read timer, which counts from the last bytes received, would have ended this stream."""
    upstream.enqueue(Stall(1, seconds=2.3, reply=Text("an answer that pauses")))
    endpoint = HttpEndpoint(upstream.base_url, "/chat/completions", timeout=1.0)
    texts: list[str] = []
    try:
        async with endpoint.stream(STREAMED, parse_json_object) as batches:
            async for batch in batches:
                if not texts:
                    await asyncio.sleep(2.0)  # busy, for twice the timeout, after the first batch
                texts += [chunk["choices"][0]["delta"].get("content") or "" for chunk in batch if chunk["choices"]]
    finally:
        await endpoint.aclose()
    assert "".join(texts) == "an answer that pauses" and batches.ended_cleanly


async def limited(upstream: ChatUpstream, limits: UpstreamLimits) -> UpstreamError:
    endpoint = HttpEndpoint(upstream.base_url, "/chat/completions", limits=limits)
    try:
        return await stream_failure(endpoint)
    finally:
        await endpoint.aclose()


async def test_a_line_event_or_stream_over_its_limit(upstream: ChatUpstream) -> None:
    tripped: list[str] = []
    upstream.enqueue(Raw([b"data: " + b"x" * 3000]))
    error = await limited(upstream, UpstreamLimits(max_line_bytes=2048, tripped=tripped.append))
    assert type(error) is UpstreamLimitError and error.limit == "upstream_max_line_bytes"
    assert error.message == (
        "The upstream sent an SSE line longer than the gateway's limit of 2 KiB (upstream_max_line_bytes); "
        "the stream was cut."
    )
    upstream.enqueue(Raw([b"data: x\n" * 1000]))
    error = await limited(upstream, UpstreamLimits(max_event_bytes=1500, tripped=tripped.append))
    assert error.message == (
        "The upstream sent an SSE event longer than the gateway's limit of 1500 bytes (upstream_max_event_bytes); "
        "the stream was cut."
    )
    upstream.enqueue(Raw(sse(*[{"n": n} for n in range(400)])))
    error = await limited(upstream, UpstreamLimits(max_stream_bytes=3 * 2**20 // 1024, tripped=tripped.append))
    assert error.message == (
        "The upstream's stream is longer than the gateway's limit of 3 KiB (upstream_max_stream_bytes); it was cut."
    )
    assert tripped == ["upstream_max_line_bytes", "upstream_max_event_bytes", "upstream_max_stream_bytes"]


async def test_a_stream_exactly_at_its_limit_is_read(upstream: ChatUpstream) -> None:
    frames = sse({"n": 1}, {"n": 2})
    upstream.enqueue(Raw([b"".join(frames)]))
    endpoint = HttpEndpoint(upstream.base_url, "/chat/completions", limits=UpstreamLimits(max_stream_bytes=len(b"".join(frames))))
    try:
        batches, _ = await read_all(endpoint)
    finally:
        await endpoint.aclose()
    assert batches == [[{"n": 1}, {"n": 2}]]


async def test_stream_bytes_gives_the_bytes_as_they_come(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(Raw([b"event: a\n", b"data: 1\n\n"]))
    async with endpoint.stream_bytes(STREAMED) as chunks:
        received = b"".join([chunk async for chunk in chunks])
    assert received == b"event: a\ndata: 1\n\n"
    upstream.enqueue(Cut(1))
    with pytest.raises(UpstreamError, match="closed the connection before the stream was complete"):
        async with endpoint.stream_bytes(STREAMED) as chunks:
            async for _ in chunks:
                pass


@pytest.mark.parametrize("over", [0, 1], ids=["at the bound", "a byte over it"])
async def test_stream_bytes_gives_as_many_as_the_stream_bound(upstream: ChatUpstream, over: int) -> None:
    """A client decoding the bytes itself (the agent's) may keep what it decodes: the bytes
    are bounded as a stream's, counted across reads, and past the bound the read fails."""
    frames = sse(*[{"n": n} for n in range(50)])
    upstream.enqueue(Raw(frames))
    bound = len(b"".join(frames)) - over
    tripped: list[str] = []
    limits = UpstreamLimits(max_stream_bytes=bound, tripped=tripped.append)
    endpoint = HttpEndpoint(upstream.base_url, "/chat/completions", limits=limits)
    received: list[bytes] = []
    try:
        async with endpoint.stream_bytes(STREAMED) as chunks:
            async for chunk in chunks:
                received.append(chunk)
    except UpstreamLimitError as exc:
        assert over and exc.limit == "upstream_max_stream_bytes" and tripped == [exc.limit]
        assert sum(map(len, received)) <= bound
    else:
        assert not over and b"".join(received) == b"".join(frames)
    finally:
        await endpoint.aclose()


async def test_leaving_a_stream_early_closes_its_connection(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(Stall(1, seconds=30))
    async with endpoint.stream(STREAMED, parse_json_object) as batches:
        async for _ in batches:
            break
    assert not batches.ended_cleanly
    await asyncio.to_thread(upstream.wait_for_disconnect, 10)


async def test_a_stream_is_opened_once(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    """Its body is let go once the answer has begun: opening it again would send nothing."""
    upstream.enqueue(Text("once"))
    stream = endpoint.stream(STREAMED, parse_json_object)
    async with stream as batches:
        assert [batch async for batch in batches]
    with pytest.raises(RuntimeError, match=r"^an upstream stream is opened once$"):
        await stream.__aenter__()
    assert len(upstream.requests) == 1


async def test_the_connections_to_an_upstream_are_bounded(upstream: ChatUpstream) -> None:
    """``max_connections``: a request past the bound waits for a connection to come free
    instead of opening one more."""
    release = threading.Event()
    upstream.enqueue(Stall(after_chunks=1, seconds=30.0, release=release), Text("second"))
    one = HttpEndpoint(upstream.base_url, "/chat/completions", max_connections=1, timeout=30)
    try:
        async with one.stream(STREAMED, parse_json_object) as first:
            await anext(aiter(first))  # the first answer has begun: its connection is busy
            second = asyncio.create_task(read_all(one))
            await asyncio.sleep(0.5)
            assert len(upstream.chat_requests) == 1 and not second.done()
            release.set()
            assert [batch async for batch in first]
        batches, clean = await asyncio.wait_for(second, 30)
    finally:
        release.set()
        await one.aclose()
    assert clean and batches and len(upstream.chat_requests) == 2


async def test_with_no_bound_of_its_own_an_endpoint_streams_as_many_answers_as_the_gateway_allows(
    upstream: ChatUpstream,
) -> None:
    """The gateway's default cap on exchanges in progress, every one streaming from the same
    upstream at once: none waits for a pooled connection (the pool was 1,000, fewer than
    the cap's 1,024, and aiohttp's own is 100)."""
    streams = DEFAULT_MAX_STREAMS
    assert raise_open_files_limit() > 2 * streams + RESERVED_FILES, "this test opens both ends of each stream"
    upstream.enqueue(*[Stall(after_chunks=1, seconds=120.0)] * streams)
    endpoint = HttpEndpoint(upstream.base_url, "/chat/completions", timeout=120)
    begun = 0
    all_begun, leave = asyncio.Event(), asyncio.Event()

    async def stream_until_left() -> None:
        nonlocal begun
        async with endpoint.stream(STREAMED, parse_json_object) as batches:
            await anext(aiter(batches))
            begun += 1
            if begun == streams:
                all_begun.set()
            await leave.wait()

    readers = asyncio.gather(*(stream_until_left() for _ in range(streams)))
    try:
        await asyncio.wait_for(all_begun.wait(), 90)
    finally:
        leave.set()
        await readers
        await endpoint.aclose()
    assert begun == streams and len(upstream.chat_requests) == streams


@pytest.mark.parametrize("pieces", ["blank, then the object in pieces", "blank and object in one piece"])
async def test_a_streamed_request_answered_whole_comes_as_one_whole_answer(
    endpoint: HttpEndpoint, upstream: ChatUpstream, pieces: str
) -> None:
    """A server that ignores ``stream`` answers with one JSON object (in pieces, after
    blank lines): one batch holding it whole, and the stream ended cleanly."""
    whole = {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": {"content": "hi"}}]}
    raw = orjson.dumps(whole)
    written = [b"\r\n", raw[:5], raw[5:]] if pieces.startswith("blank, then") else [b"\r\n \n" + raw]
    upstream.enqueue(Raw(written, content_type="application/json"))
    async with endpoint.stream(STREAMED, parse_json_object) as batches:
        read = [batch async for batch in batches]
    assert len(read) == 1 and len(read[0]) == 1
    [answer] = read[0]
    assert isinstance(answer, WholeAnswer) and answer.answer == whole and batches.ended_cleanly


async def test_an_event_stream_after_blank_lines_or_a_comment_is_read_as_a_stream(endpoint: HttpEndpoint, upstream: ChatUpstream) -> None:
    upstream.enqueue(Raw([b"\n", b": keep-alive\n\n", *sse({"n": 1}), b"data: [DONE]\n\n"]))
    batches, clean = await read_all(endpoint)
    assert [item for batch in batches for item in batch] == [{"n": 1}] and clean


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"choices": [', "The upstream answered a streamed request with a body that is neither an event stream nor JSON."),
        (b"{} {}", "The upstream answered a streamed request with a body that is neither an event stream nor JSON."),
    ],
)
async def test_a_streamed_request_answered_with_json_that_cannot_be_read(
    endpoint: HttpEndpoint, upstream: ChatUpstream, body: bytes, message: str
) -> None:
    upstream.enqueue(Raw([body], content_type="application/json"))
    error = await stream_failure(endpoint)
    assert type(error) is UpstreamProtocolError and error.message == message


async def test_a_whole_answer_to_a_streamed_request_is_bounded_by_the_body_limit(upstream: ChatUpstream) -> None:
    endpoint = HttpEndpoint(upstream.base_url, "/chat/completions", limits=UpstreamLimits(max_body_bytes=1024), timeout=5)
    try:
        upstream.enqueue(Raw([b'{"pad": "', b"x" * 600, b"x" * 600, b'"}'], content_type="application/json"))
        error = await stream_failure(endpoint)
    finally:
        await endpoint.aclose()
    assert type(error) is UpstreamLimitError and error.limit == "upstream_max_body_bytes"


def watched(quiet_every: float) -> tuple[aiohttp.StreamReader, StallWatch]:
    """An aiohttp body reader, and a watch of it set as a reader waiting between two events
    of an event stream sets it (since a second ago)."""
    loop = asyncio.get_running_loop()
    content = aiohttp.StreamReader(BaseProtocol(loop), 2**16, loop=loop)
    watch = StallWatch(content, 60.0, 60.0, quiet_every)
    decoder = SSEDecoder()
    decoder.feed_data(b'data: {"n": 1}\n\n')
    watch.decoder, watch.began = decoder, True
    watch.waiting_since, watch.read_to = loop.time() - 1.0, content.total_bytes
    return content, watch


async def test_the_watch_wakes_a_waiting_reader_with_its_own_comment() -> None:
    content, watch = watched(0.05)
    try:
        await asyncio.sleep(0.15)
        assert content.read_nowait() == QUIET
    finally:
        watch.stop()


async def test_the_watch_does_not_wake_a_reader_that_has_bytes_to_read() -> None:
    """Bytes fed while the reader waits wake it themselves; a comment beside them would be
    read with them, and the silence it stands for would seem to have begun before them."""
    content, watch = watched(0.05)
    try:
        content.feed_data(b'data: {"n": 2}\n\n')  # come, not read yet
        await asyncio.sleep(0.15)
        assert content.read_nowait() == b'data: {"n": 2}\n\n'
    finally:
        watch.stop()


async def test_the_watch_does_not_wake_a_reader_inside_an_event() -> None:
    content, watch = watched(0.05)
    assert watch.decoder is not None
    watch.decoder.feed_data(b'data: {"n": ')
    try:
        await asyncio.sleep(0.15)
        assert content.read_nowait() == b""
    finally:
        watch.stop()


async def test_the_watch_inside_an_event_looks_once_per_wake_not_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unable to wake the reader (it waits inside an event), the watch looks again one wake
    later, not at once: a look set in the past would spin the loop while the event lasts."""
    looks = counting_looks(monkeypatch)
    content, watch = watched(0.05)
    assert watch.decoder is not None
    watch.decoder.feed_data(b'data: {"n": ')
    try:
        await asyncio.sleep(0.5)
    finally:
        watch.stop()
    assert content.read_nowait() == b"" and 5 <= looks[0] <= 15, looks


async def test_the_watch_does_not_wake_before_the_first_bytes_of_what_is_not_an_event_stream() -> None:
    content, watch = watched(0.05)
    watch.began = False  # and nobody said the answer is an event stream
    try:
        await asyncio.sleep(0.15)
        assert content.read_nowait() == b""
        watch.event_stream = lambda: True
        await asyncio.sleep(0.15)
        assert content.read_nowait() == QUIET
    finally:
        watch.stop()
