"""``translate_request``: a Responses request as a Chat Completions request.

Pure: a parsed ``ResponsesRequest`` and a ``BackendProfile`` in, a plain ``ChatRequest``
dict out. It follows the reference's translation table and message algorithm
(``responses-and-chat-completions.md`` §8.1-§8.2):

* ``instructions`` and every system/developer message become ONE leading system message;
  no ``developer`` role goes upstream.
* The calls of one model turn become ONE assistant message with several ``tool_calls``,
  directly followed by their ``tool`` messages in call order: outputs are re-ordered to
  their calls, a call without output gets ``"aborted"``, an output without call is dropped,
  assistant text found between a call and its output moves before the calls. Images a
  tool returned reach the model in one user message after the tool messages.
* Reasoning items ride on the following assistant message, in the backend's field.
* Tools get flat names from ``UpstreamToolTable``; a custom (freeform) tool becomes a
  function with one string parameter ``input``; hosted tools are not sent. The table and
  the Chat tools depend on the declared tools alone: they are built once per tool
  catalog, which requests declaring the same tools share (``_DeclaredTools``).

What was lost is listed in ``TranslatedRequest.warnings``, what was reshaped in
``TranslatedRequest.conversions``. A request the client got wrong in a way that cannot be
translated raises ``RequestError`` naming the place (``param="input[4].content[1]"``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import orjson

from toolwire.errors import RequestError
from toolwire.protocol import (
    AdditionalToolsItem,
    ChatMessage,
    ChatRequest,
    ChatTool,
    ChatToolCall,
    ContentPart,
    CustomTool,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    GrammarFormat,
    InputFile,
    InputImage,
    InputText,
    Item,
    MessageItem,
    NamespaceTool,
    OutputText,
    ReasoningItem,
    ReasoningText,
    Refusal,
    ResponsesRequest,
    SummaryText,
    TextFormat,
    ToolSearchCallItem,
    ToolSearchOutputItem,
    ToolSearchTool,
    ToolSpec,
)
from toolwire.tools import ConfigurationError, ToolCatalog, ToolKind, ToolName

from .profile import GENERIC, BackendProfile
from .reasoning import open_reasoning
from .tool_table import UpstreamTool, UpstreamToolTable, upstream_call_id

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


def translate_request(
    request: ResponsesRequest, profile: BackendProfile = GENERIC, *, model: str | None = None
) -> TranslatedRequest:
    """Translate ``request`` for a Chat Completions backend described by ``profile``.

    ``model`` replaces ``request.model`` (a routing table's upstream model name).
    Raises ``RequestError`` for what the client got wrong and Chat cannot express: an
    image given by file id only, a tool_choice naming an undeclared or hosted tool, two
    different tools with one name.
    """
    notes = _Notes()
    try:
        catalog = ToolCatalog.from_request(request)
    except ConfigurationError as exc:
        raise RequestError(exc.message, param="tools") from exc
    declared = catalog.derived(_DeclaredTools.of)
    table = declared.table
    choice = _resolve_tool_choice(request.tool_choice, table)

    chat: ChatRequest = {
        "model": model if model is not None else request.model,
        "messages": _MessageBuilder(request, table, profile, notes).build(),
    }
    notes.extend(declared.hosted_notes)
    if choice.allowed is None:
        tools = list(declared.chat_tools)
        notes.extend(declared.chat_tools_notes)
    else:
        tools = _chat_tools(table, choice.allowed, notes)
    if tools:
        chat["tools"] = tools
        if choice.value is not None and profile.supports_tool_choice:
            chat["tool_choice"] = choice.value
        if profile.supports_parallel_tool_calls:
            chat["parallel_tool_calls"] = request.parallel_tool_calls is not False
    elif choice.value not in (None, "auto", "none"):
        notes.warn("tool_choice not sent: no tool can be sent to this backend")
    _add_generation_fields(chat, request, profile, notes)
    return TranslatedRequest(chat, table, notes.warnings(), notes.conversions())


# ---------------------------------------------------------------- notes


_MAX_DETAILS = 5


class _Notes:
    """Warnings (with where they happened) and conversion labels, each kept once, in order."""

    def __init__(self) -> None:
        self._warnings: dict[str, list[str]] = {}
        self._conversions: dict[str, None] = {}

    def warn(self, what: str, where: str | None = None) -> None:
        details = self._warnings.setdefault(what, [])
        if where is not None:
            details.append(where)

    def convert(self, label: str) -> None:
        self._conversions[label] = None

    def warnings(self) -> list[str]:
        lines = []
        for what, details in self._warnings.items():
            if not details:
                lines.append(what)
                continue
            shown = ", ".join(details[:_MAX_DETAILS])
            more = len(details) - _MAX_DETAILS
            lines.append(f"{what}: {shown}" + (f" and {more} more" if more > 0 else ""))
        return lines

    def conversions(self) -> list[str]:
        return list(self._conversions)

    def extend(self, other: _Notes) -> None:
        """Note everything ``other`` noted, as if it had been noted here, in its order."""
        for what, details in other._warnings.items():
            self._warnings.setdefault(what, []).extend(details)
        self._conversions.update(other._conversions)


# ---------------------------------------------------------------- tools


_RAW_INPUT_RULE = (
    "This is a freeform tool: pass its whole input as the string argument `input`. "
    "`input` is the raw text itself (for example the patch, or the JavaScript source), "
    "NOT JSON and NOT wrapped in markdown code fences."
)
_INPUT_PROPERTY_DESCRIPTION = "The raw text input: not JSON, not wrapped in markdown code fences."


def _empty_parameters() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class _DeclaredTools:
    """What translation derives from the declared tools alone: the upstream tool table,
    the Chat ``tools`` (all of them) and the notes that each of these leaves.

    Kept with the catalog (``ToolCatalog.derived``), which requests that declare the same
    tools share: the table, the Chat tools list and its dicts are only read, and each
    request gets its own copy of the list.
    """

    table: UpstreamToolTable
    hosted_notes: _Notes
    chat_tools: list[ChatTool]
    chat_tools_notes: _Notes

    @classmethod
    def of(cls, catalog: ToolCatalog) -> _DeclaredTools:
        table = UpstreamToolTable(catalog)
        hosted_notes, chat_tools_notes = _Notes(), _Notes()
        _note_hosted_tools(catalog, hosted_notes)
        chat_tools = _chat_tools(table, None, chat_tools_notes)
        return cls(table, hosted_notes, chat_tools, chat_tools_notes)


def _note_hosted_tools(catalog: ToolCatalog, notes: _Notes) -> None:
    """One warning naming the declared tools no Chat backend can run."""
    hosted = [
        str(entry.tool_name)
        for entry in catalog
        if entry.kind is ToolKind.HOSTED
        or (isinstance(entry.spec, ToolSearchTool) and entry.spec.execution != "client")
    ]
    if hosted:
        notes.warn(
            f"hosted tools not sent (a Chat Completions backend cannot run them): {', '.join(hosted)}"
        )


def _chat_tools(
    table: UpstreamToolTable,
    allowed: frozenset[ToolName] | None,
    notes: _Notes,
) -> list[ChatTool]:
    """The Chat ``tools`` for every callable tool in ``table`` (only ``allowed`` ones if set)."""
    tools: list[ChatTool] = []
    for tool in table:
        if allowed is not None and tool.tool_name not in allowed:
            continue
        if tool.tool_name.namespace is not None:
            notes.convert("namespace tools flattened")
        chat_tool = _chat_tool(tool, tool.namespace_description or "", notes)
        if chat_tool is not None:
            tools.append(chat_tool)
    if allowed is not None:
        notes.convert("allowed_tools sent as the subset of tools")
    return tools


def _chat_tool(tool: UpstreamTool, namespace_description: str, notes: _Notes) -> ChatTool | None:
    spec = tool.spec
    if isinstance(spec, FunctionTool):
        description = _join_paragraphs(namespace_description, spec.description)
        chat_tool: ChatTool = {
            "type": "function",
            "function": {
                "name": tool.upstream_name,
                "parameters": spec.parameters
                if spec.parameters is not None
                else _empty_parameters(),
            },
        }
        if description:
            chat_tool["function"]["description"] = description
        if spec.strict is not None:
            chat_tool["function"]["strict"] = spec.strict
        return chat_tool
    if isinstance(spec, CustomTool):
        notes.convert(f"custom tool {tool.tool_name} wrapped as function")
        return {
            "type": "function",
            "function": {
                "name": tool.upstream_name,
                "description": custom_tool_description(spec, namespace_description),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "input": {"type": "string", "description": _INPUT_PROPERTY_DESCRIPTION}
                    },
                    "required": ["input"],
                    "additionalProperties": False,
                },
            },
        }
    if isinstance(spec, ToolSearchTool) and spec.execution == "client":
        notes.convert("client tool_search sent as a function")
        chat_tool = {
            "type": "function",
            "function": {
                "name": tool.upstream_name,
                "parameters": spec.parameters
                if spec.parameters is not None
                else _empty_parameters(),
            },
        }
        description = _join_paragraphs(namespace_description, spec.description)
        if description:
            chat_tool["function"]["description"] = description
        return chat_tool
    return None  # a server-side tool_search: reported with the hosted tools


def custom_tool_description(spec: CustomTool, namespace_description: str) -> str:
    """The tool's own description, how to pass raw text in ``input``, and its format."""
    tool_format = spec.format
    if isinstance(tool_format, GrammarFormat):
        language = "Lark grammar" if tool_format.syntax == "lark" else "regular expression"
        format_text = f"`input` must match this {language}:\n{tool_format.definition}"
    elif tool_format is None or isinstance(tool_format, TextFormat):
        format_text = "`input` is unconstrained text."
    else:
        format_text = f"`input` format: {tool_format.type}."
    return _join_paragraphs(namespace_description, spec.description, _RAW_INPUT_RULE, format_text)


def _join_paragraphs(*texts: str | None) -> str:
    return "\n\n".join(text for text in texts if text)


# ---------------------------------------------------------------- tool_choice

_MODES = frozenset({"auto", "none", "required"})


@dataclass(frozen=True, slots=True)
class _ToolChoice:
    """The Chat ``tool_choice`` to send, and the only tools to send (None: all)."""

    value: str | dict[str, Any] | None
    allowed: frozenset[ToolName] | None = None


def _resolve_tool_choice(
    choice: str | dict[str, Any] | None, table: UpstreamToolTable
) -> _ToolChoice:
    if choice is None:
        return _ToolChoice(None)
    if isinstance(choice, str):
        if choice in _MODES:
            return _ToolChoice(choice)
        raise RequestError(
            f"Invalid 'tool_choice': {choice!r} is not 'auto', 'none', 'required' or a tool.",
            param="tool_choice",
        )
    kind = choice.get("type")
    if kind in ("function", "custom"):
        tool = _declared_tool(choice, table, "tool_choice")
        return _ToolChoice({"type": "function", "function": {"name": tool.upstream_name}})
    if kind == "allowed_tools":
        return _allowed_tools(choice, table)
    raise RequestError(
        f"Invalid 'tool_choice': {kind!r} tools cannot run on a Chat Completions backend.",
        param="tool_choice",
    )


def _allowed_tools(choice: dict[str, Any], table: UpstreamToolTable) -> _ToolChoice:
    mode = choice.get("mode", "auto")
    if mode not in _MODES:
        raise RequestError(
            f"Invalid 'tool_choice.mode': {mode!r} is not 'auto', 'none' or 'required'.",
            param="tool_choice.mode",
        )
    entries = choice.get("tools")
    if not isinstance(entries, list):
        raise RequestError(
            "Invalid 'tool_choice.tools': expected a list of tools.", param="tool_choice.tools"
        )
    allowed: set[ToolName] = set()
    for index, entry in enumerate(entries):
        where = f"tool_choice.tools[{index}]"
        if not isinstance(entry, dict):
            raise RequestError(f"Invalid '{where}': expected an object.", param=where)
        kind = entry.get("type")
        if kind in ("function", "custom"):
            allowed.add(_declared_tool(entry, table, where).tool_name)
        elif kind == "tool_search":
            allowed.add(ToolName(None, "tool_search"))
        # hosted tools are never sent, so allowing them changes nothing
    return _ToolChoice(mode, frozenset(allowed))


def _declared_tool(entry: dict[str, Any], table: UpstreamToolTable, where: str) -> UpstreamTool:
    name, namespace = entry.get("name"), entry.get("namespace")
    if not isinstance(name, str) or not (namespace is None or isinstance(namespace, str)):
        raise RequestError(f"Invalid '{where}': a tool needs a string 'name'.", param=where)
    tool = table.by_tool_name(ToolName(namespace, name))
    if tool is None:
        raise RequestError(
            f"Invalid '{where}': the request declares no tool named {ToolName(namespace, name)}.",
            param=where,
        )
    return tool


# ---------------------------------------------------------------- generation fields

_TRANSLATED_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_output_tokens",
        "temperature",
        "top_p",
        "text",
        "reasoning",
        "stream",
    }
)
# Bookkeeping for the Responses server itself: dropping them changes nothing the model does.
_SILENTLY_DROPPED_FIELDS = frozenset(
    {
        "store",
        "include",
        "prompt_cache_key",
        "prompt_cache_retention",
        "client_metadata",
        "metadata",
        "user",
        "safety_identifier",
        "service_tier",
        "stream_options",
        # Resolved by the server from its response store before translation.
        "previous_response_id",
    }
)
_DEFAULT_VALUES: dict[str, Any] = {"truncation": "disabled"}


