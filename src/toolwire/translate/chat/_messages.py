"""The Chat messages of a translated request, from the Responses input items (§8.2).

The walk of the items, and how calls and outputs pair, is ``ConversationWalker``'s
(``.._conversation``); this module renders it as Chat messages:

* ``instructions`` and every system/developer message become ONE leading system message;
  no ``developer`` role goes upstream.
* The calls of one model turn become ONE assistant message with several ``tool_calls``
  (their arguments JSON text: a custom tool's raw input wrapped as ``{"input": ...}``),
  directly followed by their ``tool`` messages in call order (``"aborted"`` for a call
  without output). Images a tool returned reach the model in one user message after the
  tool messages.
* Reasoning items ride on the following assistant message, in the backend's field
  (the text sealed in toolwire's envelope is opened; a foreign blob is never sent).
* A tool search's output lists what it loaded by the names the backend calls the tools.

The builder walks the items, then finishes (closes the open turn, merges the system
texts). Its state after a walk can be saved (``SavedBuild``: the walk's, ``SavedWalk``,
and what this wire adds) and resumed by the builder of a request whose items continue
the same ones: it then walks only the new items (``_history``). A save also serializes
the messages that can no longer change, once (``SerializedMessages``), and the leading
system message (Codex's instructions, 23-27 kB, resent with every turn): the request that
resumes it sends them as those bytes instead of serializing them again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import orjson

from toolwire.protocol import (
    ChatMessage,
    CustomToolCallOutputItem,
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

from .._conversation import ConversationWalker, OutputItem, Result, SavedWalk
from .._notes import Notes
from .._tools import join_paragraphs, tool_search_arguments_text, wrap_raw_input
from ..reasoning import open_reasoning
from ..tool_table import UpstreamToolTable
from ._content import image_part, merge_user_content, system_text, user_content
from .profile import BackendProfile

_MAX_RUNS = 16


class SavedBuild(NamedTuple):
    """A builder's state after walking ``walked`` items, before finishing: the walk's, and
    which of its messages have every field ``finish`` adds and are serialized already
    (read-only, like ``SavedWalk``)."""

    walk: SavedWalk[ChatMessage, str]
    defaulted: int  # the first ``defaulted`` messages have every field ``finish`` adds
    json: tuple[bytes, ...]  # the first ``json_count`` messages serialized: runs, each comma-joined
    json_count: int
    system_json: bytes | None  # the leading system message of ``walk.system``, serialized

    @property
    def walked(self) -> int:
        return self.walk.walked


@dataclass(frozen=True, slots=True)
class SerializedMessages:
    """``messages[first : first + count]`` of a translated request, serialized already:
    ``runs`` of them, each comma-joined (what ``orjson.dumps`` writes between the brackets);
    and ``system``, the leading system message (``messages[0]``) when serialized already."""

    first: int
    count: int
    runs: tuple[bytes, ...]
    system: bytes | None = None

    def for_the_wire(self, messages: list[ChatMessage]) -> list[Any]:
        """``messages`` with the serialized ones replaced by their runs (``orjson.Fragment``):
        orjson writes the same bytes, copying the runs instead of serializing again."""
        head: list[Any] = [orjson.Fragment(self.system)] if self.system is not None else list(messages[: self.first])
        return [*head, *map(orjson.Fragment, self.runs), *messages[self.first + self.count :]]


class MessageBuilder(ConversationWalker[ChatMessage, str, str]):
    """Builds the Chat messages from the input items (§8.2): a call's arguments are JSON
    text, pending reasoning is text."""

    CUSTOM_CALLS_SENT_AS = "custom tool calls sent as function calls"
    TOOL_SEARCH_CALLS_SENT_AS = "tool_search calls sent as function calls"

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
        super().__init__(request, table, notes)
        self._profile = profile
        self._defaulted = 0
        self._json: tuple[bytes, ...] = ()  # the first _json_count messages, serialized
        self._json_count = 0
        self._system_json: tuple[tuple[str, ...], bytes] | None = None  # system texts -> their message
        if saved is not None:
            self._resume_walk(saved.walk)
            self._defaulted = saved.defaulted
            self._json, self._json_count = saved.json, saved.json_count
            if saved.system_json is not None:
                self._system_json = (saved.walk.system, saved.system_json)

    def build(self) -> list[ChatMessage]:
        self.walk()
        return self.finish()

    def finish(self) -> list[ChatMessage]:
        """The messages: the open turn closed, the system texts in one leading message.
        The builder's last step: its list of messages becomes the request's."""
        self._end_walk()
        messages = self._messages
        self._add_default_fields(len(messages))
        if self._system:  # in place: a long history's thousands of messages are not copied
            messages.insert(0, _system_message(self._system))
        return messages

    def save(self) -> SavedBuild | None:
        """The state after ``walk``, before ``finish``, for a request continuing these items;
        None if a later item could change what the walk decided."""
        if not self._savable:
            return None
        messages = self._messages
        stable = max(0, len(messages) - 1)
        self._add_default_fields(stable)  # what finish would add to messages that no longer change
        if stable > self._json_count:  # and they no longer change: serialized once for all
            self._json = (*self._json, orjson.dumps(messages[self._json_count : stable])[1:-1])
            self._json_count = stable
            if len(self._json) > _MAX_RUNS:  # one fragment costs what copying ~50 kB does
                self._json = (b",".join(self._json),)
        walk = self._save_walk()
        return SavedBuild(walk, stable, self._json, self._json_count, self._leading_json(serialize=True))

    def serialized(self) -> SerializedMessages | None:
        """After ``finish``: what of its messages is serialized already, if anything."""
        system = self._leading_json(serialize=False)
        if not self._json and system is None:
            return None
        return SerializedMessages(1 if self._system else 0, self._json_count, self._json, system)

    def _leading_json(self, *, serialize: bool) -> bytes | None:
        """The leading system message serialized, if there is one and it was serialized
        before for the same texts (as a saved build does; ``serialize``: else now)."""
        if not self._system:
            return None
        texts = tuple(self._system)
        known = self._system_json
        if known is not None and known[0] == texts:  # mostly the very strings a save kept: quick
            return known[1]
        if not serialize:
            return None
        serialized = orjson.dumps(_system_message(texts))
        self._system_json = (texts, serialized)
        return serialized

    def _add_default_fields(self, up_to: int) -> None:
        """Give the messages before ``up_to`` (not done yet) the fields every assistant
        message carries for this backend."""
        field_name = self._profile.reasoning_field
        if field_name is not None and self._profile.reasoning_on_every_assistant:
            for message in self._messages[self._defaulted : up_to]:
                if message.get("role") == "assistant":
                    cast("dict[str, Any]", message).setdefault(field_name, "")
        self._defaulted = max(self._defaulted, up_to)

    def _own_copy(self, message: ChatMessage) -> ChatMessage:
        """A copy of ``message`` that can change without changing it (its tool calls too)."""
        copy = cast("dict[str, Any]", dict(message))
        if "tool_calls" in copy:
            copy["tool_calls"] = list(copy["tool_calls"])
        return cast("ChatMessage", copy)

    # -- calls' arguments: JSON text

    def _function_arguments(self, index: int, arguments: str) -> str:
        return arguments or "{}"

    _custom_arguments = staticmethod(wrap_raw_input)

    def _tool_search_arguments(self, index: int, item: ToolSearchCallItem) -> str:
        return tool_search_arguments_text(item)

    # -- items

    def _on_system(self, index: int, item: MessageItem) -> None:
        text = system_text(item.content, f"input[{index}].content", self._notes)
        if text:
            self._system.append(text)
        self._notes.convert("system/developer messages merged into one leading system message")

    def _on_reasoning(self, index: int, item: ReasoningItem) -> None:
        if self._profile.reasoning_field is None:
            self._notes.warn("reasoning not sent (the backend takes none back)")
            return
        text = _reasoning_text(item, index, self._notes)
        if text:
            self._reasoning.append(text)
            self._reasoning_at.append(f"input[{index}]")

    def _on_other_item(self, index: int, item: Item) -> None:
        self._notes.warn("input items skipped (no Chat Completions equivalent)", f"{item.type} at input[{index}]")

    def _add_user(self, index: int, item: MessageItem) -> None:
        content = user_content(item.content, f"input[{index}].content", self._notes)
        last = self._messages[-1] if self._messages else None
        if last is not None and last.get("role") == "user" and self._profile.merge_consecutive_user:
            last["content"] = merge_user_content(last.get("content"), content)
            self._notes.convert("consecutive user messages merged")
        else:
            self._messages.append({"role": "user", "content": content})

    def _add_assistant_text(self, text: str) -> None:
        last = self._messages[-1] if self._messages else None
        if last is not None and last.get("role") == "assistant":
            message = last
            self._notes.convert("consecutive assistant messages merged")
        else:
            message = {"role": "assistant", "content": ""}
            self._messages.append(message)
        self._append_text(message, text)

    def _add_text_before_calls(self, message: ChatMessage, text: str) -> None:
        self._append_text(message, text)  # a message's content comes before its tool_calls

    def _append_text(self, message: ChatMessage, text: str) -> None:
        """``text`` after the message's, a paragraph of its own; the reasoning waiting with it."""
        previous = message.get("content")
        message["content"] = join_paragraphs(previous if isinstance(previous, str) else None, text)
        self._attach_reasoning(message)

    def _call_message(self) -> ChatMessage:
        last = self._messages[-1] if self._messages else None
        if last is not None and last.get("role") == "assistant":
            message = last  # the turn's text came first: the calls join it
        else:
            message = {"role": "assistant", "content": ""}
            self._messages.append(message)
        message["tool_calls"] = []
        return message

    def _add_call(self, message: ChatMessage, upstream_id: str, upstream_name: str, arguments: str) -> None:
        if self._reasoning:
            self._attach_reasoning(message)
        message["tool_calls"].append(
            {"id": upstream_id, "type": "function", "function": {"name": upstream_name, "arguments": arguments}}
        )

    def _write_results(self, results: list[Result]) -> None:
        """The turn's tool messages in call order, then the images they returned."""
        images: list[dict[str, Any]] = []
        for call, output_index, output in results:
            if output is None:
                content = "aborted"
            else:
                content, call_images = self._tool_output(output_index, output)
                if call_images:
                    images.append(
                        {
                            "type": "text",
                            "text": f"Image output of tool call {call.upstream_id} ({call.upstream_name}):",
                        }
                    )
                    images.extend(call_images)
            self._messages.append({"role": "tool", "tool_call_id": call.upstream_id, "content": content})
        if images:
            self._messages.append({"role": "user", "content": images})
            self._notes.convert("tool output images sent in a user message after the tool messages")

    def _tool_output(self, index: int, output: OutputItem) -> tuple[str, list[dict[str, Any]]]:
        if type(output) is ToolSearchOutputItem:
            return self._loaded_tools(output), []
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

    def _attach_reasoning(self, message: ChatMessage) -> None:
        field_name = self._profile.reasoning_field
        if not self._reasoning or field_name is None:
            return
        text = "\n\n".join(self._take_reasoning())
        fields = cast("dict[str, Any]", message)
        fields[field_name] = join_paragraphs(fields.get(field_name), text)
        self._notes.convert(f"reasoning sent as {field_name}")


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


def _system_message(texts: list[str] | tuple[str, ...]) -> ChatMessage:
    """The one leading system message of the system texts (instructions, system and
    developer messages, in order)."""
    return {"role": "system", "content": "\n\n".join(texts)}
