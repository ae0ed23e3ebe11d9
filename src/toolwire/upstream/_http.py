"""HTTP to a backend: one pooled connection set per endpoint, retries, SSE reading, errors.

``HttpEndpoint`` is what every HTTP backend shares: keep-alive connections (aiohttp's,
made by ``_connector.UpstreamConnector``) and no other state between requests (no
cookies), the upstream key in the header its
wire expects (``Authorization: Bearer``, or ``x-api-key`` for Anthropic's Messages API)
beside the wire's own headers, a forward proxy when one is given (``_proxy.proxy_for``), a failed
connect or a 5xx retried with bounded backoff before anything streamed, and the
upstream's own error status and message kept. ``SSEBatches`` reads a streamed body.
Every read is bounded by ``UpstreamLimits`` (``_limits``): a line, an event or a body
past its limit ends the exchange with ``UpstreamLimitError`` and closes the connection.
And in time, by the read timeout: aiohttp's ``sock_read``, but for a streamed body, whose
waits ``StallWatch`` bounds with one timer per stream.
Foreign exceptions (aiohttp, asyncio timeouts) become ``UpstreamError`` here and
nowhere else, keeping the cause; no key ever appears in a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import aiohttp
import orjson
from aiohttp.http_exceptions import ContentEncodingError, HttpProcessingError

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
from ._connector import BODY_READ_ERRORS, MalformedBody, UpstreamConnector, parser_said
from ._limits import ERROR_BODY_BYTES, UpstreamLimits, read_at_most, read_prefix
from ._proxy import Proxy, aiohttp_arguments, proxy_for

if TYPE_CHECKING:
    from toolwire.config import UpstreamConfig

    from ._base import NativeCompaction
    from ._kind import BackendSetup

JSON = dict[str, Any]
_EVENT_END = b"\n\n"
KeyHeader = Literal["bearer", "x-api-key"]
"""Where the upstream key goes: ``Authorization: Bearer KEY`` or ``x-api-key: KEY``."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of a failed connect or a 5xx answer, before anything was streamed."""

    attempts: int = 3
    backoff_seconds: float = 0.25
    max_backoff_seconds: float = 2.0

    def delay(self, attempt: int) -> float:
        return float(min(self.backoff_seconds * 2.0**attempt, self.max_backoff_seconds))


DEFAULT_UPSTREAM_TIMEOUT = 300.0
"""How long an upstream may send nothing at all: before its first byte, and between reads."""
DEFAULT_UPSTREAM_CONNECT_TIMEOUT = 10.0
"""How long a connection to an upstream may take to open."""
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

