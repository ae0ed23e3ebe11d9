"""``kind = "responses"``: a Responses server's own ``POST {base_url}/responses``.

vLLM and Ollama serve ``/v1/responses`` themselves, as do OpenAI and OpenRouter. The
request is passed through, downgraded to what the backend understands (its
``supports_*`` settings, ``ResponsesCapabilities``); the answer comes back through
``ResponsesStreamRestorer``, which gives every call the type its tool was declared with.
Reading a stream stops at its terminal event, as Codex's does. A backend configured
with ``supports_compaction`` compacts by itself: ``compaction_trigger`` and its own
``compaction`` items reach it untouched, and ``POST /v1/responses/compact`` goes to its
``{base_url}/responses/compact`` (``native_compaction``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson

from toolwire.protocol import TERMINAL_EVENT_TYPES, ResponsesRequest, parse_event
from toolwire.translate import ResponsesCapabilities, ResponsesStreamRestorer, downgrade_request

from .._base import UpstreamCall
from .._http import HttpBackend, HttpEndpoint, endpoint_for
from .._kind import BackendKind, BackendSetup

if TYPE_CHECKING:
    from toolwire.config import UpstreamConfig

JSON = dict[str, Any]

CAPABILITY_SETTINGS = tuple(field.name for field in fields(ResponsesCapabilities))
"""The ``[[upstreams]]`` settings of this kind: ``supports_custom_tools``, ..."""


class ResponsesBackend(HttpBackend):
    """A Responses server over HTTP that understands ``capabilities``."""

    def __init__(
        self,
        endpoint: HttpEndpoint,
        capabilities: ResponsesCapabilities,
        compact_endpoint: HttpEndpoint | None = None,
    ) -> None:
        super().__init__(endpoint, parse_data=parse_event, is_terminal=_is_terminal)
        self.capabilities = capabilities
        self._compact_endpoint = compact_endpoint
        if capabilities.supports_compaction and compact_endpoint is not None:
            self.native_compaction = NativeResponsesCompaction(compact_endpoint)

    def prepare(
        self, request: ResponsesRequest, *, upstream_model: str, response_id: str, created_at: int
    ) -> UpstreamCall:
        downgraded = downgrade_request(request, self.capabilities, model=upstream_model)
        body = downgraded.body
        # A previous_response_id was resolved by the gateway's own store (its items are
        # in ``input``): the backend has never seen that id.
        body.pop("previous_response_id", None)
        # (under the client's name for the model: the restorer's default)
        restorer = partial(ResponsesStreamRestorer, downgraded, response_id=response_id, created_at=created_at)
        return UpstreamCall(body, restorer, downgraded.warnings, list(downgraded.conversions))

    async def aclose(self) -> None:
        await super().aclose()
        if self._compact_endpoint is not None:
            await self._compact_endpoint.aclose()


class NativeResponsesCompaction:
    """``POST {base_url}/responses/compact`` of a Responses server that compacts by itself."""

    # What a compaction request carries (the Responses API's /responses/compact body).
    FIELDS = frozenset(
        {"model", "input", "instructions", "tools", "parallel_tool_calls", "reasoning", "text",
         "prompt_cache_key", "service_tier"}
    )

    def __init__(self, endpoint: HttpEndpoint) -> None:
        self._endpoint = endpoint

    async def compact(self, body: Mapping[str, Any]) -> JSON:
        sent = {key: value for key, value in body.items() if key in self.FIELDS}
        return await self._endpoint.post_for_json(orjson.dumps(sent))


def _is_terminal(event: JSON) -> bool:
    return event.get("type") in TERMINAL_EVENT_TYPES


def capabilities_of(upstream: UpstreamConfig) -> ResponsesCapabilities:
    """The ``supports_*`` settings of a ``kind = "responses"`` upstream."""
    return ResponsesCapabilities(**{name: getattr(upstream, name) for name in CAPABILITY_SETTINGS})


def _build(upstream: UpstreamConfig, setup: BackendSetup) -> ResponsesBackend:
    capabilities = capabilities_of(upstream)
    compact = endpoint_for(upstream, setup, "/responses/compact") if capabilities.supports_compaction else None
    return ResponsesBackend(endpoint_for(upstream, setup, "/responses"), capabilities, compact)


RESPONSES = BackendKind(
    "responses",
    _build,
    settings=CAPABILITY_SETTINGS,
    description="a Responses server's own /v1/responses (vLLM, Ollama, OpenAI, OpenRouter)",
)
