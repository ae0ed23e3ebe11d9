"""``SSEBatches``: a streamed answer's body read as SSE, bounded in size and in time.

The body is read as it comes, one batch of parsed ``data`` payloads per network read,
up to ``[DONE]`` or the wire's terminal object; a Chat stream's plain text chunks are read
from their bytes (``PlainContentFrames``). ``UpstreamLimits`` bounds a line, an event and
the whole stream; ``StallWatch`` bounds each wait for bytes (the read timeout) and the
time without an event (a server that only sends keep-alives), with one timer per stream,
and wakes a silent stream's reader (``QUIET``) so the client can be told it is alive. A
body that is not an event stream is told apart at its first bytes: a whole JSON answer
(some servers ignore ``stream``) is read whole, a web page is refused. Failures while
reading become ``UpstreamError`` (``stream_error``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import aiohttp
import orjson

from toolwire.errors import UpstreamError, UpstreamProtocolError
from toolwire.protocol import (
    PlainChunks,
    PlainContentFrames,
    SSEDecoder,
    SSELimitExceeded,
    StreamItem,
    WholeAnswer,
)

from ._buffered import take_buffered
from ._connector import BODY_READ_ERRORS
from ._failures import body_fault, describe, not_the_api, unreadable_body, web_page
from ._limits import UpstreamLimits

JSON = dict[str, Any]
_EVENT_END = b"\n\n"

DEFAULT_UPSTREAM_EVENT_TIMEOUT = 1800.0
"""How long a streamed answer may send keep-alives and no event: a slow machine's model server
can take many minutes to read Codex's prompt (tens of thousands of tokens), pinging."""
ParseData = Callable[[str], JSON | None]
"""One event's ``data``, parsed; None for a keep-alive of the wire's own, which says nothing
of the answer (Anthropic's ``ping``: it is not handed on, and does not count as an event)."""
QUIET = b": the upstream says nothing yet\n\n"
"""The comment ``StallWatch`` wakes a silent stream's reader with (it reads as an empty batch)."""
QUIET_EVERY = 15.0
"""Seconds of an upstream's silence after which its stream's reader hears that nothing came."""


def parse_json_object(data: str) -> JSON:
    """One SSE ``data`` payload that must be a JSON object (a Chat Completions chunk)."""
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise UpstreamProtocolError(f"The upstream sent unparseable stream data: {data[:200]!r}.") from None
    if not isinstance(chunk, dict):
        raise UpstreamProtocolError(f"The upstream sent stream data that is not an object: {data[:200]!r}.")
    return chunk