class HttpEndpoint:
    """``POST {base_url}{path}`` over pooled keep-alive connections."""

    def __init__(
        self,
        base_url: str,
        path: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_UPSTREAM_TIMEOUT,
        event_timeout: float = DEFAULT_UPSTREAM_EVENT_TIMEOUT,
        connect_timeout: float = DEFAULT_UPSTREAM_CONNECT_TIMEOUT,
        check_timeout: float = 5.0,
        retry: RetryPolicy | None = None,
        max_connections: int = 1000,
        proxy: Proxy | None = None,
        key_header: KeyHeader = "bearer",
        headers: Mapping[str, str] | None = None,
        check_path: str = "/models",
        limits: UpstreamLimits | None = None,
        min_transfer_rate: float = 1024 * 1024,
    ) -> None:
        """``headers`` are the wire's own (``anthropic-version``); ``check_path`` is what
        ``check`` GETs under ``base_url``. A request, from its connect to its answer's
        head, is given ``connect_timeout`` and ``timeout`` and its body's time to send at
        ``min_transfer_rate`` bytes per second; a whole answer's body (or the part of an error
        answer read), ``timeout`` and its time to come at that rate. A streamed answer may
        go ``timeout`` without a byte, and ``event_timeout`` without an event while it
        sends keep-alives."""
        self.base_url = base_url.rstrip("/")
        self.display_url = without_credentials(self.base_url)
        self.where = self.display_url + (f" (through the proxy {proxy.url})" if proxy else "")
        """Where requests go, for messages: the address without credentials, and the proxy, if any."""
        if api_key and self.display_url != self.base_url:
            raise ValueError(
                f"the upstream URL {self.display_url} carries credentials and an API key is set too: use one"
            )
        self.read_timeout = timeout
        self.event_timeout = event_timeout
        self._connect_timeout = connect_timeout
        self._min_transfer_rate = min_transfer_rate
        self._url = self.base_url + path
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
        self._headers.update(headers or {})
        if api_key and key_header == "x-api-key":
            self._headers["x-api-key"] = api_key
        elif api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._check_path = check_path
        self._check_url = self.base_url + check_path
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=timeout)
        self._check_timeout = aiohttp.ClientTimeout(total=check_timeout)
        self._retry = retry or RetryPolicy()
        self.limits = limits or UpstreamLimits()
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        proxy_headers, self._via = aiohttp_arguments(proxy, self.base_url)
        self._headers.update(proxy_headers)

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = UpstreamConnector(limit=self._max_connections, ttl_dns_cache=300)
            # No cookie jar: the session serves every client, so a cookie the upstream set
            # in one client's answer must not go out with the next client's request.
            # No default headers either: aiohttp would add them to a proxy's CONNECT,
            # the upstream key included. They go with each request.
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self._timeout, auto_decompress=True, cookie_jar=aiohttp.DummyCookieJar()
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def post(self, body: bytes) -> aiohttp.ClientResponse:
        """POST, retrying a failed connect or a 5xx; raises ``UpstreamError`` on any error."""
        attempt = 0
        while True:
            # aiohttp bounds the connect and each read, not the sending nor the answer's head
            # as a whole: an upstream that takes none of a body larger than the sockets'
            # buffers would hold it forever, and so would one that writes its head a byte
            # at a time, each byte within the read timeout.
            allowed = self._connect_timeout + self.read_timeout + len(body) / self._min_transfer_rate
            bound = asyncio.timeout(allowed)
            try:
                async with bound:
                    response = await self._client().post(
                        self._url, data=body, headers=self._headers, allow_redirects=False, **self._via
                    )
            except aiohttp.ConnectionTimeoutError as exc:
                error, retryable = connect_error(self.where, exc, f"no connection within {self._connect_timeout:g} s"), True
            except TimeoutError as exc:
                if bound.expired():
                    error, retryable = _unsent_error(self.where, allowed, len(body), exc), False
                else:
                    error, retryable = _first_byte_timeout(self.where, self.read_timeout, exc), False
            except aiohttp.ClientResponseError as exc:  # its head arrived, and cannot be read
                error, retryable = _unreadable_answer(self.where, exc), False
            except (aiohttp.ClientError, OSError) as exc:
                error, retryable = connect_error(self.where, exc), True
            else:
                if response.status < 300:
                    return response
                if response.status < 400:
                    error, retryable = _redirect_error(self.where, response), False
                else:
                    within = self._whole_body_time(ERROR_BODY_BYTES)
                    error, retryable = await _status_error(self.where, response, within), response.status >= 500
            if not retryable or attempt + 1 >= self._retry.attempts:
                raise error
            await asyncio.sleep(self._retry.delay(attempt))
            attempt += 1

    def _whole_body_time(self, size: int) -> float:
        """The time an answer's body of ``size`` bytes is given to come whole once its head
        has: the read timeout (a server may send the head before it has the answer), and
        the time to receive it at the slowest rate allowed. aiohttp bounds each read, not
        the whole: a server writing a byte within each read timeout would hold it forever."""
        return self.read_timeout + size / self._min_transfer_rate

    async def post_for_json(self, body: bytes) -> JSON:
        """A whole (non-streamed) answer, which must be a JSON object; its body read within
        ``_whole_body_time`` of the largest one allowed."""
        response = await self.post(body)
        limit = self.limits.max_body_bytes
        allowed = self._whole_body_time(limit)
        bound = asyncio.timeout(allowed)
        try:
            async with bound:
                raw = await read_at_most(response, limit)
        except BODY_READ_ERRORS as exc:
            if bound.expired():
                raise _slow_body_error(self.where, allowed) from exc
            if (fault := _body_fault(exc)) is not None:
                raise _unreadable_body(fault) from exc
            raise UpstreamError(f"The upstream connection broke: {_describe(exc)}.") from exc
        finally:
            _release_or_close(response)
        if raw is None:
            raise self.limits.body_error()
        try:
            answer = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            page = _web_page(raw, response.content_type)
            if page is not None:
                raise UpstreamProtocolError(_not_the_api(self.where, f"answered with {page}")) from exc
            raise UpstreamProtocolError("The upstream answered with a body that is not JSON.") from exc
        if not isinstance(answer, dict):
            raise UpstreamProtocolError("The upstream answered with JSON that is not an object.")
        return answer

    def stream(
        self,
        body: bytes | Mapping[str, Any],
        parse: ParseData,
        is_terminal: Callable[[JSON], bool] | None = None,
        *,
        plain_chunks: bool = False,
    ) -> OpenStream:
        """POST ``body`` and hold the SSE answer open as ``SSEBatches`` (``async with``);
        ``plain_chunks``: a Chat stream, whose plain chunks are read from their bytes."""
        return OpenStream(self, body, parse, is_terminal, plain_chunks=plain_chunks)

    @contextlib.asynccontextmanager
    async def stream_bytes(self, body: bytes) -> AsyncIterator[AsyncIterator[bytes]]:
        """POST ``body`` and yield the answer's bytes as they come (for a client that decodes
        the stream itself), as many as ``limits.max_stream_bytes``; breaking, stalling or
        leaving is as for ``stream``."""
        response = await self.post(body)
        del body
        try:
            yield _bytes_of(response, self.read_timeout, self.limits)
        finally:
            response.close()

    async def check(self) -> None:
        """Raise ``UpstreamError`` unless ``GET {base_url}{check_path}`` answers within a few
        seconds (any status: the server is there)."""
        try:
            async with self._client().get(
                self._check_url, headers=self._headers, timeout=self._check_timeout, allow_redirects=False, **self._via
            ) as response:
                await read_prefix(response)
        except TimeoutError as exc:  # aiohttp's own timeouts are TimeoutErrors too
            within = f"no answer to GET {self._check_path} within {self._check_timeout.total:g} s"
            raise connect_error(self.where, exc, within) from exc
        except BODY_READ_ERRORS as exc:
            raise connect_error(self.where, exc) from exc


