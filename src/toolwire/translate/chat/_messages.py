"""The Chat messages of a translated request, from the Responses input items (§8.2).

* ``instructions`` and every system/developer message become ONE leading system message;
  no ``developer`` role goes upstream.
* The calls of one model turn become ONE assistant message with several ``tool_calls``,
  directly followed by their ``tool`` messages in call order: outputs are re-ordered to
  their calls, a call without output gets ``"aborted"``, an output without call is
  dropped, assistant text found between a call and its output moves before the calls.
  Images a tool returned reach the model in one user message after the tool messages.
* Reasoning items ride on the following assistant message, in the backend's field
  (the text sealed in toolwire's envelope is opened; a foreign blob is never sent).
* A tool search's output lists what it loaded by the names the backend calls the tools.

The builder walks the items, then finishes (closes the open turn, merges the system
texts). Its state after a walk can be saved (``SavedBuild``) and resumed by the builder
of a request whose items continue the same ones: it then walks only the new items
(``_history``). A save is refused when the walk decided something on the absence of an
item that a later one could supply (an output whose call has not come, a turn closed
before its outputs): such decisions are only right once every item is known. A save also
serializes the messages that can no longer change, once (``SerializedMessages``): the
request that resumes it sends them as those bytes instead of serializing them again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import orjson

from toolwire.errors import RequestError
from toolwire.protocol import (
    AdditionalToolsItem,
    ChatMessage,
    ChatToolCall,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputImage,
    InputText,
    Item,
    MessageItem,
    OutputText,
    ReasoningItem,
    ReasoningText,
    ResponsesRequest,
    SummaryText,
    ToolSearchCallItem,
    ToolSearchOutputItem,
)

from .._notes import Notes
from .._tools import (
    join_paragraphs,
    loaded_tools_listing,
    tool_search_arguments_text,
    wrap_raw_input,
)
from ..reasoning import open_reasoning
from ..tool_table import UpstreamToolTable, upstream_call_id
from ._content import assistant_text, image_part, merge_user_content, system_text, user_content
from .profile import BackendProfile

_MAX_RUNS = 16
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


@dataclass(frozen=True, slots=True)
class SavedBuild:
    """A builder's state after walking ``walked`` items, before finishing: what the builder
    of a request continuing those items resumes from. Shared and read-only: a resumed
    builder copies what it changes (the last message may still change, the rest never).
    """

    walked: int
    system: tuple[str, ...]
    messages: tuple[ChatMessage, ...]
    defaulted: int  # the first ``defaulted`` messages have every field ``finish`` adds
    json: tuple[bytes, ...]  # the first ``json_count`` messages serialized: runs, each comma-joined
    json_count: int
    turn: _ToolTurn | None  # its message is the last of ``messages``
    reasoning: tuple[str, ...]
    reasoning_at: tuple[str, ...]
    called: set[str]
    outputs: dict[str, tuple[int, _OutputItem]]
    passed_outputs: set[str]
    emitted_calls: set[str]
    notes: Notes


@dataclass(frozen=True, slots=True)
class SerializedMessages:
    """``messages[first : first + count]`` of a translated request, serialized already:
    ``runs`` of them, each comma-joined (what ``orjson.dumps`` writes between the brackets)."""

    first: int
    count: int
    runs: tuple[bytes, ...]

    def for_the_wire(self, messages: list[ChatMessage]) -> list[Any]:
        """``messages`` with the serialized ones replaced by their runs (``orjson.Fragment``):
        orjson writes the same bytes, copying the runs instead of serializing again."""
        return [*messages[: self.first], *map(orjson.Fragment, self.runs), *messages[self.first + self.count :]]


@dataclass(slots=True)
class _Call:
    """A call item in Chat terms, and the conversion that sending it as a function call is."""

    call_id: str
    namespace: str | None
    name: str
    arguments: str
    conversion: str | None


class MessageBuilder:
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
        notes: Notes,
        saved: SavedBuild | None = None,
    ) -> None:
        """``saved``: the state after walking the first ``saved.walked`` of the request's
        items, for this table and profile, with ``notes`` empty (``_history`` checks)."""
        self._items = request.input_items()
        self._table = table
        self._profile = profile
        self._notes = notes
        self._walked = 0
        self._defaulted = 0
        self._json: tuple[bytes, ...] = ()  # the first _json_count messages, serialized
        self._json_count = 0
        # False once the walk decided something on an item's absence (see the module).
        self._savable = True
        self._system: list[str] = [request.instructions] if request.instructions else []
        self._messages: list[ChatMessage] = []
        self._turn: _ToolTurn | None = None
        self._reasoning: list[str] = []
        self._reasoning_at: list[str] = []
        self._called: set[str] = set()
        self._outputs: dict[str, tuple[int, _OutputItem]] = {}
        self._passed_outputs: set[str] = set()
        self._emitted_calls: set[str] = set()
        if saved is not None:
            self._resume(saved)

    def build(self) -> list[ChatMessage]:
        self.walk()
        return self.finish()

    def walk(self) -> None:
        """Handle the items not walked yet, in order."""
        start = self._walked
        calls = self._index_calls_and_outputs(start)
        for index in range(start, len(self._items)):
            call = calls[index - start]
            if call is not None:
                self._on_call(index, call)
            else:
                self._on_item(index, self._items[index])
        self._walked = len(self._items)

    def finish(self) -> list[ChatMessage]:
        """The messages: the open turn closed, the system texts in one leading message."""
        self._close_turn()
        self._drop_pending_reasoning()
        self._add_default_fields(len(self._messages))
        if not self._system:
            return self._messages
        return [{"role": "system", "content": "\n\n".join(self._system)}, *self._messages]

    def save(self) -> SavedBuild | None:
        """The state after ``walk``, before ``finish``, for a request continuing these items;
        None if a later item could change what the walk decided."""
        if not self._savable:
            return None
        messages = self._messages
        turn = self._turn
        stable = max(0, len(messages) - 1)
        self._add_default_fields(stable)  # what finish would add to messages that no longer change
        if stable > self._json_count:  # and they no longer change: serialized once for all
            self._json = (*self._json, orjson.dumps(messages[self._json_count : stable])[1:-1])
            self._json_count = stable
            if len(self._json) > _MAX_RUNS:  # one fragment costs what copying ~50 kB does
                self._json = (b",".join(self._json),)
        if messages:
            last = _own_copy(messages[-1])
            messages = [*messages[:-1], last]
            if turn is not None:
                turn = _ToolTurn(last, last["tool_calls"], list(turn.calls), set(turn.awaiting), turn.accepts_calls)
        return SavedBuild(
            walked=self._walked,
            system=tuple(self._system),
            messages=tuple(messages),
            defaulted=stable,
            json=self._json,
            json_count=self._json_count,
            turn=turn,
            reasoning=tuple(self._reasoning),
            reasoning_at=tuple(self._reasoning_at),
            # finish only reads these: handed over as they are
            called=self._called,
            outputs=self._outputs,
            passed_outputs=self._passed_outputs,
            emitted_calls=self._emitted_calls,
            notes=self._notes.copy(),
        )

    def _resume(self, saved: SavedBuild) -> None:
        self._walked = saved.walked
        self._defaulted = saved.defaulted
        self._json, self._json_count = saved.json, saved.json_count
        self._system = list(saved.system)
        self._messages = list(saved.messages)
        if self._messages:
            last = self._messages[-1] = _own_copy(self._messages[-1])
            if saved.turn is not None:
                turn = saved.turn
                self._turn = _ToolTurn(last, last["tool_calls"], list(turn.calls), set(turn.awaiting), turn.accepts_calls)
        self._reasoning = list(saved.reasoning)
        self._reasoning_at = list(saved.reasoning_at)
        self._called = set(saved.called)
        self._outputs = dict(saved.outputs)
        self._passed_outputs = set(saved.passed_outputs)
        self._emitted_calls = set(saved.emitted_calls)
        self._notes.extend(saved.notes)

    def serialized(self) -> SerializedMessages | None:
        """After ``finish``: what of its messages is serialized already, if anything."""
        if not self._json:
            return None
        return SerializedMessages(1 if self._system else 0, self._json_count, self._json)

    def _add_default_fields(self, up_to: int) -> None:
        """Give the messages before ``up_to`` (not done yet) the fields every assistant
        message carries for this backend."""
        field_name = self._profile.reasoning_field
        if field_name is not None and self._profile.reasoning_on_every_assistant:
            for message in self._messages[self._defaulted : up_to]:
                if message.get("role") == "assistant":
                    cast("dict[str, Any]", message).setdefault(field_name, "")
        self._defaulted = max(self._defaulted, up_to)

    def _index_calls_and_outputs(self, start: int) -> list[_Call | None]:
        """Note which call ids have a call and where each call's output is; the call each
        item from ``start`` on makes (None for an item that is no call)."""
        calls: list[_Call | None] = []
        items = self._items
        for index in range(start, len(items)):
            item = items[index]
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
        text = system_text(item.content, f"input[{index}].content", self._notes)
        if text:
            self._system.append(text)
        self._notes.convert("system/developer messages merged into one leading system message")

    def _on_user(self, index: int, item: MessageItem) -> None:
        self._close_turn()
        self._drop_pending_reasoning()
        content = user_content(item.content, f"input[{index}].content", self._notes)
        last = self._messages[-1] if self._messages else None
        if last is not None and last.get("role") == "user" and self._profile.merge_consecutive_user:
            last["content"] = merge_user_content(last.get("content"), content)
            self._notes.convert("consecutive user messages merged")
        else:
            self._messages.append({"role": "user", "content": content})

    def _on_assistant(self, index: int, item: MessageItem) -> None:
        text = assistant_text(item.content, f"input[{index}].content", self._notes)
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
        message["content"] = join_paragraphs(previous if isinstance(previous, str) else None, text)
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
            if call_id is not None:
                self._savable = False  # its call may come later
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
                self._savable = False  # its output may come later
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
            return loaded_tools_listing(output.tools, self._loaded_tool_name), []
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
                images.append(image_part(part, f"{where}[{part_index}]"))
            else:
                self._notes.warn(
                    "tool output parts dropped (tool messages take text and images only)",
                    f"{part.type} at {where}[{part_index}]",
                )
        text = "\n".join(texts)
        if not text and images:
            text = f"[{len(images)} image(s) attached in the next message]"
        return text, images

    def _loaded_tool_name(self, namespace: str | None, name: str) -> tuple[None, str]:
        """A loaded tool's flat upstream name (no namespace: Chat has none)."""
        return None, self._table.upstream_name_of(namespace, name)

    def _attach_reasoning(self, message: ChatMessage) -> None:
        field_name = self._profile.reasoning_field
        if not self._reasoning or field_name is None:
            return
        text = "\n\n".join(self._reasoning)
        self._reasoning.clear()
        self._reasoning_at.clear()
        fields = cast("dict[str, Any]", message)
        fields[field_name] = join_paragraphs(fields.get(field_name), text)
        self._notes.convert(f"reasoning sent as {field_name}")

    def _drop_pending_reasoning(self) -> None:
        for where in self._reasoning_at:
            self._notes.warn("reasoning without a following assistant message dropped", where)
        self._reasoning.clear()
        self._reasoning_at.clear()


def _own_copy(message: ChatMessage) -> ChatMessage:
    """A copy of ``message`` that can change without changing it (its tool calls too)."""
    copy = cast("dict[str, Any]", dict(message))
    if "tool_calls" in copy:
        copy["tool_calls"] = list(copy["tool_calls"])
    return cast("ChatMessage", copy)


def _call_of(item: Item) -> _Call | None:
    """The call an item makes, in Chat terms, or None if it is not a client-side call."""
    if type(item) is FunctionCallItem:
        return _Call(item.call_id, item.namespace, item.name, item.arguments or "{}", None)
    if type(item) is CustomToolCallItem:
        return _Call(
            item.call_id,
            item.namespace,
            item.name,
            wrap_raw_input(item.input),
            "custom tool calls sent as function calls",
        )
    if type(item) is ToolSearchCallItem and item.execution == "client" and item.call_id:
        return _Call(
            item.call_id,
            None,
            "tool_search",
            tool_search_arguments_text(item),
            "tool_search calls sent as function calls",
        )
    return None


def _reasoning_text(item: ReasoningItem, index: int, notes: Notes) -> str:
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
