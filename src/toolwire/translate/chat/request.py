"""``translate_request``: a Responses request as a Chat Completions request.

Pure: a parsed ``ResponsesRequest`` and a ``BackendProfile`` in, a plain ``ChatRequest``
dict out. It follows the reference's translation table and message algorithm
(``responses-and-chat-completions.md`` §8.1-§8.2), in three parts:

* the messages, from the input items (``_messages``, with the parts' content in
  ``_content``); for a request that continues a known history, only from its new items
  (``_history``): the messages of the history are shared with the requests before and
  after it, so nothing may change a translated request's messages;
* the tools and ``tool_choice`` (``_tools``): flat names from ``UpstreamToolTable``, a
  custom (freeform) tool as a function with one string parameter ``input``, hosted tools
  not sent; derived once per tool catalog, which requests declaring the same tools share;
* the generation fields (``_fields``): token limit, sampling, format, reasoning effort.

What was lost is listed in ``TranslatedRequest.warnings``, what was reshaped in
``TranslatedRequest.conversions`` (``_notes``). A request the client got wrong in a way
that cannot be translated raises ``RequestError`` naming the place
(``param="input[4].content[1]"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from toolwire.protocol import ChatRequest, ResponsesRequest

from .._notes import Notes
from .._offer import request_catalog
from ..tool_table import UpstreamToolTable
from ._fields import add_generation_fields
from ._history import build_messages
from ._messages import SerializedMessages
from ._tools import DeclaredTools, chat_tools_for, resolve_tool_choice
from .profile import GENERIC, BackendProfile

__all__ = ["TranslatedRequest", "translate_request"]


@dataclass(frozen=True, slots=True)
class TranslatedRequest:
    """The Chat Completions request, and what the stream translator needs to undo it.

    ``tools`` maps the upstream's flat tool names back to the client's ``ToolName`` and
    tool kind. ``warnings`` says what could not be sent (hosted tools, orphan outputs,
    foreign reasoning blobs, fields without equivalent); ``conversions`` names what was
    reshaped on the way (short labels, each listed once).
    """

    chat: ChatRequest
    tools: UpstreamToolTable
    warnings: list[str] = field(default_factory=list)
    conversions: list[str] = field(default_factory=list)
    serialized: SerializedMessages | None = None
    """What of ``chat``'s messages a kept history serialized already (``wire_body``)."""
    serialized_tools: bytes | None = None
    """``chat``'s ``tools`` as the declared tools' translation serialized them once, when
    it sends all of them (``wire_body``)."""

    def wire_body(self) -> Mapping[str, Any]:
        """``chat`` to serialize with orjson: the same JSON, with what was serialized before
        embedded as its bytes (``orjson.Fragment``): the messages of a kept history (each
        run of them), so a long history is not serialized again with every turn, and the
        tools a client declares with every request. For sending, not reading."""
        if self.serialized is None and self.serialized_tools is None:
            return self.chat
        body: dict[str, Any] = dict(self.chat)
        if self.serialized is not None:
            body["messages"] = self.serialized.for_the_wire(self.chat["messages"])
        if self.serialized_tools is not None and "tools" in body:
            body["tools"] = orjson.Fragment(self.serialized_tools)
        return body


def translate_request(
    request: ResponsesRequest, profile: BackendProfile = GENERIC, *, model: str | None = None
) -> TranslatedRequest:
    """Translate ``request`` for a Chat Completions backend described by ``profile``.

    ``model`` replaces ``request.model`` (a routing table's upstream model name).
    Raises ``RequestError`` for what the client got wrong and Chat cannot express: an
    image given by file id only, a tool_choice naming an undeclared or hosted tool, two
    different tools with one name.
    """
    notes = Notes()
    declared = request_catalog(request).derived(DeclaredTools.of)
    table = declared.table
    choice = resolve_tool_choice(request.tool_choice, table)

    messages, serialized = build_messages(request, table, profile, notes)
    chat: ChatRequest = {"model": model if model is not None else request.model, "messages": messages}
    notes.extend(declared.hosted_notes)
    serialized_tools: bytes | None = None
    if choice.allowed is None:
        tools = list(declared.chat_tools)
        serialized_tools = declared.chat_tools_json
        notes.extend(declared.chat_tools_notes)
    else:
        tools = chat_tools_for(table, choice.allowed, notes)
    if tools:
        chat["tools"] = tools
        if choice.value is not None and profile.supports_tool_choice:
            chat["tool_choice"] = choice.value
        if profile.supports_parallel_tool_calls:
            chat["parallel_tool_calls"] = request.parallel_tool_calls is not False
    elif choice.value not in (None, "auto", "none"):
        notes.warn("tool_choice not sent: no tool can be sent to this backend")
    add_generation_fields(chat, request, profile, notes)
    return TranslatedRequest(chat, table, notes.warnings(), notes.conversions(), serialized, serialized_tools)
