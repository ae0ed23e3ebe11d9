"""``HttpResponsesBackend``: a Responses server's own ``POST /responses`` over HTTP.

vLLM and Ollama serve ``/v1/responses`` themselves, as do OpenAI and OpenRouter. The
connection handling and the error rules are ``HttpChatBackend``'s (its public helpers in
``_http``): pooled keep-alive connections, a failed connect or a 5xx retried before
anything streamed, the upstream's error status and message kept, ``UpstreamError`` for
every foreign failure. ``ResponsesBackend`` is the seam the gateway sees.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import aiohttp
import orjson

from toolwire.protocol import TERMINAL_EVENT_TYPES, SSEDecoder, parse_event

from ._http import (
    RetryPolicy,
    connect_error,
    drain,
    open_session,
    post_with_retries,
    read_json_object,
    stream_error,
    without_credentials,
)

__all__ = ["HttpResponsesBackend", "ResponsesBackend", "ResponsesEventStream"]

ResponsesEventStream = AsyncIterator[dict[str, Any]]
"""Parsed stream events, ending after the terminal event, at ``[DONE]`` or at the end of
the body. Iterating raises ``UpstreamError`` when the stream breaks or stalls, and
``UpstreamProtocolError`` for data that is not an event."""


class ResponsesBackend(Protocol):
    """A Responses server. Both methods raise ``UpstreamError`` *before* anything is
    streamed when it cannot be reached or answers with an error status."""

    def stream(self, body: Mapping[str, Any]) -> AbstractAsyncContextManager[ResponsesEventStream]:
        """Open a streaming response (``body`` has ``stream: true``); leaving closes it."""
        ...

    async def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A non-streaming response: the Response object."""
        ...

    async def check(self) -> None:
        """Raise ``UpstreamError`` if the backend is unreachable (for readiness probes)."""
        ...

    async def aclose(self) -> None: ...


class HttpResponsesBackend:
    """``POST {base_url}/responses`` with pooled keep-alive connections."""

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
        self._url = self.base_url + "/responses"
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream, application/json",
        }
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout, sock_read=timeout
        )
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

    async def _post(self, body: Mapping[str, Any]) -> aiohttp.ClientResponse:
        return await post_with_retries(
            self._client,
            self._url,
            orjson.dumps(body),
            display_url=self.display_url,
            read_timeout=self._read_timeout,
            retry=self._retry,
        )

    @contextlib.asynccontextmanager
    async def stream(self, body: Mapping[str, Any]) -> AsyncIterator[ResponsesEventStream]:
        response = await self._post(body)
        try:
            yield _events(response, self._read_timeout)
        finally:
            response.close()  # an unfinished stream closes the connection: the upstream sees it

    async def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return await read_json_object(await self._post(body))

    async def check(self) -> None:
        try:
            async with self._client().get(self.base_url + "/models") as response:
                await response.read()
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise connect_error(self.display_url, exc) from exc


async def _events(response: aiohttp.ClientResponse, timeout: float) -> ResponsesEventStream:
    """Parsed events; reading stops after the terminal event, as Codex's does."""
    decoder = SSEDecoder()
    try:
        async for data in response.content.iter_any():
            for sse in decoder.feed(data):
                if sse.data == "[DONE]":
                    await drain(response)
                    return
                event = parse_event(sse.data)
                yield event
                if event["type"] in TERMINAL_EVENT_TYPES:
                    await drain(response)
                    return
        for sse in decoder.flush():
            if sse.data != "[DONE]":
                yield parse_event(sse.data)
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise stream_error(exc, timeout) from exc