def _add_generation_fields(
    chat: ChatRequest, request: ResponsesRequest, profile: BackendProfile, notes: _Notes
) -> None:
    """Token limit, sampling, output format, reasoning effort and streaming."""
    lost: list[str] = []
    if request.max_output_tokens is not None:
        cast("dict[str, Any]", chat)[profile.max_tokens_field] = request.max_output_tokens
    if request.temperature is not None:
        chat["temperature"] = request.temperature
    if request.top_p is not None:
        chat["top_p"] = request.top_p
    _add_response_format(chat, request.text or {}, profile, notes, lost)
    _add_reasoning_effort(chat, request.reasoning or {}, profile, lost)
    if request.stream:
        chat["stream"] = True
        if profile.stream_usage:
            chat["stream_options"] = {"include_usage": True}
    for name in request.model_fields_set:
        if name in _TRANSLATED_FIELDS or name in _SILENTLY_DROPPED_FIELDS:
            continue
        value = getattr(request, name, None)
        if value is not None and value is not False and _DEFAULT_VALUES.get(name) != value:
            lost.append(name)
    if lost:
        notes.warn(
            f"request fields not forwarded (no Chat Completions equivalent): {', '.join(sorted(lost))}"
        )


def _add_response_format(
    chat: ChatRequest, text: dict[str, Any], profile: BackendProfile, notes: _Notes, lost: list[str]
) -> None:
    lost.extend(
        f"text.{key}" for key, value in text.items() if key != "format" and value is not None
    )
    text_format = text.get("format")
    if text_format is None:
        return
    if not isinstance(text_format, dict):
        raise RequestError("Invalid 'text.format': expected an object.", param="text.format")
    kind = text_format.get("type")
    if kind == "text":
        return
    if kind == "json_object":
        response_format: dict[str, Any] = {"type": "json_object"}
    elif kind == "json_schema":
        name, schema = text_format.get("name"), text_format.get("schema")
        if not isinstance(name, str):
            raise RequestError(
                "Invalid 'text.format.name': expected a string.", param="text.format.name"
            )
        if not isinstance(schema, dict):
            raise RequestError(
                "Invalid 'text.format.schema': expected an object.", param="text.format.schema"
            )
        json_schema: dict[str, Any] = {"name": name, "schema": schema}
        for key in ("strict", "description"):
            if text_format.get(key) is not None:
                json_schema[key] = text_format[key]
        response_format = {"type": "json_schema", "json_schema": json_schema}
    else:
        lost.append(f"text.format ({kind})")
        return
    if not profile.supports_response_format:
        lost.append("text.format")
        return
    chat["response_format"] = response_format
    notes.convert(f"text.format {kind} sent as response_format")


