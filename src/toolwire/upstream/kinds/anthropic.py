"""``kind = "anthropic"``: an Anthropic Messages API, ``POST {base_url}/v1/messages``.

``base_url`` is the API root, as Anthropic's SDKs take it (``https://api.anthropic.com``,
``https://api.deepseek.com/anthropic``, ...). The request is translated by the Messages
wire (``translate_messages_request``, with the upstream's ``MessagesProfile`` preset) and
the answer comes back through ``MessagesStreamTranslator``, streamed or whole. The key
goes in ``x-api-key`` with ``anthropic-version`` beside it (``Authorization: Bearer``
only where the preset says the vendor wants it); Anthropic's error bodies and its 529
(overloaded, retried like any 5xx before anything streamed) are read by
``HttpEndpoint``. Reading a stream stops at ``message_stop``.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from toolwire.protocol import ResponsesRequest
from toolwire.translate import (
    ANTHROPIC_VERSION,
    MESSAGES_PRESETS,
    MessagesProfile,
    MessagesStreamTranslator,
    translate_messages_request,
)

from .._base import UpstreamCall
from .._http import HttpBackend, HttpEndpoint, endpoint_for
from .._kind import BackendKind, BackendSetup
from .._sse_batches import parse_json_object

if TYPE_CHECKING:
    from toolwire.config import UpstreamConfig

JSON = dict[str, Any]


class MessagesBackend(HttpBackend):
    """An Anthropic Messages API over HTTP."""

    def __init__(self, endpoint: HttpEndpoint, profile: MessagesProfile) -> None:
        super().__init__(endpoint, parse_data=_parse_event, is_terminal=_is_terminal)
        self.profile = profile

    def prepare(
        self, request: ResponsesRequest, *, upstream_model: str, response_id: str, created_at: int
    ) -> UpstreamCall:
        translated = translate_messages_request(request, self.profile, model=upstream_model)
        translator = partial(
            MessagesStreamTranslator,
            request,
            translated.tools,
            response_id=response_id,
            created_at=created_at,
            model=request.model,
        )
        return UpstreamCall(translated.body, translator, translated.warnings, list(translated.conversions))


def _parse_event(data: str) -> JSON | None:
    """A Messages stream's event; its ``ping`` is a keep-alive, no part of the answer."""
    event = parse_json_object(data)
    return None if event.get("type") == "ping" else event


def _is_terminal(event: JSON) -> bool:
    return event.get("type") == "message_stop"


def _build(upstream: UpstreamConfig, setup: BackendSetup) -> MessagesBackend:
    profile = MESSAGES_PRESETS[upstream.preset]
    endpoint = endpoint_for(
        upstream,
        setup,
        "/v1/messages",
        key_header=profile.key_header,
        headers={"anthropic-version": ANTHROPIC_VERSION},
        check_path="/v1/models",
    )
    return MessagesBackend(endpoint, profile)


ANTHROPIC = BackendKind(
    "anthropic",
    _build,
    presets=tuple(MESSAGES_PRESETS),
    description="an Anthropic Messages API (Claude; DeepSeek, Kimi, GLM, MiniMax Anthropic endpoints)",
)
