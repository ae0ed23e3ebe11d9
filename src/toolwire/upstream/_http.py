"""HTTP to a backend: one pooled connection set per endpoint, retries, streamed and whole answers.

``HttpEndpoint`` is what every HTTP backend shares: keep-alive connections (aiohttp's,
made by ``_connector.UpstreamConnector``) and no other state between requests (no
cookies), the upstream key in the header its wire expects (``Authorization: Bearer``,
or ``x-api-key`` for Anthropic's Messages API) beside the wire's own headers, a forward
proxy when one is given (``_proxy.proxy_for``), a failed connect or a 5xx retried with
bounded backoff before anything streamed, and the upstream's own error status and
message kept. A streamed body is read by ``SSEBatches`` (``_sse_batches``); a whole one
here. Every read is bounded by ``UpstreamLimits`` (``_limits``): a line, an event or a
body past its limit ends the exchange with ``UpstreamLimitError`` and closes the
connection. And in time: the connect, the request's sending and its answer's head as a
whole, a whole answer's body at the slowest rate allowed, a streamed body's waits by
``StallWatch``. Foreign exceptions (aiohttp, asyncio timeouts) become ``UpstreamError``
at this boundary, in the words of ``_failures``, keeping the cause; no key ever appears
in a message.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import aiohttp
import orjson

from toolwire.errors import UpstreamError, UpstreamProtocolError
from toolwire.protocol import PlainContentFrames

from ._connector import BODY_READ_ERRORS, UpstreamConnector
from ._failures import (
    body_fault,
    check_doubt,
    client_status,
    connect_error,
    describe,
    error_fields,
    first_byte_timeout,
    no_such_path,
    not_the_api,
    redirect_error,
    slow_body_error,
    status_line,
    unreadable_answer,
    unreadable_body,
    unsent_error,
    unusable_url,
    web_page,
    without_credentials,
)
from ._limits import ERROR_BODY_BYTES, UpstreamLimits, read_at_most, read_prefix
from ._proxy import Proxy, aiohttp_arguments, proxy_for
from ._sse_batches import (
    DEFAULT_UPSTREAM_EVENT_TIMEOUT,
    ParseData,
    SSEBatches,
    parse_json_object,
    stream_error,
)

if TYPE_CHECKING:
    from toolwire.config import UpstreamConfig

    from ._base import NativeCompaction
    from ._kind import BackendSetup

JSON = dict[str, Any]
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
        max_connections: int | None = None,
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
        sends keep-alives. ``max_connections`` bounds the requests in flight at once (None:
        no bound of its own; the gateway's ``max_streams`` bounds its requests, and a pool
        narrower than that cap would hold streams past it waiting for a connection)."""
        self.base_url = base_url.rstrip("/")
        self.display_url = without_credentials(self.base_url)
        self.where = self.display_url + (f" (through the proxy {proxy.url})" if proxy else "")
        """Where requests go, for messages: the address without credentials, and the proxy, if any."""
        problem = unusable_url(self.base_url)
        if problem:
            raise ValueError(f"the upstream address {problem}")
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
        self._sends_key = bool(api_key) or self.display_url != self.base_url  # a key, or credentials in the URL
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
            connector = UpstreamConnector(limit=self._max_connections or 0, ttl_dns_cache=300)
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
                    error, retryable = unsent_error(self.where, allowed, len(body), exc), False
                else:
                    error, retryable = first_byte_timeout(self.where, self.read_timeout, exc), False
            except aiohttp.ClientResponseError as exc:  # its head arrived, and cannot be read
                error, retryable = unreadable_answer(self.where, exc), False
            except (aiohttp.ClientError, OSError) as exc:
                error, retryable = connect_error(self.where, exc), True
            else:
                if response.status < 300:
                    return response
                if response.status < 400:
                    error, retryable = redirect_error(self.where, response), False
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
                raise slow_body_error(self.where, allowed) from exc
            if (fault := body_fault(exc)) is not None:
                raise unreadable_body(fault) from exc
            raise UpstreamError(f"The upstream connection broke: {describe(exc)}.") from exc
        finally:
            _release_or_close(response)
        if raw is None:
            raise self.limits.body_error()
        try:
            answer = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            page = web_page(raw, response.content_type)
            if page is not None:
                raise UpstreamProtocolError(not_the_api(self.where, f"answered with {page}")) from exc
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

    async def check(self) -> str | None:
        """Raise ``UpstreamError`` unless ``GET {base_url}{check_path}`` answers within a few
        seconds (any status: the server is there). What its answer says may keep requests
        from being served (``check_doubt``), or None."""
        try:
            async with self._client().get(
                self._check_url, headers=self._headers, timeout=self._check_timeout, allow_redirects=False, **self._via
            ) as response:
                raw = await read_prefix(response)
                return check_doubt(
                    f"GET {self._check_path}", response.status, status_line(response.status, response.reason), raw,
                    response.content_type, sends_key=self._sends_key,
                )
        except TimeoutError as exc:  # aiohttp's own timeouts are TimeoutErrors too
            within = f"no answer to GET {self._check_path} within {self._check_timeout.total:g} s"
            raise connect_error(self.where, exc, within) from exc
        except BODY_READ_ERRORS as exc:
            raise connect_error(self.where, exc) from exc


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

    async def check(self) -> str | None:
        return await self._endpoint.check()

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
        raise stream_error(exc, read_timeout) from exc


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
    said_status = status_line(response.status, response.reason)
    wrong_address = no_such_path(response.status, said_status, raw, response.content_type)
    page = web_page(raw, response.content_type)
    if wrong_address is not None:
        message, error_type, code, param = not_the_api(url, wrong_address), None, None, None
    elif page is not None:  # a web server's page, not the API's error
        message, error_type, code, param = f"The upstream at {url} answered {said_status} with {page}.", None, None, None
    else:
        message, error_type, code, param = error_fields(raw)
    if not message:
        message = f"The upstream answered {said_status}."
    return UpstreamError(
        message,
        status=client_status(response.status),
        upstream_status=response.status,
        code=code,
        param=param,
        error_type=error_type or ("server_error" if response.status >= 500 else "invalid_request_error"),
        retry_after=response.headers.get("retry-after"),
    )
