"""The seam between the gateway and a Chat Completions backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from toolwire.protocol import ChatRequest

ChatStream = AsyncIterator[dict[str, Any]]
"""Parsed upstream chunks, ending at ``[DONE]`` or at the end of the body.

Iterating raises ``UpstreamError`` when the stream breaks (reset, unreadable data, a
stall longer than the read timeout).
"""


class ChatBackend(Protocol):
    """A Chat Completions server.

    Both methods raise ``UpstreamError`` *before* anything is streamed when the backend
    cannot be reached, answers with an error status, or sends no first byte in time, so
    the gateway can still answer with a plain HTTP error.
    """

    def stream(self, request: ChatRequest) -> AbstractAsyncContextManager[ChatStream]:
        """Open a streaming completion; leaving the context closes the connection."""
        ...

    async def complete(self, request: ChatRequest) -> dict[str, Any]:
        """A non-streaming completion."""
        ...

    async def check(self) -> None:
        """Raise ``UpstreamError`` if the backend is unreachable (for readiness probes)."""
        ...

    async def aclose(self) -> None: ...
