"""The seam between the agent loop and a Responses endpoint, and its HTTP implementation.

``ResponsesClient.stream(body)`` opens ``POST /responses`` and yields the raw SSE bytes;
the loop decodes them with the core's ``ResponseStreamReader``. Leaving the context
closes the connection, which is how cancellation reaches the server. The fake beside
this one is ``ScriptedResponsesClient`` (``_scripted.py``).

aiohttp's exceptions are mapped to ``UpstreamError`` here and nowhere else, keeping the
cause; the API key is sent as ``Authorization: Bearer`` and never appears in a message.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Protocol

import aiohttp
import orjson

from toolwire.errors import UpstreamError

ByteStream = AsyncIterator[bytes]


class ResponsesClient(Protocol):
    """A Responses server. ``stream`` raises ``UpstreamError`` before yielding anything
    when the server cannot be reached or answers with an error status; iterating raises
    it when the connection breaks or stalls."""

    def stream(self, body: Mapping[str, Any]) -> AbstractAsyncContextManager[ByteStream]:
        """``POST /responses`` with ``body``; leaving the context closes the connection."""
        ...


class HttpResponsesClient:
    """``POST {base_url}/responses`` over aiohttp. Use it as an async context manager."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        connect_timeout: float = 30.0,
        read_timeout: float = 600.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout, sock_read=read_timeout
        )
        self._read_timeout = read_timeout
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> HttpResponsesClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout, headers=self._headers)
        return self._session

    @contextlib.asynccontextmanager
    async def stream(self, body: Mapping[str, Any]) -> AsyncIterator[ByteStream]:
        url = self.base_url + "/responses"
        try:
            response = await self._client().post(url, data=orjson.dumps(body))
        except TimeoutError as exc:
            raise UpstreamError(f"{url} sent no response within {self._read_timeout:g} s.") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise UpstreamError(f"Cannot reach {url}: {_describe(exc)}.") from exc
        try:
            if response.status >= 400:
                raise await _status_error(url, response)
            yield self._chunks(response)
        finally:
            response.close()

    async def _chunks(self, response: aiohttp.ClientResponse) -> ByteStream:
        try:
            async for chunk in response.content.iter_any():
                yield chunk
        except TimeoutError as exc:
            raise UpstreamError(
                f"The stream stalled for more than {self._read_timeout:g} s."
            ) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise UpstreamError(f"The stream broke: {_describe(exc)}.") from exc


async def _status_error(url: str, response: aiohttp.ClientResponse) -> UpstreamError:
    """The server's error answer, with its own message when it sent one."""
    try:
        raw = await response.read()
    except (aiohttp.ClientError, OSError, TimeoutError):
        raw = b""
    message = _error_message(raw) or f"HTTP {response.status} {response.reason or ''}".strip()
    return UpstreamError(f"{url} answered {response.status}: {message}", status=response.status)


def _error_message(raw: bytes) -> str:
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace").strip()[:2000]
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return str(error)[:2000]


def _describe(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__)[:500]
