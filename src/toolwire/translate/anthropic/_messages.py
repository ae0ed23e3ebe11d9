"""The ``system`` and ``messages`` of a Messages request, from the Responses input items.

The walk of the items, and how calls and outputs pair, is ``ConversationWalker``'s
(``.._conversation``); this module renders it as the Messages API wants it. The API has
rules that cost a 400 when broken; the builder keeps them all:

* ``instructions`` and every system/developer message become the ``system`` text blocks;
  the messages are user and assistant only, alternating (same-role neighbours merged),
  the first one a user message, none empty;
* the calls of one model turn are ``tool_use`` blocks of ONE assistant message, and the
  very next user message starts with their ``tool_result`` blocks, in call order
  (``"aborted"`` for a call without output); images a tool returned stay inside its
  ``tool_result``; assistant text found between a call and its output goes before the
  ``tool_use`` blocks;
* a reasoning item sealed by toolwire from an Anthropic answer carries its ``thinking`` /
  ``redacted_thinking`` blocks, signature included: they go back unchanged, in their
  place in the assistant message (the API rejects a tool loop whose thinking changed);
  reasoning without such blocks (from another backend) cannot be signed and is dropped;
* a call's ``input`` is an object: a function's JSON arguments, a custom tool's raw text
  as ``{"input": text}``, a tool search's arguments; a tool search's output lists what it
  loaded by the names the backend calls the tools.
"""

from __future__ import annotations

from typing import Any, cast

import orjson

from toolwire.protocol import (
    CustomToolCallOutputItem,
    FunctionCallOutputItem,
    Item,
    MessageItem,
    ReasoningItem,
    ResponsesRequest,
    ToolSearchCallItem,
    ToolSearchOutputItem,
    WebSearchCallItem,
)

from .._conversation import ConversationWalker, OutputItem, Result, part_texts
from .._notes import Notes
from .._tools import join_paragraphs
from ..reasoning import open_reasoning_blocks
from ..tool_table import UpstreamToolTable
from ._content import text_block, tool_result_content, user_blocks
from .profile import MessagesProfile

JSON = dict[str, Any]
_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
CONTINUED = "(The conversation continues from an earlier assistant turn.)"


class MessageBuilder(ConversationWalker[JSON, JSON, JSON]):
    """Builds ``system`` and ``messages`` from the input items: a call's arguments are the
    ``tool_use`` input object, pending reasoning is thinking blocks."""

    CUSTOM_CALLS_SENT_AS = "custom tool calls sent as tool_use"
    TOOL_SEARCH_CALLS_SENT_AS = "tool_search calls sent as tool_use"

    def __init__(
        self,
        request: ResponsesRequest,
        table: UpstreamToolTable,
        profile: MessagesProfile,
        notes: Notes,
    ) -> None:
        super().__init__(request, table, notes)
        self._profile = profile

    @property
    def system(self) -> list[str]:
        """The system texts, each a ``system`` block (after ``build``)."""
        return self._system

    def build(self) -> list[JSON]:
        self.walk()
        self._end_walk()
        return self._well_formed()

    # -- calls' arguments: the tool_use input object

    def _function_arguments(self, index: int, arguments: str) -> JSON:
        return self._input_object(index, arguments)

    def _custom_arguments(self, text: str) -> JSON:
        return {"input": text}

    def _tool_search_arguments(self, index: int, item: ToolSearchCallItem) -> JSON:
        arguments = item.arguments
        if isinstance(arguments, str):
            arguments = self._input_object(index, arguments)
        return arguments if isinstance(arguments, dict) else {}

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

    # -- items

    def _on_system(self, index: int, item: MessageItem) -> None:
        self._system.extend(part_texts(item.content, f"input[{index}].content", self._notes, "system message parts"))
        self._notes.convert("system/developer messages sent as the system prompt")

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

    def _on_other_item(self, index: int, item: Item) -> None:
        if type(item) is WebSearchCallItem:
            self._notes.convert("web_search_call items not sent back (their results are in the answer)")
        else:
            self._notes.warn("input items skipped (no Messages API equivalent)", f"{item.type} at input[{index}]")

    def _add_user(self, index: int, item: MessageItem) -> None:
        blocks = user_blocks(item.content, f"input[{index}].content", self._profile, self._notes)
        if blocks:
            self._message("user")["content"].extend(blocks)

    def _add_assistant_text(self, text: str) -> None:
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

    def _add_text_before_calls(self, message: JSON, text: str) -> None:
        first_call = next(i for i, block in enumerate(message["content"]) if block["type"] == "tool_use")
        message["content"][first_call:first_call] = [*self._take_reasoning(), *([text_block(text)] if text else [])]

    def _call_message(self) -> JSON:
        return self._message("assistant")

    def _add_call(self, message: JSON, upstream_id: str, upstream_name: str, arguments: JSON) -> None:
        message["content"].extend(self._take_reasoning())
        message["content"].append({"type": "tool_use", "id": upstream_id, "name": upstream_name, "input": arguments})

    def _write_results(self, results: list[Result]) -> None:
        """The turn's ``tool_result`` blocks, in call order, opening the next user message."""
        blocks: list[JSON] = []
        for call, output_index, output in results:
            result: JSON = {"type": "tool_result", "tool_use_id": call.upstream_id}
            if output is None:
                result["content"] = "aborted"
            else:
                content = self._tool_output(output_index, output)
                if content:  # an empty result is sent without content: empty text is a 400
                    result["content"] = content
            blocks.append(result)
        self._messages.append({"role": "user", "content": blocks})

    def _tool_output(self, index: int, output: OutputItem) -> str | list[JSON]:
        if type(output) is ToolSearchOutputItem:
            return self._loaded_tools(output)
        output = cast("FunctionCallOutputItem | CustomToolCallOutputItem", output)
        return tool_result_content(output.output, f"input[{index}].output", self._profile, self._notes)

    # -- the messages

    def _message(self, role: str) -> JSON:
        """The message to add ``role`` content to: the last one if it has that role."""
        last = self._messages[-1] if self._messages else None
        if last is not None and last["role"] == role:
            return last
        message: JSON = {"role": role, "content": []}
        self._messages.append(message)
        return message

    def _well_formed(self) -> list[JSON]:
        """The messages without empty ones, same roles merged, starting with a user message."""
        messages: list[JSON] = []
        for message in self._messages:
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
