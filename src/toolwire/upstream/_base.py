"""The seams between the gateway and its backends: ``ChatBackend`` and ``ResponsesBackend``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from toolwire.protocol import ChatRequest

JSON = dict[str, Any]


class StreamBatches(Protocol):
    """A streamed answer, parsed: one list of JSON objects per network read.

    Everything that arrived together is translated and sent on together; when the
    upstream trickles, a batch holds one object. Iterating raises ``UpstreamError``
    when the stream breaks, stalls longer than the read timeout, or carries data that
    is not JSON. ``ended_cleanly`` says whether the upstream said it was done
    (``[DONE]``, or a terminal event) rather than just stopping; it turns true with the
    batch that held the end marker, so a reader can finish without waiting for the
    body's last bytes.
    """

    @property
    def ended_cleanly(self) -> bool: ...

    def __aiter__(self) -> AsyncIterator[list[JSON]]: ...


class ChatBackend(Protocol):
    """A Chat Completions server.

    Both methods raise ``UpstreamError`` *before* anything is streamed when the backend
    cannot be reached, answers with an error status, or sends no first byte in time, so
    the gateway can still answer with a plain HTTP error.
    """

    def stream(self, request: ChatRequest) -> AbstractAsyncContextManager[StreamBatches]:
        """Open a streaming completion; leaving the context closes the connection."""
        ...

    async def complete(self, request: ChatRequest) -> JSON:
        """A non-streaming completion."""
        ...

    async def check(self) -> None:
        """Raise ``UpstreamError`` if the backend is unreachable (for readiness probes)."""
        ...

    async def aclose(self) -> None: ...


class ResponsesBackend(Protocol):
    """A Responses server (vLLM's, Ollama's, OpenAI's own ``/v1/responses``)."""

    def stream(self, body: Mapping[str, Any]) -> AbstractAsyncContextManager[StreamBatches]:
        """Open a streaming response (``body`` has ``stream: true``); leaving closes it."""
        ...

    async def create(self, body: Mapping[str, Any]) -> JSON:
        """A non-streaming response: the Response object."""
        ...

    async def check(self) -> None: ...

    async def aclose(self) -> None: ...


class ListBatches:
    """``StreamBatches`` over objects already in memory (the mock backend, tests)."""

    def __init__(self, batches: list[list[JSON]]) -> None:
        self._batches = batches
        self.ended_cleanly = False

    async def _iterate(self) -> AsyncIterator[list[JSON]]:
        for batch in self._batches:
            yield batch
        self.ended_cleanly = True

    def __aiter__(self) -> AsyncIterator[list[JSON]]:
        return self._iterate()