def parse_json_object(data: str) -> JSON:
    """One SSE ``data`` payload that must be a JSON object (a Chat Completions chunk)."""
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise UpstreamProtocolError(f"The upstream sent unparseable stream data: {data[:200]!r}.") from None
    if not isinstance(chunk, dict):
        raise UpstreamProtocolError(f"The upstream sent stream data that is not an object: {data[:200]!r}.")
    return chunk


class OpenStream:
    """``HttpEndpoint.stream``: POSTs on entering, yields the answer's ``SSEBatches``, and
    on leaving drains a cleanly ended answer (so the connection goes back to the pool) or
    closes the connection of an unfinished one (so the upstream sees it).

    The request body, and the bytes it is serialized to, are let go as soon as the
    answer has begun (they are only needed for retries). When the backend serialized the
    body in a generator-based context manager of its own, that frame kept the bytes for
    as long as the stream was open: ~130 kB per open stream with orjson's spare room,
    most of a gateway's memory under many open streams.
    """

    __slots__ = ("_batches", "_body", "_endpoint", "_is_terminal", "_parse", "_plain_chunks", "_response")

    def __init__(
        self,
        endpoint: HttpEndpoint,
        body: bytes | Mapping[str, Any],
        parse: ParseData,
        is_terminal: Callable[[JSON], bool] | None,
        *,
        plain_chunks: bool,
    ) -> None:
        self._endpoint = endpoint
        self._body: bytes | Mapping[str, Any] | None = body  # a mapping is serialized on entering
        self._parse = parse
        self._is_terminal = is_terminal
        self._plain_chunks = plain_chunks
        self._response: aiohttp.ClientResponse | None = None
        self._batches: SSEBatches | None = None

    async def __aenter__(self) -> SSEBatches:
        body, self._body = self._body, None
        if body is None:
            raise RuntimeError("an upstream stream is opened once")
        endpoint = self._endpoint
        raw = body if isinstance(body, bytes) else orjson.dumps(body)
        del body
        self._response = await endpoint.post(raw)
        del raw
        _stop_socket_read_timer(self._response)  # SSEBatches bounds the body's reads itself
        self._batches = SSEBatches(
            self._response,
            endpoint.read_timeout,
            self._parse,
            self._is_terminal,
            endpoint.limits,
            PlainContentFrames() if self._plain_chunks else None,
            where=endpoint.where,
            event_timeout=endpoint.event_timeout,
        )
        return self._batches

    async def __aexit__(self, *exc_info: object) -> None:
        response, batches = self._response, self._batches
        if response is None or batches is None:
            return
        try:
            await batches.aclose()
            if batches.ended_cleanly:
                # Only now, when the caller is done with the stream: the body's last
                # bytes never hold up the answer's end.
                await _drain(response)
        finally:
            response.close()  # an unfinished stream closes the connection: the upstream sees it


