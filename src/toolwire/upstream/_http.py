"""``HttpChatBackend``: a Chat Completions server over HTTP (aiohttp, pooled connections).

Foreign exceptions (aiohttp, asyncio timeouts) are mapped to ``UpstreamError`` here and
nowhere else, keeping the cause. The upstream key is sent as ``Authorization: Bearer``
and never appears in an error message. The public helpers (``open_session``,
``post_with_retries``, ``read_json_object``, ``stream_error``, ``drain``) are these rules
for any HTTP backend: ``HttpResponsesBackend`` uses them too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from toolwire.errors import UpstreamError, UpstreamProtocolError
from toolwire.protocol import ChatRequest, SSEDecoder


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of a failed connect or a 5xx answer, before anything was streamed."""

    attempts: int = 3
    backoff_seconds: float = 0.25
    max_backoff_seconds: float = 2.0

    def delay(self, attempt: int) -> float:
        return float(min(self.backoff_seconds * 2.0**attempt, self.max_backoff_seconds))


class HttpChatBackend:
    """``POST {base_url}/chat/completions`` with pooled keep-alive connections."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 300.0,
        connect_timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        max_connections: int = 1000,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.display_url = without_credentials(self.base_url)
        self._url = self.base_url + "/chat/completions"
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=timeout)
        self._read_timeout = timeout
        self._retry = retry or RetryPolicy()
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = open_session(self._headers, self._timeout, self._max_connections)
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _post(self, request: ChatRequest) -> aiohttp.ClientResponse:
        return await post_with_retries(
            self._client,
            self._url,
            orjson.dumps(request),
            display_url=self.display_url,
            read_timeout=self._read_timeout,
            retry=self._retry,
        )

    @contextlib.asynccontextmanager
    async def stream(self, request: ChatRequest) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        response = await self._post(request)
        try:
            yield _chunks(response, self._read_timeout)
        finally:
            response.close()  # an unfinished stream closes the connection: the upstream sees it

    async def complete(self, request: ChatRequest) -> dict[str, Any]:
        return await read_json_object(await self._post(request))

    async def check(self) -> None:
        try:
            async with self._client().get(self.base_url + "/models") as response:
                await response.read()
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise connect_error(self.display_url, exc) from exc


def open_session(
    headers: Mapping[str, str], timeout: aiohttp.ClientTimeout, max_connections: int
) -> aiohttp.ClientSession:
    """A pooled keep-alive session sending ``headers`` on every request."""
    connector = aiohttp.TCPConnector(limit=max_connections, ttl_dns_cache=300)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        headers=dict(headers),
        json_serialize=lambda value: orjson.dumps(value).decode(),
        auto_decompress=True,
    )


async def post_with_retries(
    client: Callable[[], aiohttp.ClientSession],
    url: str,
    body: bytes,
    *,
    display_url: str,
    read_timeout: float,
    retry: RetryPolicy,
) -> aiohttp.ClientResponse:
    """POST, retrying a failed connect or a 5xx; raises ``UpstreamError`` on any error."""
    attempt = 0
    while True:
        try:
            response = await client().post(url, data=body)
        except aiohttp.ConnectionTimeoutError as exc:
            error, retryable = connect_error(display_url, exc), True
        except TimeoutError as exc:
            error, retryable = _first_byte_timeout(display_url, read_timeout, exc), False
        except (aiohttp.ClientError, OSError) as exc:
            error, retryable = connect_error(display_url, exc), True
        else:
            if response.status < 400:
                return response
            error, retryable = await _status_error(response), response.status >= 500
        if not retryable or attempt + 1 >= retry.attempts:
            raise error
        await asyncio.sleep(retry.delay(attempt))
        attempt += 1


async def read_json_object(response: aiohttp.ClientResponse) -> dict[str, Any]:
    """A whole answer's body, which must be a JSON object; the connection is released."""
    try:
        raw = await response.read()
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise UpstreamError(f"The upstream connection broke: {_describe(exc)}.") from exc
    finally:
        response.release()
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UpstreamProtocolError("The upstream answered with a body that is not JSON.") from exc
    if not isinstance(body, dict):
        raise UpstreamProtocolError("The upstream answered with JSON that is not an object.")
    return body


def stream_error(exc: TimeoutError | aiohttp.ClientError | OSError, timeout: float) -> UpstreamError:
    """What a failure while reading a streamed body means: a stall, a cut, or a broken stream."""
    if isinstance(exc, TimeoutError):
        return UpstreamError(
            f"The upstream stream stalled for more than {timeout:g} s.", code="upstream_timeout"
        )
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return UpstreamError("The upstream closed the connection before the stream was complete.")
    return UpstreamError(f"The upstream stream broke: {_describe(exc)}.")


async def _chunks(response: aiohttp.ClientResponse, timeout: float) -> AsyncIterator[dict[str, Any]]:
    """Parsed chunks until ``[DONE]`` or the end of the body."""
    decoder = SSEDecoder()
    try:
        async for data in response.content.iter_any():
            for event in decoder.feed(data):
                if event.data == "[DONE]":
                    await drain(response)
                    return
                yield _parse_chunk(event.data)
        for event in decoder.flush():
            if event.data != "[DONE]":
                yield _parse_chunk(event.data)
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise stream_error(exc, timeout) from exc


async def drain(response: aiohttp.ClientResponse) -> None:
    """Read what follows ``[DONE]`` (normally just the end of the body) so the connection
    goes back to the pool; give up quickly on a server that keeps it open."""
    with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
        async with asyncio.timeout(1.0):
            while await response.content.readany():
                pass


def _parse_chunk(data: str) -> dict[str, Any]:
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise UpstreamProtocolError(f"The upstream sent unparseable stream data: {data[:200]!r}.") from None
    if not isinstance(chunk, dict):
        raise UpstreamProtocolError(f"The upstream sent stream data that is not an object: {data[:200]!r}.")
    return chunk


async def _status_error(response: aiohttp.ClientResponse) -> UpstreamError:
    """The upstream's error answer, with its own message, as an UpstreamError."""
    try:
        raw = await response.read()
    except (aiohttp.ClientError, OSError, TimeoutError):
        raw = b""
    finally:
        response.release()
    message, error_type, code, param = _error_fields(raw)
    if not message:
        message = f"The upstream answered HTTP {response.status} {response.reason or ''}".strip() + "."
    return UpstreamError(
        message,
        status=_client_status(response.status),
        code=code,
        param=param,
        error_type=error_type or ("server_error" if response.status >= 500 else "invalid_request_error"),
        retry_after=response.headers.get("retry-after"),
    )


def _client_status(upstream_status: int) -> int:
    """The status to give the client for an upstream error status.

    The upstream's own status, except 500: a gateway whose backend failed answers 502
    (Bad Gateway), and clients treat the two differently — Codex shows the body of a
    502 to its user but replaces a 500's with a generic "high demand" notice.
    """
    return 502 if upstream_status == 500 else upstream_status


def _error_fields(raw: bytes) -> tuple[str, str | None, str | None, str | None]:
    """message, type, code and param from the usual error bodies (OpenAI, vLLM, Ollama)."""
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


def connect_error(url: str, exc: BaseException) -> UpstreamError:
    error = UpstreamError(
        f"Cannot reach the upstream at {url}: {_describe(exc)}.", status=502, code="upstream_unreachable"
    )
    error.__cause__ = exc
    return error


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