def _add_reasoning_effort(
    chat: ChatRequest, reasoning: dict[str, Any], profile: BackendProfile, lost: list[str]
) -> None:
    for key, value in reasoning.items():
        if value is None or key == "context":  # context: how the client replays reasoning
            continue
        if key == "effort" and isinstance(value, str) and profile.supports_reasoning_effort:
            chat["reasoning_effort"] = value
        else:
            lost.append(f"reasoning.{key}")


# ---------------------------------------------------------------- messages

_IMAGE_DETAILS = frozenset({"low", "high", "auto"})
_MAX_LISTED_DESCRIPTION = 200

_OutputItem = FunctionCallOutputItem | CustomToolCallOutputItem | ToolSearchOutputItem
_OUTPUT_ITEM_CLASSES = frozenset({FunctionCallOutputItem, CustomToolCallOutputItem, ToolSearchOutputItem})
# Items and content parts are told apart by their exact class (``type(item) is
# MessageItem``), the classes parsing makes: isinstance on a pydantic model goes through
# its metaclass (~0.2 us), and a Codex history makes hundreds of such checks.


@dataclass(slots=True)
class _TurnCall:
    call_id: str
    upstream_id: str
    upstream_name: str
    index: int


@dataclass(slots=True)
class _ToolTurn:
    """The assistant message of one model turn that called tools; its tool messages
    are appended when the turn closes."""

    message: ChatMessage
    tool_calls: list[ChatToolCall]
    calls: list[_TurnCall] = field(default_factory=list)
    awaiting: set[str] = field(default_factory=set)  # calls whose output is further on
    accepts_calls: bool = True  # false once one of its outputs was passed