class HttpBackend:
    """What every HTTP backend shares: one ``HttpEndpoint``, streaming from it and fetching
    whole answers, its check, its close. A kind says how its stream's ``data`` is parsed
    (``parse_data``), which object ends it (``is_terminal``; else ``[DONE]`` does), and
    whether its plain Chat chunks are read from their bytes (``plain_chunks``)."""

    native_compaction: NativeCompaction | None = None
    """The gateway compacts for a backend, unless the backend says it does (``Backend``)."""

    def __init__(
        self,
        endpoint: HttpEndpoint,
        *,
        parse_data: ParseData = parse_json_object,
        is_terminal: Callable[[JSON], bool] | None = None,
        plain_chunks: bool = False,
    ) -> None:
        self._endpoint = endpoint
        self._parse_data = parse_data
        self._is_terminal = is_terminal
        self._plain_chunks = plain_chunks
        self.display_url = endpoint.display_url

    def stream(self, body: Mapping[str, Any]) -> OpenStream:
        # Neither the body nor its bytes outlive the opening of the stream (see OpenStream).
        return self._endpoint.stream(body, self._parse_data, self._is_terminal, plain_chunks=self._plain_chunks)

    async def fetch(self, body: Mapping[str, Any]) -> JSON:
        return await self._endpoint.post_for_json(orjson.dumps(body))

    async def check(self) -> None:
        await self._endpoint.check()

    async def aclose(self) -> None:
        await self._endpoint.aclose()


def endpoint_for(
    upstream: UpstreamConfig,
    setup: BackendSetup,
    path: str,
    *,
    key_header: KeyHeader = "bearer",
    headers: Mapping[str, str] | None = None,
    check_path: str = "/models",
) -> HttpEndpoint:
    """The endpoint at ``path`` of a configured upstream, its key and proxy read from the
    environment now; the wire's key header, own headers and check path as given."""
    assert upstream.base_url is not None
    environ = setup.environ
    return HttpEndpoint(
        upstream.base_url,
        path,
        api_key=environ.get(upstream.api_key_env) if upstream.api_key_env else None,
        timeout=setup.server.upstream_timeout,
        event_timeout=setup.server.upstream_event_timeout,
        retry=RetryPolicy(attempts=setup.server.upstream_retries),
        proxy=proxy_for(upstream.base_url, environ),
        key_header=key_header,
        headers=headers,
        check_path=check_path,
        limits=setup.limits,
    )


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
                    page = _web_page(begun, self._response.content_type) if begun else None
                    if page is not None:  # nor so (or it says it is one): a web page
                        raise UpstreamProtocolError(_not_the_api(self._where, f"answered a streamed request with {page}"))
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
            raise _stream_error(exc, self._read_timeout) from exc
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


