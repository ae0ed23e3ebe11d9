"""``HttpChatBackend``: a Chat Completions server over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson

from toolwire.protocol import ChatRequest

from ._base import StreamBatches
from ._http import HttpEndpoint, RetryPolicy, parse_json_object


class HttpChatBackend:
    """``POST {base_url}/chat/completions``; see ``HttpEndpoint`` for the connection rules."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 300.0,
        retry: RetryPolicy | None = None,
        max_connections: int = 1000,
    ) -> None:
        self._endpoint = HttpEndpoint(
            base_url,
            "/chat/completions",
            api_key=api_key,
            timeout=timeout,
            retry=retry,
            max_connections=max_connections,
        )
        self.display_url = self._endpoint.display_url

    @asynccontextmanager
    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamBatches]:
        body = orjson.dumps(request)
        del request  # not kept alive for as long as the stream is open
        async with self._endpoint.stream(body, parse_json_object) as batches:
            yield batches

    async def complete(self, request: ChatRequest) -> dict[str, Any]:
        return await self._endpoint.post_for_json(orjson.dumps(request))

    async def check(self) -> None:
        await self._endpoint.check()

    async def aclose(self) -> None:
        await self._endpoint.aclose()