@dataclass(slots=True)
class _Call:
    """A call item in Chat terms, and the conversion that sending it as a function call is."""

    call_id: str
    namespace: str | None
    name: str
    arguments: str
    conversion: str | None


class _MessageBuilder:
    """Builds the Chat messages from the input items (§8.2).

    A first pass indexes which call ids have a call and where each call's output is; the
    walk then handles the items in order. Every state change happens in the ``_on_*``
    methods; ``_close_turn`` is the one place tool messages are written.
    """

    def __init__(
        self,
        request: ResponsesRequest,
        table: UpstreamToolTable,
        profile: BackendProfile,
        notes: _Notes,
    ) -> None:
        self._items = request.input_items()
        self._table = table
        self._profile = profile
        self._notes = notes
        self._system: list[str] = [request.instructions] if request.instructions else []
        self._messages: list[ChatMessage] = []
        self._turn: _ToolTurn | None = None
        self._reasoning: list[str] = []
        self._reasoning_at: list[str] = []
        self._called: set[str] = set()
        self._outputs: dict[str, tuple[int, _OutputItem]] = {}
        self._passed_outputs: set[str] = set()
        self._emitted_calls: set[str] = set()

    def build(self) -> list[ChatMessage]:
        calls = self._index_calls_and_outputs()
        for index, item in enumerate(self._items):
            call = calls[index]
            if call is not None:
                self._on_call(index, call)
            else:
                self._on_item(index, item)
        self._close_turn()
        self._drop_pending_reasoning()
        field_name = self._profile.reasoning_field
        if field_name is not None and self._profile.reasoning_on_every_assistant:
            for message in self._messages:
                if message.get("role") == "assistant":
                    cast("dict[str, Any]", message).setdefault(field_name, "")
        if not self._system:
            return self._messages
        return [{"role": "system", "content": "\n\n".join(self._system)}, *self._messages]

    def _index_calls_and_outputs(self) -> list[_Call | None]:
        """Note which call ids have a call and where each call's output is; the call each
        item makes (None for an item that is no call)."""
        calls: list[_Call | None] = []
        for index, item in enumerate(self._items):
            call = _call_of(item)
            calls.append(call)
            if call is not None:
                self._called.add(call.call_id)
            elif type(item) in _OUTPUT_ITEM_CLASSES:
                output = cast("_OutputItem", item)
                if output.call_id is not None:
                    self._outputs.setdefault(output.call_id, (index, output))
        return calls

    # -- one method per kind of item

    def _on_item(self, index: int, item: Item) -> None:
        """Any item but a call."""
        if type(item) is MessageItem:
            if item.role in ("system", "developer"):
                self._on_system(index, item)
            elif item.role == "assistant":
                self._on_assistant(index, item)
            elif item.role == "user":
                self._on_user(index, item)
            else:
                raise RequestError(
                    f"Invalid 'input[{index}].role': {item.role!r} is not user, assistant, system or developer.",
                    param=f"input[{index}].role",
                )
        elif type(item) is ReasoningItem:
            self._on_reasoning(index, item)
        elif type(item) in _OUTPUT_ITEM_CLASSES:
            self._on_output(index, cast("_OutputItem", item).call_id)
        elif type(item) is not AdditionalToolsItem:  # additional_tools only declares tools
            self._notes.warn(
                "input items skipped (no Chat Completions equivalent)",
                f"{item.type} at input[{index}]",
            )

    def _on_system(self, index: int, item: MessageItem) -> None:
        text = _text_only(item.content, f"input[{index}].content", self._notes)
        if text:
            self._system.append(text)
        self._notes.convert("system/developer messages merged into one leading system message")

    def _on_user(self, index: int, item: MessageItem) -> None:
        self._close_turn()
        self._drop_pending_reasoning()
        content = _user_content(item.content, f"input[{index}].content", self._notes)
        last = self._messages[-1] if self._messages else None
        if last is not None and last.get("role") == "user" and self._profile.merge_consecutive_user:
            last["content"] = _merge_user_content(last.get("content"), content)
            self._notes.convert("consecutive user messages merged")
        else:
            self._messages.append({"role": "user", "content": content})

    def _on_assistant(self, index: int, item: MessageItem) -> None:
        text = _assistant_text(item.content, f"input[{index}].content", self._notes)
        turn = self._turn
        if turn is not None and turn.awaiting:
            message = turn.message
            self._notes.convert(
                "assistant text between calls and their outputs moved before the calls"
            )
        else:
            self._close_turn()
            last = self._messages[-1] if self._messages else None
            if last is not None and last.get("role") == "assistant":
                message = last
                self._notes.convert("consecutive assistant messages merged")
            else:
                message = {"role": "assistant", "content": ""}
                self._messages.append(message)
        previous = message.get("content")
        message["content"] = _join_paragraphs(previous if isinstance(previous, str) else None, text)
        self._attach_reasoning(message)

    def _on_reasoning(self, index: int, item: ReasoningItem) -> None:
        if self._profile.reasoning_field is None:
            self._notes.warn("reasoning not sent (the backend takes none back)")
            return
        text = _reasoning_text(item, index, self._notes)
        if text:
            self._reasoning.append(text)
            self._reasoning_at.append(f"input[{index}]")

    def _on_call(self, index: int, call: _Call) -> None:
        if call.call_id in self._emitted_calls:
            self._notes.warn("calls with a repeated call_id dropped", f"input[{index}]")
            return
        self._emitted_calls.add(call.call_id)
        if call.conversion is not None:
            self._notes.convert(call.conversion)
        turn = self._turn
        if turn is not None and turn.accepts_calls:
            self._notes.convert("parallel calls merged into one assistant message")
        else:
            self._close_turn()
            last = self._messages[-1] if self._messages else None
            if last is not None and last.get("role") == "assistant":
                message = last  # the turn's text came first: the calls join it
            else:
                message = {"role": "assistant", "content": ""}
                self._messages.append(message)
            turn = self._turn = _ToolTurn(message, [])
            message["tool_calls"] = turn.tool_calls
        self._attach_reasoning(turn.message)
        upstream_id = upstream_call_id(call.call_id)
        upstream_name = self._table.upstream_name_of(call.namespace, call.name)
        turn.tool_calls.append(
            {
                "id": upstream_id,
                "type": "function",
                "function": {"name": upstream_name, "arguments": call.arguments},
            }
        )
        turn.calls.append(_TurnCall(call.call_id, upstream_id, upstream_name, index))
        if call.call_id not in self._passed_outputs:
            turn.awaiting.add(call.call_id)

    def _on_output(self, index: int, call_id: str | None) -> None:
        if call_id is None or call_id not in self._called:
            self._notes.warn(
                "tool outputs without a matching call dropped", f"input[{index}] ({call_id})"
            )
            return
        if self._outputs[call_id][0] != index:
            self._notes.warn(
                "repeated tool outputs for one call dropped", f"input[{index}] ({call_id})"
            )
            return
        self._passed_outputs.add(call_id)
        turn = self._turn
        if turn is not None and call_id in turn.awaiting:
            turn.awaiting.discard(call_id)
            turn.accepts_calls = False

    # -- shared steps

    def _close_turn(self) -> None:
        """Write the open turn's tool messages in call order, then the images they returned."""
        turn = self._turn
        if turn is None:
            return
        self._turn = None
        images: list[dict[str, Any]] = []
        last_output_index = -1
        for call in turn.calls:
            entry = self._outputs.get(call.call_id)
            if entry is None:
                content = "aborted"
                self._notes.convert('missing tool outputs replaced by "aborted"')
            else:
                output_index, output = entry
                if (
                    output_index < last_output_index
                    or output_index < call.index
                    or call.call_id not in self._passed_outputs
                ):
                    self._notes.convert("tool outputs reordered to follow their calls")
                last_output_index = output_index
                content, call_images = self._tool_output(output_index, output)
                if call_images:
                    images.append(
                        {
                            "type": "text",
                            "text": f"Image output of tool call {call.upstream_id} ({call.upstream_name}):",
                        }
                    )
                    images.extend(call_images)
            self._messages.append(
                {"role": "tool", "tool_call_id": call.upstream_id, "content": content}
            )
        if images:
            self._messages.append({"role": "user", "content": images})
            self._notes.convert("tool output images sent in a user message after the tool messages")

    def _tool_output(self, index: int, output: _OutputItem) -> tuple[str, list[dict[str, Any]]]:
        if type(output) is ToolSearchOutputItem:
            return _loaded_tools_listing(output.tools, self._table), []
        output = cast("FunctionCallOutputItem | CustomToolCallOutputItem", output)
        if isinstance(output.output, str):
            return output.output, []
        where = f"input[{index}].output"
        texts: list[str] = []
        images: list[dict[str, Any]] = []
        for part_index, part in enumerate(output.output):
            if type(part) is InputText or type(part) is OutputText:
                texts.append(part.text)
            elif type(part) is InputImage:
                images.append(_image_part(part, f"{where}[{part_index}]"))
            else:
                self._notes.warn(
                    "tool output parts dropped (tool messages take text and images only)",
                    f"{part.type} at {where}[{part_index}]",
                )
        text = "\n".join(texts)
        if not text and images:
            text = f"[{len(images)} image(s) attached in the next message]"
        return text, images

    def _attach_reasoning(self, message: ChatMessage) -> None:
        field_name = self._profile.reasoning_field
        if not self._reasoning or field_name is None:
            return
        text = "\n\n".join(self._reasoning)
        self._reasoning.clear()
        self._reasoning_at.clear()
        fields = cast("dict[str, Any]", message)
        fields[field_name] = _join_paragraphs(fields.get(field_name), text)
        self._notes.convert(f"reasoning sent as {field_name}")

    def _drop_pending_reasoning(self) -> None:
        for where in self._reasoning_at:
            self._notes.warn("reasoning without a following assistant message dropped", where)
        self._reasoning.clear()
        self._reasoning_at.clear()


