"""``kind = "chat"``: a Chat Completions server, ``POST {base_url}/chat/completions``.

The request is translated by the Chat wire (``translate_request``, with the upstream's
``BackendProfile`` preset) and the answer comes back through ``ChatStreamTranslator``,
streamed or whole. The connection rules are ``HttpEndpoint``'s.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from toolwire.protocol import ResponsesRequest
from toolwire.translate import PRESETS, BackendProfile, ChatStreamTranslator, translate_request

from .._base import UpstreamCall
from .._http import HttpBackend, HttpEndpoint, endpoint_for
from .._kind import BackendKind, BackendSetup

if TYPE_CHECKING:
    from toolwire.config import UpstreamConfig

JSON = dict[str, Any]


def prepare_chat(
    request: ResponsesRequest,
    profile: BackendProfile,
    *,
    upstream_model: str,
    response_id: str,
    created_at: int,
    for_the_wire: bool = False,
) -> UpstreamCall:
    """``request`` as a Chat Completions request for a backend described by ``profile``;
    ``for_the_wire``: a body only ever serialized (``TranslatedRequest.wire_body``: the
    messages of a kept history are not serialized again), not read."""
    translated = translate_request(request, profile, model=upstream_model)
    translator = partial(
        ChatStreamTranslator,
        request,
        translated.tools,
        response_id=response_id,
        created_at=created_at,
        model=request.model,
        tool_call_text=profile.tool_call_text,
    )
    body = translated.wire_body() if for_the_wire else translated.chat
    return UpstreamCall(body, translator, translated.warnings, list(translated.conversions))


class ChatBackend(HttpBackend):
    """A Chat Completions server over HTTP."""

    def __init__(self, endpoint: HttpEndpoint, profile: BackendProfile) -> None:
        super().__init__(endpoint, plain_chunks=True)
        self.profile = profile

    def prepare(
        self, request: ResponsesRequest, *, upstream_model: str, response_id: str, created_at: int
    ) -> UpstreamCall:
        return prepare_chat(
            request,
            self.profile,
            upstream_model=upstream_model,
            response_id=response_id,
            created_at=created_at,
            for_the_wire=True,
        )


def _build(upstream: UpstreamConfig, setup: BackendSetup) -> ChatBackend:
    return ChatBackend(endpoint_for(upstream, setup, "/chat/completions"), profile_of(upstream))


def profile_of(upstream: UpstreamConfig) -> BackendProfile:
    """A chat upstream's preset, with its own ``tool_call_text`` setting."""
    return replace(PRESETS[upstream.preset], tool_call_text=upstream.tool_call_text)


CHAT = BackendKind(
    "chat",
    _build,
    presets=tuple(PRESETS),
    settings=("tool_call_text",),
    description="a Chat Completions server (vLLM, Ollama, llama.cpp, DeepSeek, ...)",
)