class SSEBatches:
    """A streamed SSE body: parsed ``data`` payloads, one list per network read.

    Reading stops at ``[DONE]`` or after an object ``is_terminal`` accepts; either sets
    ``ended_cleanly``, at once, with the batch that held it. What follows is drained by
    ``HttpEndpoint.stream`` when the stream is closed, so the connection returns to the
    pool. A line, an event or a whole stream longer than ``limits`` allow raises
    ``UpstreamLimitError`` and drops what was held of it; a wait for the next bytes longer
    than ``read_timeout`` (``StallWatch``) raises an ``UpstreamError`` that says it stalled.

    With ``frames`` (a Chat stream's ``PlainContentFrames``), each parsed object teaches
    it the stream's shape of plain chunks, and whole frames of that shape, read while the
    decoder is between events, come as ``PlainChunks`` (one for those that follow each
    other in a read) instead of being decoded and parsed.
    """

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        read_timeout: float,
        parse: ParseData,
        is_terminal: Callable[[JSON], bool] | None = None,
        limits: UpstreamLimits | None = None,
        frames: PlainContentFrames | None = None,
        *,
        where: str,
        event_timeout: float = DEFAULT_UPSTREAM_EVENT_TIMEOUT,
    ) -> None:
        self._response = response
        self._where = where  # for messages: the upstream's address, without credentials
        self._limits = limits or UpstreamLimits()
        self._read_timeout = read_timeout
        self._event_timeout = event_timeout
        self._parse = parse
        self._is_terminal = is_terminal
        self._frames = frames
        # A frame longer than a line or an event may be is left to the decoder, which says so.
        self._longest_frame = min(self._limits.max_line_bytes, self._limits.max_event_bytes)
        self.ended_cleanly = False
        self._reading: AsyncGenerator[list[StreamItem], None] | None = None

    def __aiter__(self) -> AsyncIterator[list[StreamItem]]:
        reading = self._reading
        if reading is None:
            reading = self._reading = self._batches()
        return reading

    async def aclose(self) -> None:
        """Let go of the reading. A reader that stops at the end marker leaves it suspended
        after its last batch; closed here, it is not left for the event loop to finalize
        (a task of its own, woken through the loop's self-pipe, per stream)."""
        if self._reading is not None:
            await self._reading.aclose()

    async def _batches(self) -> AsyncGenerator[list[StreamItem], None]:
        limits, frames = self._limits, self._frames
        decoder = SSEDecoder(max_line_bytes=limits.max_line_bytes, max_event_bytes=limits.max_event_bytes)
        too_long: SSELimitExceeded | None = None
        left = limits.max_stream_bytes
        content = self._response.content
        stall = StallWatch(content, self._read_timeout, self._event_timeout, QUIET_EVERY)
        stall.decoder = decoder
        stall.event_stream = self._says_event_stream
        clock = stall.clock
        opening = True  # until the body's first bytes that are not blank
        try:
            while True:
                stall.waiting_since = clock()
                stall.read_to = content.total_bytes  # (a wait begins only once all that came is read)
                data = take_buffered(content) or await content.readany()  # (the former: the same, at once)
                stall.waiting_since = None
                if not data:
                    break
                left -= len(data)
                if left < 0:
                    raise limits.stream_too_long_error()
                if opening:
                    if data.startswith(QUIET):  # the watch's own: the upstream had said nothing yet
                        data = data[len(QUIET) :]  # (what came right after it, read with it, is sniffed)
                        if not data:
                            yield []
                            continue
                    begun = data.lstrip()  # (data itself, uncopied, when it begins with no blank)
                    opening = not begun
                    stall.began = not opening
                    if begun.startswith(b"{"):  # no event stream begins so: it answered whole
                        stall.decoder = None
                        whole = await self._whole_answer(data, stall)
                        self.ended_cleanly = True
                        yield [whole]
                        return
                    page = web_page(begun, self._response.content_type) if begun else None
                    if page is not None:  # nor so (or it says it is one): a web page
                        raise UpstreamProtocolError(not_the_api(self._where, f"answered a streamed request with {page}"))
                if frames is not None:
                    batch = self._read_frames(data, decoder, frames)
                else:
                    batch = self._parse_all(decoder.feed_data(data))
                if batch:
                    yield batch
                    stall.heard = clock()  # after the batch is taken: a slow client's time is not the upstream's
                elif not opening and decoder.idle and not self.ended_cleanly:
                    # None: only keep-alives (comments, blank lines); the reader may say the upstream is alive.
                    # (Not blank bytes before the first others: a whole JSON answer may follow them.)
                    yield batch
                if self.ended_cleanly:
                    return
            batch = self._parse_all(decoder.flush_data())
            if batch:
                yield batch
        except BODY_READ_ERRORS as exc:
            raise stream_error(exc, self._read_timeout) from exc
        except SSELimitExceeded as exceeded:
            too_long = exceeded
        finally:
            stall.stop()
        if too_long is not None:
            # Raised out here, with no traceback into the decoder: what it held of the
            # line or event is freed now, not when the error is.
            del decoder
            too_long.__traceback__ = None
            raise limits.stream_error(too_long)

    def _says_event_stream(self) -> bool:
        return self._response.content_type == "text/event-stream"

    async def _whole_answer(self, first: bytes, stall: StallWatch) -> WholeAnswer:
        """The rest of a body that began as JSON, read to its end (each wait bounded as a
        stream's, the whole by ``max_body_bytes``, and in time as one event that must end
        within the event timeout): a server or proxy that ignored ``stream`` and answered
        whole."""
        limits, content, clock = self._limits, self._response.content, stall.clock
        pieces, size = [first], len(first)
        while size <= limits.max_body_bytes:
            stall.waiting_since = clock()
            data = take_buffered(content) or await content.readany()
            stall.waiting_since = None
            if not data:
                break
            pieces.append(data)
            size += len(data)
        if size > limits.max_body_bytes:
            raise limits.body_error()
        try:
            answer: JSON = orjson.loads(b"".join(pieces))  # an object: it begins with {
        except orjson.JSONDecodeError:
            raise UpstreamProtocolError(
                "The upstream answered a streamed request with a body that is neither an event stream nor JSON."
            ) from None
        return WholeAnswer(answer)

    def _read_frames(self, data: bytes, decoder: SSEDecoder, frames: PlainContentFrames) -> list[StreamItem]:
        """One read, frame by frame: the frames of the learned shape that follow each other,
        met while the decoder is between events, as one ``PlainChunks``; every other event
        through the decoder, up to and with its blank line (after which the decoder is
        between events again); what is left after the last blank line too."""
        batch: list[StreamItem] = []
        longest, start, size = self._longest_frame, 0, len(data)
        while start < size and not self.ended_cleanly:
            text, end = frames.read_run(data, start, longest) if decoder.idle else ("", start)
            if text:
                batch.append(PlainChunks(text, data[start:end]))
            else:
                end = data.find(_EVENT_END, start) + 2
                if end < 2:
                    batch += self._parse_all(decoder.feed_data(data[start:]))
                    break
                batch += self._parse_all(decoder.feed_data(data[start:end]))
            start = end
        return batch

    def _parse_all(self, payloads: list[str]) -> list[StreamItem]:
        """The objects the ``data`` of these events hold, up to the stream's end marker."""
        batch: list[StreamItem] = []
        if self.ended_cleanly:
            return batch
        parse, is_terminal, frames = self._parse, self._is_terminal, self._frames
        for data in payloads:
            if data == "[DONE]":
                self.ended_cleanly = True
                break
            parsed = parse(data)
            if parsed is None:
                continue  # a keep-alive of the wire's own (Anthropic's ping)
            batch.append(parsed)
            if frames is not None:
                frames.learn(data, parsed)
            if is_terminal is not None and is_terminal(parsed):
                self.ended_cleanly = True
                break
        return batch