def _call_of(item: Item) -> _Call | None:
    """The call an item makes, in Chat terms, or None if it is not a client-side call."""
    if type(item) is FunctionCallItem:
        return _Call(item.call_id, item.namespace, item.name, item.arguments or "{}", None)
    if type(item) is CustomToolCallItem:
        arguments = orjson.dumps({"input": item.input}).decode()
        return _Call(
            item.call_id, item.namespace, item.name, arguments, "custom tool calls sent as function calls"
        )
    if type(item) is ToolSearchCallItem and item.execution == "client" and item.call_id:
        if isinstance(item.arguments, str):
            arguments = item.arguments or "{}"
        else:
            arguments = orjson.dumps(item.arguments if item.arguments is not None else {}).decode()
        return _Call(item.call_id, None, "tool_search", arguments, "tool_search calls sent as function calls")
    return None


def _reasoning_text(item: ReasoningItem, index: int, notes: _Notes) -> str:
    """The item's raw reasoning, else the text in toolwire's envelope, else its summary."""
    sealed: str | None = None
    if item.encrypted_content:
        sealed = open_reasoning(item.encrypted_content)
        if sealed is None:
            notes.warn("encrypted_content not made by toolwire dropped", f"input[{index}]")
    content = "".join(part.text for part in item.content or () if type(part) is ReasoningText)
    if content:
        return content
    if sealed:
        return sealed
    return "\n\n".join(part.text for part in item.summary if type(part) is SummaryText)