def _stop_socket_read_timer(response: aiohttp.ClientResponse) -> None:
    """Leave the time bound of ``response``'s body to ``StallWatch``: aiohttp's read timer
    is not set again at each read from the socket, and the one the head's last read set is
    cancelled (``start_timeout`` with no timeout set only cancels it). The next request on
    the connection sets its own timeout again."""
    connection = response.connection
    protocol = connection.protocol if connection is not None else None
    if protocol is not None:
        protocol.read_timeout = None
        protocol.start_timeout()


async def _bytes_of(response: aiohttp.ClientResponse, read_timeout: float, limits: UpstreamLimits) -> AsyncIterator[bytes]:
    """The body's bytes as they come, at most ``limits.max_stream_bytes`` of them in all
    (its reader decodes them, and may keep what it decoded)."""
    left = limits.max_stream_bytes
    try:
        async for chunk in response.content.iter_any():
            left -= len(chunk)
            if left < 0:
                raise limits.stream_too_long_error()
            yield chunk
    except BODY_READ_ERRORS as exc:
        raise _stream_error(exc, read_timeout) from exc


def _release_or_close(response: aiohttp.ClientResponse) -> None:
    """Back to the pool when the body was read to its end; closed when some was left unread."""
    if response.content.is_eof():
        response.release()
    else:
        response.close()


async def _drain(response: aiohttp.ClientResponse) -> None:
    """Read what follows the end marker (normally just the end of the body) so the
    connection goes back to the pool; give up quickly on a server that keeps it open.
    A body read to its end already (most are, with their end marker) needs no waiting."""
    if response.content.at_eof():
        return
    with contextlib.suppress(*BODY_READ_ERRORS):
        async with asyncio.timeout(1.0):
            while await response.content.readany():
                pass


def _stream_error(exc: Exception, timeout: float) -> UpstreamError:
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
    if (fault := _body_fault(exc)) is not None:
        return _unreadable_body(fault)
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return UpstreamError("The upstream closed the connection before the stream was complete.")
    return UpstreamError(f"The upstream stream broke: {_describe(exc)}.")


async def _status_error(url: str, response: aiohttp.ClientResponse, within: float) -> UpstreamError:
    """The upstream's error answer, with its own message, as an UpstreamError; a web page
    instead of an API's error is named, not passed on (the address is likely wrong). The
    message is what of the body came ``within`` seconds: none when it did not all come."""
    try:
        async with asyncio.timeout(within):
            raw = await read_prefix(response)
    except BODY_READ_ERRORS:
        raw = b""
    finally:
        _release_or_close(response)
    status_line = f"HTTP {response.status} {response.reason or ''}".strip()
    page = _web_page(raw, response.content_type)
    if page is not None:  # a web server's page, not the API's error: at 404 or 405, likely the wrong address
        what = f"answered {status_line} with {page}"
        message = _not_the_api(url, what) if response.status in (404, 405) else f"The upstream at {url} {what}."
        error_type = code = param = None
    else:
        message, error_type, code, param = _error_fields(raw)
    if not message:
        message = f"The upstream answered {status_line}."
    return UpstreamError(
        message,
        status=_client_status(response.status),
        upstream_status=response.status,
        code=code,
        param=param,
        error_type=error_type or ("server_error" if response.status >= 500 else "invalid_request_error"),
        retry_after=response.headers.get("retry-after"),
    )


_UNSEEN = re.compile(r"<(script|style)\b.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


def _web_page(raw: bytes, content_type: str) -> str | None:
    """``an HTML page ("its words")`` (the text a browser would show, title first, cut at
    200 characters) when ``raw`` is one, else None."""
    if content_type != "text/html" and raw.lstrip()[:1] != b"<":
        return None
    text = _TAG.sub(" ", _UNSEEN.sub(" ", raw[:16384].decode("utf-8", "replace")))
    said = " ".join(text.split())[:200]
    return f'an HTML page ("{said}")' if said else "an HTML page"


def _not_the_api(url: str, what: str) -> str:
    return f"The upstream at {url} {what}, not an API's answer: is that the API's address (often ending in /v1)?"


def _client_status(upstream_status: int) -> int:
    """The status to give the client for an upstream error status.

    The upstream's own status, except 500: a gateway whose backend failed answers 502
    (Bad Gateway), and clients treat the two differently — Codex shows the body of a
    502 to its user but replaces a 500's with a generic "high demand" notice.
    """
    return 502 if upstream_status == 500 else upstream_status


def _error_fields(raw: bytes) -> tuple[str, str | None, str | None, str | None]:
    """message, type, code and param from the usual error bodies (OpenAI, vLLM, Ollama, and
    Anthropic's ``{"type": "error", "error": {"type", "message"}}``)."""
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace").strip()[:2000], None, None, None
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, str):
        return error, None, None, None
    if not isinstance(error, dict):
        return str(error)[:2000], None, None, None
    message = error.get("message") or error.get("detail") or ""
    code = error.get("code")
    param = error.get("param")
    error_type = error.get("type")
    return (
        str(message),
        error_type if isinstance(error_type, str) else None,
        code if isinstance(code, str) else None,
        param if isinstance(param, str) else None,
    )


