"""``HttpResponsesBackend``: a Responses server's own ``POST /responses`` over HTTP.

vLLM and Ollama serve ``/v1/responses`` themselves, as do OpenAI and OpenRouter. The
connection handling and the error rules are ``HttpChatBackend``'s (its public helpers in
``_http``): pooled keep-alive connections, a failed connect or a 5xx retried before
anything streamed, the upstream's error status and message kept, ``UpstreamError`` for
every foreign failure. ``ResponsesBackend`` is the seam the gateway sees.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import orjson

from toolwire.protocol import TERMINAL_EVENT_TYPES, parse_event

from ._base import ResponsesBackend, StreamBatches
from ._http import HttpBackend

__all__ = ["HttpResponsesBackend", "ResponsesBackend"]


class HttpResponsesBackend(HttpBackend):
    """``POST {base_url}/responses``; see ``HttpEndpoint`` for the connection rules."""

    path = "/responses"

    @asynccontextmanager
    async def stream(self, body: Mapping[str, Any]) -> AsyncIterator[StreamBatches]:
        """Events until the terminal one (reading stops there, as Codex's does)."""
        async with self._endpoint.stream(orjson.dumps(body), parse_event, _is_terminal) as batches:
            yield batches

    async def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self._endpoint.post_for_json(orjson.dumps(body))


def _is_terminal(event: dict[str, Any]) -> bool:
    return event.get("type") in TERMINAL_EVENT_TYPES