def _loaded_tools_listing(specs: Iterable[ToolSpec], table: UpstreamToolTable) -> str:
    """A compact JSON list of the tools a tool search loaded: upstream name and description."""
    listed: list[dict[str, str]] = []
    pending: list[tuple[str | None, ToolSpec]] = [(None, spec) for spec in specs]
    pending.reverse()
    while pending:
        namespace, spec = pending.pop()
        if type(spec) is NamespaceTool:
            pending.extend((spec.name, inner) for inner in reversed(spec.tools))
        elif type(spec) is FunctionTool or type(spec) is CustomTool:
            entry = {"name": table.upstream_name_of(namespace, spec.name)}
            if spec.description:
                entry["description"] = _first_line(spec.description)
            listed.append(entry)
    return orjson.dumps({"loaded_tools": listed}).decode()


def _first_line(text: str) -> str:
    """The first non-blank line (Codex's descriptions often start with a line break).

    Found without splitting the whole text (a description can be pages long): leading
    whitespace includes every blank line, and the line runs to the next line boundary
    that ``str.splitlines`` knows.
    """
    stripped = text.lstrip()
    boundary = _LINE_BOUNDARY.search(stripped)
    line = (stripped if boundary is None else stripped[: boundary.start()]).rstrip()
    if len(line) <= _MAX_LISTED_DESCRIPTION:
        return line
    return line[: _MAX_LISTED_DESCRIPTION - 1] + "…"