def connect_error(url: str, exc: BaseException, what: str | None = None) -> UpstreamError:
    """The upstream could not be reached: ``what`` says what was not done within which
    bound (a timeout), else the cause's own words."""
    error = UpstreamError(f"Cannot reach the upstream at {url}: {what or _describe(exc)}.", code="upstream_unreachable")
    error.__cause__ = exc
    return error


def _unreadable_answer(url: str, exc: aiohttp.ClientResponseError) -> UpstreamError:
    said = parser_said(exc.message)
    error = UpstreamProtocolError(f"The upstream at {url} answered with a response the gateway cannot read: {said}.")
    error.__cause__ = exc
    return error


def _body_fault(exc: Exception) -> str | None:
    """What the parser said of a body it could not read (its framing, or its compression),
    when that is why reading it failed."""
    if isinstance(exc, MalformedBody):
        return str(exc)
    if isinstance(exc, HttpProcessingError):
        return str(MalformedBody(exc))
    if isinstance(exc, aiohttp.ClientPayloadError) and isinstance(exc.__cause__, ContentEncodingError):
        return str(MalformedBody(exc.__cause__))
    return None


def _unreadable_body(fault: str) -> UpstreamError:
    return UpstreamProtocolError(f"The upstream's answer has a body the gateway cannot read: {fault}.")


def _redirect_error(url: str, response: aiohttp.ClientResponse) -> UpstreamError:
    """A redirect is not followed: the request, and the key with it, would go to wherever
    the upstream points (aiohttp drops ``Authorization`` for another host, not ``x-api-key``)."""
    location = without_credentials(response.headers.get("Location", ""))[:500] or "nowhere it says"
    response.close()
    return UpstreamError(
        f"The upstream at {url} answered HTTP {response.status}, redirecting to {location}: the gateway "
        "follows no redirect (the request and its key would go elsewhere); set the upstream's address "
        "to where it points.",
        status=502,
        code="upstream_redirect",
    )


def _unsent_error(url: str, allowed: float, size: int, exc: BaseException) -> UpstreamError:
    error = UpstreamError(
        f"The upstream at {url} did not take the request ({size} bytes) and answer it within {allowed:.0f} s "
        "(the connect and read timeouts, and the time to send the body at the slowest rate allowed).",
        status=504,
        code="upstream_timeout",
    )
    error.__cause__ = exc
    return error


def _slow_body_error(url: str, allowed: float) -> UpstreamError:
    return UpstreamError(
        f"The upstream at {url} did not send its whole answer within {round(allowed, 1):g} s of its head "
        "(the read timeout, and the time to receive the largest answer allowed at the slowest rate allowed).",
        status=504,
        code="upstream_timeout",
    )


def _first_byte_timeout(url: str, timeout: float, exc: BaseException) -> UpstreamError:
    error = UpstreamError(
        f"The upstream at {url} sent no response within {timeout:g} s.", status=504, code="upstream_timeout"
    )
    error.__cause__ = exc
    return error


def without_credentials(url: str) -> str:
    """The URL without any ``user:password@`` part, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    host, at, path = rest.partition("@")
    if not sep or not at or "/" in host:
        return url
    return f"{scheme}://{path}"


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text[:500]
