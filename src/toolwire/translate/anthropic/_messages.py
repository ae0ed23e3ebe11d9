"""The ``system`` and ``messages`` of a Messages request, from the Responses input items.

The Messages API has rules that cost a 400 when broken; the builder keeps them all:

* ``instructions`` and every system/developer message become the ``system`` text blocks;
  the messages are user and assistant only, alternating (same-role neighbours merged),
  the first one a user message, none empty;
* the calls of one model turn are ``tool_use`` blocks of ONE assistant message, and the
  very next user message starts with their ``tool_result`` blocks, in call order:
  outputs are moved to their calls, a call without output gets ``"aborted"``, an output
  without call is dropped, assistant text found between a call and its output moves
  before the calls; images a tool returned stay inside its ``tool_result``;
* a reasoning item sealed by toolwire from an Anthropic answer carries its ``thinking`` /
  ``redacted_thinking`` blocks, signature included: they go back unchanged, in their
  place in the assistant message (the API rejects a tool loop whose thinking changed);
  reasoning without such blocks (from another backend) cannot be signed and is dropped;
* a call's ``input`` is an object: a function's JSON arguments, a custom tool's raw text
  as ``{"input": text}``, a tool search's arguments; a tool search's output lists what it
  loaded by the names the backend calls the tools.

Every state change happens in the ``_on_*`` methods; ``_close_turn`` is the one place
tool results are written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import orjson

from toolwire.errors import RequestError
from toolwire.protocol import (
    AdditionalToolsItem,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    Item,
    MessageItem,
    ReasoningItem,
    ResponsesRequest,
    ToolSearchCallItem,
    ToolSearchOutputItem,
    WebSearchCallItem,
)

from .._notes import Notes
from .._tools import join_paragraphs, loaded_tools_listing
from ..reasoning import open_reasoning_blocks
from ..tool_table import UpstreamToolTable, upstream_call_id
from ._content import text_block, texts, tool_result_content, user_blocks
from .profile import MessagesProfile

JSON = dict[str, Any]
_OutputItem = FunctionCallOutputItem | CustomToolCallOutputItem | ToolSearchOutputItem
_OUTPUT_ITEM_CLASSES = frozenset({FunctionCallOutputItem, CustomToolCallOutputItem, ToolSearchOutputItem})
_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
CONTINUED = "(The conversation continues from an earlier assistant turn.)"


@dataclass(slots=True)
class _Call:
    """A call item as a ``tool_use``, and the conversion sending it so is."""

    call_id: str
    namespace: str | None
    name: str
    input: JSON
    conversion: str | None


@dataclass(slots=True)
class _TurnCall:
    call_id: str
    upstream_id: str
    index: int


@dataclass(slots=True)
class _ToolTurn:
    """The assistant message of one model turn that called tools."""

    message: JSON
    calls: list[_TurnCall] = field(default_factory=list)
    awaiting: set[str] = field(default_factory=set)  # calls whose output is further on
    accepts_calls: bool = True  # false once one of its outputs was passed


class MessageBuilder:
    """Builds ``system`` and ``messages`` from the input items.

    A first pass indexes which call ids have a call and where each call's output is;
    the walk then handles the items in order.
    """

    def __init__(
        self,
        request: ResponsesRequest,
        table: UpstreamToolTable,
        profile: MessagesProfile,
        notes: Notes,
    ) -> None:
        self._items = request.input_items()
        self._table = table
        self._profile = profile
        self._notes = notes
        self.system: list[str] = [request.instructions] if request.instructions else []
        self.messages: list[JSON] = []
        self._turn: _ToolTurn | None = None
        self._reasoning: list[JSON] = []  # blocks waiting for the assistant content they precede
        self._reasoning_at: list[str] = []
        self._called: set[str] = set()
        self._outputs: dict[str, tuple[int, _OutputItem]] = {}
        self._passed_outputs: set[str] = set()
        self._emitted_calls: set[str] = set()

    def build(self) -> list[JSON]:
        calls = self._index_calls_and_outputs()
        for index, item in enumerate(self._items):
            call = calls[index]
            if call is not None:
                self._on_call(index, call)
            else:
                self._on_item(index, item)
        self._close_turn()
        self._drop_pending_reasoning()
        return self._well_formed()

    def _index_calls_and_outputs(self) -> list[_Call | None]:
        calls: list[_Call | None] = []
        for index, item in enumerate(self._items):
            call = self._call_of(index, item)
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
        if type(item) is MessageItem:
            if item.role in ("system", "developer"):
                self.system.extend(texts(item.content, f"input[{index}].content", self._notes, "system message parts"))
                self._notes.convert("system/developer messages sent as the system prompt")
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
        elif type(item) is WebSearchCallItem:
            self._notes.convert("web_search_call items not sent back (their results are in the answer)")
        elif type(item) is not AdditionalToolsItem:  # additional_tools only declares tools
            self._notes.warn("input items skipped (no Messages API equivalent)", f"{item.type} at input[{index}]")

    def _on_user(self, index: int, item: MessageItem) -> None:
        self._close_turn()
        self._drop_pending_reasoning()
        blocks = user_blocks(item.content, f"input[{index}].content", self._profile, self._notes)
        if blocks:
            self._message("user")["content"].extend(blocks)

    def _on_assistant(self, index: int, item: MessageItem) -> None:
        found = texts(item.content, f"input[{index}].content", self._notes, "assistant message parts")
        text = "".join(found)
        turn = self._turn
        if turn is not None and turn.awaiting:
            message = turn.message
            first_call = next(i for i, b in enumerate(message["content"]) if b["type"] == "tool_use")
            blocks = [*self._take_reasoning(), *([text_block(text)] if text else [])]
            message["content"][first_call:first_call] = blocks
            self._notes.convert("assistant text between calls and their outputs moved before the calls")
            return
        self._close_turn()
        if not text and not self._reasoning:
            return
        message = self._message("assistant")
        message["content"].extend(self._take_reasoning())
        if text:
            last = message["content"][-1] if message["content"] else None
            if last is not None and last["type"] == "text":
                last["text"] = join_paragraphs(last["text"], text)
            else:
                message["content"].append(text_block(text))

    def _on_reasoning(self, index: int, item: ReasoningItem) -> None:
        blocks = open_reasoning_blocks(item.encrypted_content)
        if blocks is None:
            self._notes.warn(
                "reasoning not sent (only thinking this backend signed can go back)", f"input[{index}]"
            )
            return
        kept = [block for block in blocks if block.get("type") in _THINKING_TYPES]
        if not self._profile.redacted_thinking:
            kept = [block for block in kept if block.get("type") != "redacted_thinking"]
            if len(kept) < len(blocks):
                self._notes.warn("redacted_thinking not sent (the backend rejects it)", f"input[{index}]")
        if kept:
            self._reasoning.extend(kept)
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
            turn = self._turn = _ToolTurn(self._message("assistant"))
        upstream_id = upstream_call_id(call.call_id)
        turn.message["content"].extend(self._take_reasoning())
        turn.message["content"].append(
            {
                "type": "tool_use",
                "id": upstream_id,
                "name": self._table.upstream_name_of(call.namespace, call.name),
                "input": call.input,
            }
        )
        turn.calls.append(_TurnCall(call.call_id, upstream_id, index))
        if call.call_id not in self._passed_outputs:
            turn.awaiting.add(call.call_id)

    def _on_output(self, index: int, call_id: str | None) -> None:
        if call_id is None or call_id not in self._called:
            self._notes.warn("tool outputs without a matching call dropped", f"input[{index}] ({call_id})")
            return
        if self._outputs[call_id][0] != index:
            self._notes.warn("repeated tool outputs for one call dropped", f"input[{index}] ({call_id})")
            return
        self._passed_outputs.add(call_id)
        turn = self._turn
        if turn is not None and call_id in turn.awaiting:
            turn.awaiting.discard(call_id)
            turn.accepts_calls = False

    # -- shared steps

    def _message(self, role: str) -> JSON:
        """The message to add ``role`` content to: the last one if it has that role."""
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == role:
            return last
        message: JSON = {"role": role, "content": []}
        self.messages.append(message)
        return message

    def _close_turn(self) -> None:
        """The open turn's ``tool_result`` blocks, in call order, opening the next user message."""
        turn = self._turn
        if turn is None:
            return
        self._turn = None
        results: list[JSON] = []
        last_output_index = -1
        for call in turn.calls:
            result: JSON = {"type": "tool_result", "tool_use_id": call.upstream_id}
            entry = self._outputs.get(call.call_id)
            if entry is None:
                result["content"] = "aborted"
                self._notes.convert('missing tool outputs replaced by "aborted"')
            else:
                output_index, output = entry
                if output_index < last_output_index or output_index < call.index or call.call_id not in self._passed_outputs:
                    self._notes.convert("tool outputs reordered to follow their calls")
                last_output_index = output_index
                content = self._tool_output(output_index, output)
                if content:  # an empty result is sent without content: empty text is a 400
                    result["content"] = content
            results.append(result)
        self.messages.append({"role": "user", "content": results})

    def _tool_output(self, index: int, output: _OutputItem) -> str | list[JSON]:
        if type(output) is ToolSearchOutputItem:
            return loaded_tools_listing(output.tools, self._loaded_tool_name)
        output = cast("FunctionCallOutputItem | CustomToolCallOutputItem", output)
        return tool_result_content(output.output, f"input[{index}].output", self._profile, self._notes)

    def _loaded_tool_name(self, namespace: str | None, name: str) -> tuple[None, str]:
        return None, self._table.upstream_name_of(namespace, name)

    def _take_reasoning(self) -> list[JSON]:
        blocks, self._reasoning = self._reasoning, []
        self._reasoning_at.clear()
        return blocks

    def _drop_pending_reasoning(self) -> None:
        for where in self._reasoning_at:
            self._notes.warn("reasoning without a following assistant message dropped", where)
        self._reasoning.clear()
        self._reasoning_at.clear()

    def _well_formed(self) -> list[JSON]:
        """The messages without empty ones, same roles merged, starting with a user message."""
        messages: list[JSON] = []
        for message in self.messages:
            if not message["content"]:
                continue
            if messages and messages[-1]["role"] == message["role"]:
                messages[-1]["content"].extend(message["content"])
            else:
                messages.append(message)
        if messages and messages[0]["role"] != "user":
            messages.insert(0, {"role": "user", "content": [text_block(CONTINUED)]})
            self._notes.convert("a user message put first (the Messages API starts with one)")
        return messages

    # -- calls

    def _call_of(self, index: int, item: Item) -> _Call | None:
        """The ``tool_use`` an item makes, or None if it is not a client-side call."""
        if type(item) is FunctionCallItem:
            return _Call(item.call_id, item.namespace, item.name, self._input_object(index, item.arguments), None)
        if type(item) is CustomToolCallItem:
            return _Call(
                item.call_id, item.namespace, item.name, {"input": item.input}, "custom tool calls sent as tool_use"
            )
        if type(item) is ToolSearchCallItem and item.execution == "client" and item.call_id:
            arguments = item.arguments
            if isinstance(arguments, str):
                arguments = self._input_object(index, arguments)
            return _Call(
                item.call_id,
                None,
                "tool_search",
                arguments if isinstance(arguments, dict) else {},
                "tool_search calls sent as tool_use",
            )
        return None

    def _input_object(self, index: int, arguments: str) -> JSON:
        """A call's JSON arguments as the object ``tool_use.input`` must be."""
        if not arguments.strip():
            return {}
        try:
            value = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return value
        self._notes.warn("call arguments that are not a JSON object sent as {\"arguments\": text}", f"input[{index}]")
        return {"arguments": arguments}