_LINE_BOUNDARY = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


# ---------------------------------------------------------------- content parts


def _user_content(
    content: str | Sequence[ContentPart], where: str, notes: _Notes
) -> str | list[dict[str, Any]]:
    """A user message's content: a string, or text / image_url / file parts."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    only_text = True
    for index, part in enumerate(content):
        if type(part) is InputText or type(part) is OutputText:
            parts.append({"type": "text", "text": part.text})
        elif type(part) is Refusal:
            parts.append({"type": "text", "text": part.refusal})
        elif type(part) is InputImage:
            parts.append(_image_part(part, f"{where}[{index}]"))
            only_text = False
        elif type(part) is InputFile:
            parts.append(_file_part(part, f"{where}[{index}]"))
            only_text = False
        elif part.type == "input_audio" and isinstance(
            audio := (part.model_extra or {}).get("input_audio"), dict
        ):
            parts.append({"type": "input_audio", "input_audio": audio})
            only_text = False
        else:
            notes.warn(
                "message parts dropped (no Chat Completions equivalent)",
                f"{part.type} at {where}[{index}]",
            )
    if only_text:
        return "\n\n".join(part["text"] for part in parts)
    return parts


def _merge_user_content(
    first: str | list[dict[str, Any]] | None, second: str | list[dict[str, Any]]
) -> str | list[dict[str, Any]]:
    if isinstance(first, str | None) and isinstance(second, str):
        return _join_paragraphs(first, second)
    return _as_parts(first) + _as_parts(second)


def _as_parts(content: str | list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if content else []


def _assistant_text(content: str | Sequence[ContentPart], where: str, notes: _Notes) -> str:
    """An assistant message's text: its output_text (and refusal) parts, concatenated."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for index, part in enumerate(content):
        if type(part) is OutputText or type(part) is InputText:
            texts.append(part.text)
        elif type(part) is Refusal:
            texts.append(part.refusal)
        else:
            notes.warn(
                "assistant message parts dropped (text only)", f"{part.type} at {where}[{index}]"
            )
    return "".join(texts)


