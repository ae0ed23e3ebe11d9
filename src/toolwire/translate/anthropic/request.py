"""``translate_messages_request``: a Responses request as an Anthropic Messages request.

Pure: a parsed ``ResponsesRequest`` and a ``MessagesProfile`` in, the JSON body of
``POST /v1/messages`` out, in four parts:

* ``system`` and ``messages``, from the input items (``_messages``, the blocks in
  ``_content``), in the order and shape the API demands;
* ``tools`` and ``tool_choice`` (``_tools``): flat names from ``UpstreamToolTable``, a
  custom (freeform) tool as a tool with one string ``input``, the hosted web search
  where the backend runs it; without any, the tools the history calls, not to be called;
* ``max_tokens``, ``thinking`` and sampling (``_fields``);
* prompt caching: ``cache_control`` breakpoints on the last tool, the last system block
  and the last block of the latest turn (Codex resends its long tools and instructions
  every turn), where the profile takes them.

What was lost is listed in ``TranslatedMessages.warnings``, what was reshaped in
``conversions``. A request the client got wrong in a way the Messages API cannot
express raises ``RequestError`` naming the place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolwire.errors import RequestError
from toolwire.protocol import ResponsesRequest

from .._notes import Notes
from .._offer import request_catalog
from ..tool_table import UpstreamToolTable
from ._content import text_block
from ._fields import add_generation_fields, thinking_budget
from ._messages import MessageBuilder
from ._tools import DeclaredTools, ToolChoice, called_tools, messages_tools, resolve_tool_choice
from .profile import ANTHROPIC, MessagesProfile

__all__ = ["TranslatedMessages", "translate_messages_request"]

JSON = dict[str, Any]
_EPHEMERAL: JSON = {"type": "ephemeral"}
_CACHEABLE_BLOCKS = frozenset({"text", "image", "document", "tool_use", "tool_result"})


@dataclass(frozen=True, slots=True)
class TranslatedMessages:
    """The Messages request body, and what the answer translator needs to undo it."""

    body: JSON
    tools: UpstreamToolTable
    warnings: list[str] = field(default_factory=list)
    conversions: list[str] = field(default_factory=list)


def translate_messages_request(
    request: ResponsesRequest, profile: MessagesProfile = ANTHROPIC, *, model: str | None = None
) -> TranslatedMessages:
    """Translate ``request`` for a Messages backend described by ``profile``.

    ``model`` replaces ``request.model`` (a routing table's upstream model name).
    """
    notes = Notes()
    declared = request_catalog(request).derived(DeclaredTools.of)
    choice = resolve_tool_choice(request.tool_choice, declared.table)
    builder = MessageBuilder(request, declared.table, profile, notes)
    messages = builder.build()
    if not messages:
        raise RequestError("Invalid 'input': the Messages API needs at least one message with content.", param="input")
    upstream_model = model if model is not None else request.model
    body: JSON = {"model": upstream_model}
    system = [text_block(text) for text in builder.system if text]
    if system:
        body["system"] = system
    body["messages"] = messages
    tools = messages_tools(declared, choice.allowed, profile, notes)
    if not tools and (called := called_tools(messages)):
        if choice.value is not None and choice.value["type"] not in ("auto", "none"):
            notes.warn("tool_choice not sent: no tool can be sent to this backend")
        tools, choice = called, ToolChoice({"type": "none"})
        notes.convert("tools the history calls declared, none to be called (tool_choice none)")
    if tools:
        body["tools"] = tools
        tool_choice = dict(choice.value) if choice.value is not None else None
        if request.parallel_tool_calls is False and (tool_choice is None or tool_choice["type"] != "none"):
            tool_choice = {**(tool_choice or {"type": "auto"}), "disable_parallel_tool_use": True}
            notes.convert("parallel_tool_calls false sent as disable_parallel_tool_use")
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
    elif choice.value is not None and choice.value["type"] not in ("auto", "none"):
        notes.warn("tool_choice not sent: no tool can be sent to this backend")
    thinking = _thinking(request, choice.forces_a_tool and bool(tools), messages, notes)
    add_generation_fields(body, request, profile, notes, model=upstream_model, thinking=thinking)
    if profile.cache_control:
        _add_cache_breakpoints(body, notes)
    return TranslatedMessages(body, declared.table, notes.warnings(), notes.conversions())


def _thinking(request: ResponsesRequest, forces_a_tool: bool, messages: list[JSON], notes: Notes) -> int | None:
    """The thinking budget to ask for, or None when thinking cannot be on for this request."""
    budget = thinking_budget(request)
    if budget is None:
        return None
    if forces_a_tool:
        notes.warn("reasoning not enabled: thinking cannot be on while tool_choice forces a tool")
        return None
    if _open_tool_loop_without_thinking(messages):
        notes.warn(
            "reasoning not enabled: the tool loop in progress began without signed thinking "
            "(its assistant turn must start with a thinking block)"
        )
        return None
    return budget


def _open_tool_loop_without_thinking(messages: list[JSON]) -> bool:
    """Whether the conversation ends with tool results whose assistant turn has no
    thinking first: with thinking on, the API rejects that turn."""
    if len(messages) < 2 or messages[-1]["role"] != "user":
        return False
    first = messages[-1]["content"][0]
    if first.get("type") != "tool_result":
        return False
    assistant = messages[-2]["content"]
    return not assistant or assistant[0].get("type") not in ("thinking", "redacted_thinking")


def _add_cache_breakpoints(body: JSON, notes: Notes) -> None:
    """``cache_control`` on the last tool, the last system block and the latest turn's last
    cacheable block: at most three of the API's four breakpoints."""
    marked = False
    tools = body.get("tools") or []
    for index in range(len(tools) - 1, -1, -1):
        if "input_schema" in tools[index]:  # a client tool (server tools come last)
            tools[index] = {**tools[index], "cache_control": _EPHEMERAL}
            marked = True
            break
    system = body.get("system")
    if system:
        system[-1]["cache_control"] = _EPHEMERAL
        marked = True
    last = body["messages"][-1]["content"]
    for block in reversed(last):
        if block.get("type") in _CACHEABLE_BLOCKS:
            block["cache_control"] = _EPHEMERAL
            marked = True
            break
    if marked:
        notes.convert("cache_control breakpoints on tools, system and the latest turn")
