"""``HttpChatBackend``: a Chat Completions server over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson

from toolwire.protocol import ChatRequest

from ._base import StreamBatches
from ._http import HttpBackend, parse_json_object


class HttpChatBackend(HttpBackend):
    """``POST {base_url}/chat/completions``; see ``HttpEndpoint`` for the connection rules."""

    path = "/chat/completions"

    @asynccontextmanager
    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamBatches]:
        body = orjson.dumps(request)
        del request  # not kept alive for as long as the stream is open
        async with self._endpoint.stream(body, parse_json_object) as batches:
            yield batches

    async def complete(self, request: ChatRequest) -> dict[str, Any]:
        return await self._endpoint.post_for_json(orjson.dumps(request))