def _text_only(content: str | Sequence[ContentPart], where: str, notes: _Notes) -> str:
    """A system/developer message's text; its parts joined with blank lines."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for index, part in enumerate(content):
        if type(part) is InputText or type(part) is OutputText:
            texts.append(part.text)
        else:
            notes.warn(
                "system message parts dropped (text only)", f"{part.type} at {where}[{index}]"
            )
    return _join_paragraphs(*texts)


def _image_part(part: InputImage, where: str) -> dict[str, Any]:
    if not part.image_url:
        raise RequestError(
            f"Invalid '{where}': an input_image needs an image_url; a file_id cannot be sent "
            "(Chat Completions has no file ids).",
            param=where,
        )
    image_url: dict[str, Any] = {"url": part.image_url}
    if part.detail in _IMAGE_DETAILS:
        image_url["detail"] = part.detail
    return {"type": "image_url", "image_url": image_url}


def _file_part(part: InputFile, where: str) -> dict[str, Any]:
    if not part.file_data:
        raise RequestError(
            f"Invalid '{where}': an input_file needs file_data; a file_id or file_url cannot be sent "
            "(Chat Completions has no file ids or URLs).",
            param=where,
        )
    file: dict[str, Any] = {"file_data": part.file_data}
    if part.filename:
        file["filename"] = part.filename
    return {"type": "file", "file": file}