def stream_error(exc: Exception, timeout: float) -> UpstreamError:
    """What a failure while reading a streamed body means: a stall, a cut, a body that is
    not HTTP, or a broken stream."""
    if isinstance(exc, StreamStalled) and exc.kept_alive:
        return UpstreamError(
            f"The upstream stream brought no event for more than {exc.seconds:g} s"
            " (only keep-alive comments, or an event that never ended).",
            code="upstream_timeout",
        )
    if isinstance(exc, StreamStalled):
        return UpstreamError(f"The upstream stream stalled for more than {exc.seconds:g} s.", code="upstream_timeout")
    if isinstance(exc, TimeoutError):
        return UpstreamError(f"The upstream stream stalled for more than {timeout:g} s.", code="upstream_timeout")
    if (fault := body_fault(exc)) is not None:
        return unreadable_body(fault)
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return UpstreamError("The upstream closed the connection before the stream was complete.")
    return UpstreamError(f"The upstream stream broke: {describe(exc)}.")


class StreamStalled(TimeoutError):
    """No byte of a streamed body came for ``seconds`` while the gateway waited for one;
    or, ``kept_alive``, nothing but comments and blank lines (an SSE server's keep-alives)."""

    def __init__(self, seconds: float, *, kept_alive: bool = False) -> None:
        super().__init__()
        self.seconds = seconds
        self.kept_alive = kept_alive


