"""The seam between the agent loop and a Responses endpoint, and its HTTP implementation.

``ResponsesClient.stream(body)`` opens ``POST /responses`` and yields the raw SSE bytes;
the loop decodes them with the core's ``ResponseStreamReader``. Leaving the context
closes the connection, which is how cancellation reaches the server. The fake beside
this one is ``ScriptedResponsesClient`` (``_scripted.py``).

``HttpResponsesClient`` is the gateway's own upstream client, ``HttpEndpoint``: pooled
connections, the proxy the environment names, a failed connect or a 5xx retried before
anything streamed, and every failure an ``UpstreamError`` with the server's own message
(prefixed with where it came from); the API key never appears in a message. Its bounds
are the gateway's for its upstream: 10 s to connect, 300 s without a byte.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Protocol

import orjson

from toolwire.errors import UpstreamError
from toolwire.upstream import (
    DEFAULT_UPSTREAM_CONNECT_TIMEOUT,
    DEFAULT_UPSTREAM_TIMEOUT,
    HttpEndpoint,
    RetryPolicy,
    proxy_for,
)

ByteStream = AsyncIterator[bytes]


class ResponsesClient(Protocol):
    """A Responses server. ``stream`` raises ``UpstreamError`` before yielding anything
    when the server cannot be reached or answers with an error status; iterating raises
    it when the connection breaks or stalls."""

    def stream(self, body: Mapping[str, Any]) -> AbstractAsyncContextManager[ByteStream]:
        """``POST /responses`` with ``body``; leaving the context closes the connection."""
        ...


class HttpResponsesClient:
    """``POST {base_url}/responses`` over ``HttpEndpoint``. Use it as an async context manager."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        connect_timeout: float = DEFAULT_UPSTREAM_CONNECT_TIMEOUT,
        read_timeout: float = DEFAULT_UPSTREAM_TIMEOUT,
        retry: RetryPolicy | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._endpoint = HttpEndpoint(
            self.base_url,
            "/responses",
            api_key=api_key,
            timeout=read_timeout,
            connect_timeout=connect_timeout,
            retry=retry,
            proxy=proxy_for(self.base_url, os.environ if environ is None else environ),
        )
        self._url = self._endpoint.display_url + "/responses"

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
        await self._endpoint.aclose()

    @contextlib.asynccontextmanager
    async def stream(self, body: Mapping[str, Any]) -> AsyncIterator[ByteStream]:
        try:
            async with self._endpoint.stream_bytes(orjson.dumps(body)) as chunks:
                yield chunks
        except UpstreamError as exc:
            if exc.upstream_status is None:
                raise
            raise UpstreamError(
                f"{self._url} answered {exc.upstream_status}: {exc.message}",
                status=exc.upstream_status,
                code=exc.code,
                upstream_status=exc.upstream_status,
            ) from exc