class StallWatch:
    """The read timeout of a streamed body, kept by one timer per stream instead of one per read.

    aiohttp bounds the time between two reads from a socket (``sock_read``) by cancelling
    and scheduling a timer at every read: about 2 µs, which a stream read event by event
    (as a model writes its tokens) pays for each of its events. Here the reader says
    when it starts waiting for bytes (``waiting_since``, from ``clock``) and when it has
    them (None), and one timer looks at that once per timeout, rescheduled to the moment
    the current wait would exceed it: a wait that reaches the timeout ends the read
    with ``StreamStalled`` (through ``StreamReader.set_exception``, as aiohttp's own
    timer does). Only the gateway's waiting counts: while the client is slow to take
    the answer, the reader is not waiting and nothing can stall.

    Bytes alone are not an answer: a server that sends only keep-alive comments (``:
    ping``) would hold the stream open for ever. So the reader also says when it last
    heard something of the answer (``heard``: an event; a whole answer is one, heard
    once it has all come, or a server writing it a byte at a time would hold the stream
    too), and a wait that finds nothing heard for ``event_timeout`` ends the read too,
    told as kept alive only. That bound is the longer one: a model server says it is
    alive while it reads a long prompt (llama.cpp pings every 30 s), which can take
    minutes.

    And silence is no answer either, yet the stream's reader may have a client to keep
    waiting (Codex gives up on a stream without events after 300 s): a wait of
    ``quiet_every`` seconds is woken with a keep-alive comment of the watch's own
    (``QUIET``, fed to aiohttp's reader as the upstream's bytes are), which reads as an
    empty batch. Only where a comment cannot change what the stream says: between two
    events (``decoder`` idle), or before any byte of an answer said to be an event stream
    (``event_stream``); never in a whole answer (``decoder`` None); never while bytes the
    reader has not read yet wait for it (``read_to``, what aiohttp's reader had been fed,
    ``total_bytes``, when the wait began). The silence it breaks still counts from its
    start: the watch notes how many bytes the reader had been fed with its comment, and as
    long as no other byte came, the wait began before it.
    """

    __slots__ = (
        "_content", "_event_timeout", "_handle", "_loop", "_quiet_every", "_quiet_total", "_silent_from",
        "_timeout", "began", "clock", "decoder", "event_stream", "heard", "read_to", "waiting_since",
    )  # fmt: skip

    def __init__(
        self, content: aiohttp.StreamReader, timeout: float, event_timeout: float, quiet_every: float | None = None
    ) -> None:
        self._content = content
        self._timeout = timeout
        self._event_timeout = event_timeout
        self._quiet_every = quiet_every
        self._loop = asyncio.get_running_loop()
        self.clock = self._loop.time
        self.waiting_since: float | None = None
        self.read_to = 0
        self.heard = self.clock()
        self.decoder: SSEDecoder | None = None
        """The stream's decoder while a comment of the watch's own may be fed between its events."""
        self.began = False
        """Whether the body's first bytes that are not blank have come."""
        self.event_stream: Callable[[], bool] = _no
        """Whether the answer says it is an event stream (asked only before its first bytes)."""
        self._silent_from: float | None = None  # when the silence the watch's comments broke began
        self._quiet_total = -1
        self._handle: asyncio.TimerHandle | None = self._loop.call_later(self._longest_look(), self._look)

    def _longest_look(self) -> float:
        quiet = self._quiet_every
        bound = min(self._timeout, self._event_timeout)
        return bound if quiet is None else min(bound, quiet)

    def _look(self) -> None:
        waiting_since, now = self.waiting_since, self._loop.time()
        if waiting_since is None:  # not waiting: no wait can reach a bound before one look from now
            self._handle = self._loop.call_at(now + self._longest_look(), self._look)
            return
        since, content = waiting_since, self._content
        if self._silent_from is not None:
            if content.total_bytes == self._quiet_total:
                since = self._silent_from  # nothing came but the watch's own comments
            else:
                self._silent_from = None
        silent, unheard = since + self._timeout, self.heard + self._event_timeout
        if now >= silent or now >= unheard:
            self._handle = None
            stalled = StreamStalled(self._timeout) if now >= silent else StreamStalled(self._event_timeout, kept_alive=True)
            content.set_exception(stalled)
            return
        # Waiting, not for long enough: look again when this wait would reach a bound.
        look_at = min(silent, unheard)
        quiet = self._quiet_every
        if quiet is not None:
            wake_at = waiting_since + quiet
            if wake_at <= now:
                if self._may_wake():
                    self._silent_from = since
                    if not content.total_bytes:
                        # As aiohttp's parser does before a chunked body's first chunk, which
                        # it refuses to begin once any byte was fed without it.
                        content.begin_http_chunk_receiving()
                    content.feed_data(QUIET)
                    self._quiet_total = content.total_bytes
                wake_at = now + quiet
            look_at = min(look_at, wake_at)
        self._handle = self._loop.call_at(look_at, self._look)

    def _may_wake(self) -> bool:
        decoder, content = self.decoder, self._content
        if decoder is None or content.is_eof() or content.total_bytes != self.read_to:
            return False
        return decoder.idle if self.began else self.event_stream()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


def _no() -> bool:
    return False
