"""``ChatStreamTranslator``: Chat Completions chunks in, Responses stream events out.

One translator serves one response. ``start()`` gives ``response.created`` and
``response.in_progress``; ``feed(chunk)`` takes one parsed upstream chunk;
``finish()`` is the upstream's end (``[DONE]`` or EOF); ``fail(message)`` is a
transport error. Each returns the events to send, numbered 0, 1, 2, ... across the
whole stream, and exactly one terminal event ends it (``response.completed``,
``response.incomplete`` or ``response.failed``); after it every call returns ``[]``.

What the translator guarantees (reference §3, §5.2, and Codex §8.4):

* Items are sequential: item k is done before item k+1 is added, ``output_index``
  follows the order of adding. Tool calls that the upstream interleaves by ``index``
  are buffered until the item before them is closed.
* A call is restored to the type its tool was declared with: ``function_call``
  (namespace restored), ``custom_tool_call`` (raw input recovered from the JSON
  wrapper) or ``tool_search_call``; a call of an undeclared tool stays a
  ``function_call`` named as the model named it, so the client can answer
  "unsupported call".
* ``call_id`` is unique within the response; a strict function tool always gets
  arguments that parse as JSON; the terminal event carries the full output list,
  the same item objects as the ``output_item.done`` events.
* Reasoning from ``reasoning_content``, ``reasoning`` or a leading ``<think>`` block
  becomes a ``reasoning`` item whose ``encrypted_content`` seals the text for the
  next turn.

Whether a tool was called is decided from the data, never from ``finish_reason``
(servers report "stop" for calls, or nothing at all). ``conversions`` lists every
repair made, for logs and metrics.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from toolwire.protocol import (
    FunctionTool,
    ResponsesRequest,
    StreamEvent,
)
from toolwire.protocol._events import (
    ContentPartEvent,
    CustomToolCallInputDeltaEvent,
    CustomToolCallInputDoneEvent,
    ErrorEvent,
    FunctionCallArgumentsDeltaEvent,
    FunctionCallArgumentsDoneEvent,
    OutputItemEvent,
    OutputTextDeltaEvent,
    OutputTextDoneEvent,
    ReasoningTextDeltaEvent,
    ReasoningTextDoneEvent,
    RefusalDeltaEvent,
    RefusalDoneEvent,
    ResponseLifecycleEvent,
)
from toolwire.tools import ToolKind

from ._chunks import (
    CallFragment,
    Finish,
    Reasoning,
    Refusal,
    Signal,
    Text,
    ThinkTagSplitter,
    Usage,
    call_fragment,
    content_text,
    first_choice,
    map_usage,
    reasoning_text,
    upstream_failure,
)
from ._echo import echo_request
from ._json_repair import json_or_none, repair_json
from .custom_input import recover_custom_input
from .reasoning import seal_reasoning
from .tool_table import UpstreamTool, UpstreamToolTable

__all__ = ["ChatStreamTranslator"]

JSON = dict[str, Any]
ItemStatus = Literal["completed", "incomplete"]
_LifecycleType = Literal[
    "response.created",
    "response.in_progress",
    "response.completed",
    "response.failed",
    "response.incomplete",
]
_ItemEventType = Literal["response.output_item.added", "response.output_item.done"]
_PartEventType = Literal["response.content_part.added", "response.content_part.done"]
_PartType = Literal["output_text", "refusal"]

_SAFE_CALL_ID = re.compile(r"[A-Za-z0-9_-]{1,40}")
# finish_reason values that mean "the model was cut off", and the Responses reason for each.
_INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}
_NORMAL_FINISH_REASONS = frozenset({"stop", "tool_calls", "function_call", "eos", "end_turn"})


# ---------------------------------------------------------------- open items


@dataclass(slots=True)
class _OpenMessage:
    item_id: str
    output_index: int
    parts: list[JSON] = field(default_factory=list)  # closed parts
    part_type: _PartType | None = None  # the open part
    part_text: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _OpenReasoning:
    item_id: str
    output_index: int
    text: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Call:
    """A tool call from its first fragment until its ``output_item.done``.

    ``waiting``: buffered (no name yet, or another item is open); ``live``: added and
    streaming; ``closed``: done. Item fields are set when it goes live.
    """

    upstream_id: str | None
    name: str | None = None
    fragments: list[str] = field(default_factory=list)
    native_input: list[str] | None = None
    state: Literal["waiting", "live", "closed"] = "waiting"
    tool: UpstreamTool | None = None
    item_id: str = ""
    output_index: int = -1
    call_id: str = ""
    namespace: str | None = None
    client_name: str = ""

    @property
    def arguments(self) -> str:
        if len(self.fragments) > 1:
            self.fragments[:] = ["".join(self.fragments)]
        return self.fragments[0] if self.fragments else ""

    @property
    def kind(self) -> ToolKind:
        return self.tool.kind if self.tool is not None else ToolKind.FUNCTION

    def looks_complete(self) -> bool:
        """Whether the arguments so far are a whole JSON value (the upstream moved on)."""
        if self.native_input is not None:
            return True
        text = self.arguments.rstrip()
        return text.endswith(("}", "]")) and json_or_none(text) is not None


_OpenItem = _OpenMessage | _OpenReasoning | _Call


class ChatStreamTranslator:
    """Translate one upstream Chat Completions stream into one Responses event stream."""

    def __init__(
        self,
        request: ResponsesRequest,
        tools: UpstreamToolTable,
        *,
        response_id: str,
        created_at: int,
        model: str,
    ) -> None:
        self._tools = tools
        self._response_id = response_id
        self._created_at = created_at
        self._model = model
        self._echo = echo_request(request)
        self.conversions: list[str] = []
        """Every repair applied to the upstream's output, e.g. ``custom apply_patch restored``."""

        self._think = ThinkTagSplitter()
        self._events: list[StreamEvent] = []  # what the current call returns
        self._sequence_number = 0
        self._started = False
        self._ids = 0
        self._output: list[JSON] = []  # done items, in output_index order
        self._next_output_index = 0
        self._live: _OpenItem | None = None
        self._calls: list[_Call] = []  # in order of first appearance
        self._calls_by_index: dict[int, _Call] = {}
        self._call_ids: set[str] = set()
        self._finish_reason: str | None = None
        self._usage: JSON | None = None
        self._final: JSON | None = None

    # ------------------------------------------------------------ public API

    @property
    def finished(self) -> bool:
        """Whether the terminal event has been emitted."""
        return self._final is not None

    @property
    def response(self) -> JSON:
        """The final Response object once finished; before that, the current snapshot
        (with the usage the upstream reported so far, if it reported any)."""
        if self._final is not None:
            return self._final
        return self._response_object("in_progress", output=list(self._output), usage=map_usage(self._usage))

    def start(self) -> list[StreamEvent]:
        """``response.created`` and ``response.in_progress`` (empty output, no usage)."""
        self._begin()
        return self._take()

    def feed(self, chunk: JSON) -> list[StreamEvent]:
        """The events one upstream chunk (or in-stream ``{"error": ...}`` object) produces."""
        if self._final is not None:
            return []
        self._begin()
        failure = upstream_failure(chunk)
        if failure is not None:
            message, code = failure
            return self._fail(message, code)
        for signal in self._signals(chunk):
            self._apply(signal)
        return self._take()

    def finish(self, *, completed_at: int | None = None, ended_cleanly: bool = True) -> list[StreamEvent]:
        """The upstream ended: close open items in order and emit the terminal event.

        ``completed_at`` (unix seconds) defaults to ``created_at``: the translator reads
        no clock. ``ended_cleanly`` is false when the body just stopped, without
        ``[DONE]``: with no finish reason either, the answer was cut short, and the
        response fails rather than pass a truncated answer (or tool call) as complete.
        """
        if self._final is not None:
            return []
        self._begin()
        for signal in self._think.flush():
            self._apply(signal)
        reason = self._finish_reason
        produced = self._next_output_index > 0 or any(
            c.name for c in self._calls if c.state == "waiting"
        )
        if reason == "error":
            return self._fail("The upstream finished with reason 'error'.", "server_error")
        if reason is None and not ended_cleanly:
            return self._fail(
                "The upstream stream ended before it finished (no finish reason, no [DONE]).", "server_error"
            )
        if not produced and reason is None:
            return self._fail(
                "upstream stream ended without a finish reason", "server_error"
            )
        if (
            not produced
            and reason not in _NORMAL_FINISH_REASONS
            and reason not in _INCOMPLETE_REASONS
        ):
            return self._fail(
                f"upstream stream ended with finish reason {reason!r} and no output", "server_error"
            )

        incomplete_reason = _INCOMPLETE_REASONS.get(reason or "")
        item_status: ItemStatus = "completed" if incomplete_reason is None else "incomplete"
        self._close_live(item_status)
        self._flush_waiting_calls(item_status)
        nameless = sum(1 for c in self._calls if c.state == "waiting")
        self.conversions.extend(["tool call without a name dropped"] * nameless)

        usage = map_usage(self._usage)
        if incomplete_reason is None:
            final = self._response_object(
                "completed",
                output=list(self._output),
                usage=usage,
                completed_at=self._created_at if completed_at is None else completed_at,
            )
            self._emit_lifecycle("response.completed", final)
        else:
            final = self._response_object(
                "incomplete",
                output=list(self._output),
                usage=usage,
                incomplete_details={"reason": incomplete_reason},
            )
            self._emit_lifecycle("response.incomplete", final)
        self._final = final
        return self._take()

    def fail(self, message: str, *, code: str = "server_error") -> list[StreamEvent]:
        """The upstream broke (transport error, cut connection): ``error`` + ``response.failed``."""
        if self._final is not None:
            return []
        self._begin()
        return self._fail(message, code)

    # ------------------------------------------------------------ chunk -> signals

    def _signals(self, chunk: JSON) -> list[Signal]:
        """What one chunk says, in order. Only choice 0 is representable (n > 1 is lossy)."""
        signals: list[Signal] = []
        choices = chunk.get("choices")
        choice = first_choice(choices) if isinstance(choices, list) else None
        if choice is not None:
            delta = choice.get("delta")
            if delta and isinstance(delta, dict):  # an empty delta says nothing
                self._delta_signals(delta, signals)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                signals.append(Finish(reason))
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            signals.append(Usage(usage))
        return signals

    def _delta_signals(self, delta: JSON, signals: list[Signal]) -> None:
        """Append what a choice's ``delta`` says to ``signals``."""
        reasoning = reasoning_text(delta)
        if reasoning:
            signals.extend(self._think.flush())
            signals.append(Reasoning(reasoning))
        content = delta.get("content")
        if content:
            content = content_text(content)
            if content:
                signals.extend(self._think.decode(content))
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            signals.extend(self._think.flush())
            signals.append(Refusal(refusal))
        tool_calls = delta.get("tool_calls")
        function_call = delta.get("function_call")  # the legacy single-call form
        if isinstance(function_call, dict):
            tool_calls = [{"index": 0, "function": function_call}]
        if isinstance(tool_calls, list):
            fragments = [call_fragment(entry) for entry in tool_calls if isinstance(entry, dict)]
            if fragments:
                signals.extend(self._think.flush())
                signals.extend(fragments)
        if self._think.found_tags:
            self._think.found_tags = False
            self.conversions.append("think tags split into reasoning")

    # ------------------------------------------------------------ the state machine

    def _apply(self, signal: Signal) -> None:
        """The one place where what the upstream said changes the response being built.

        (The ``<think>`` splitter, an incremental decoder, keeps its own small state.)
        The most frequent signals come first.
        """
        match signal:
            case Text() | Refusal():
                message = self._live
                if not isinstance(message, _OpenMessage):
                    self._close_live("completed")
                    self._flush_waiting_calls("completed")
                    message = self._open_message()
                part_type: _PartType = "output_text" if isinstance(signal, Text) else "refusal"
                self._message_delta(message, part_type, signal.text)
            case CallFragment():
                call = self._call_for(signal)
                if call.state == "closed":
                    if signal.arguments.strip() or signal.native_input:
                        self.conversions.append("late tool-call fragment dropped")
                    return
                if signal.name and call.name is None:
                    call.name = signal.name
                if signal.native_input is not None:
                    call.native_input = [*(call.native_input or []), signal.native_input]
                if signal.arguments:
                    call.fragments.append(signal.arguments)
                    if call.state == "live" and call.kind is ToolKind.FUNCTION:
                        self._emit_arguments_delta(call, signal.arguments)
                self._advance_calls()
            case Reasoning():
                reasoning = self._live
                if not isinstance(reasoning, _OpenReasoning):
                    self._close_live("completed")
                    self._flush_waiting_calls("completed")
                    reasoning = self._open_reasoning()
                self._reasoning_delta(reasoning, signal.text)
            case Finish():
                self._finish_reason = signal.reason
            case Usage():
                self._usage = signal.usage

    def _call_for(self, fragment: CallFragment) -> _Call:
        """The call a fragment belongs to; a new one when it starts a call.

        Fragments are keyed by ``index``. Without one, the ``id`` decides, and a fragment
        with neither ``id`` nor name continues the last call. A fragment that names a
        different call at a known index (servers that put every call at index 0) starts
        a new call too.
        """
        call: _Call | None
        if fragment.index is not None:
            call = self._calls_by_index.get(fragment.index)
        elif fragment.upstream_id is not None:
            call = next(
                (c for c in reversed(self._calls) if c.upstream_id == fragment.upstream_id), None
            )
        elif fragment.name is None and self._calls:
            call = self._calls[-1]
        else:
            call = None
        if call is None or _starts_another_call(call, fragment):
            call = _Call(upstream_id=fragment.upstream_id)
            self._calls.append(call)
            if fragment.index is not None:
                self._calls_by_index[fragment.index] = call
        elif call.upstream_id is None:
            call.upstream_id = fragment.upstream_id
        return call

    def _advance_calls(self) -> None:
        """Put waiting calls on the wire, one at a time.

        A waiting call with a name goes live when nothing is open, or when the open item
        is text or reasoning (the upstream moved on to calls), or when the live call's
        arguments are a whole JSON value (the upstream moved on to the next call).
        """
        while True:
            for waiting in self._calls:
                if waiting.state == "waiting" and waiting.name:
                    break
            else:
                return
            if isinstance(self._live, _Call) and not self._live.looks_complete():
                return
            self._close_live("completed")
            self._promote(waiting)

    def _flush_waiting_calls(self, status: ItemStatus) -> None:
        """Emit every waiting call that has a name, whole, in order of appearance."""
        for call in self._calls:
            if call.state == "waiting" and call.name:
                self._promote(call)
                self._close_live(status)

    # ------------------------------------------------------------ items: open, stream, close

    def _open_message(self) -> _OpenMessage:
        message = _OpenMessage(self._new_id("msg"), self._take_output_index())
        self._live = message
        item = {
            "id": message.item_id,
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        self._emit_item("response.output_item.added", message.output_index, item)
        return message

    def _message_delta(self, message: _OpenMessage, part_type: _PartType, text: str) -> None:
        if message.part_type != part_type:
            self._close_part(message)
            message.part_type = part_type
            part: JSON = (
                {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                if part_type == "output_text"
                else {"type": "refusal", "refusal": ""}
            )
            self._emit_part("response.content_part.added", message, part)
        message.part_text.append(text)
        if part_type == "output_text":
            text_delta: OutputTextDeltaEvent = {
                "type": "response.output_text.delta",
                "sequence_number": self._next_sequence_number(),
                "item_id": message.item_id,
                "output_index": message.output_index,
                "content_index": len(message.parts),
                "delta": text,
                "logprobs": [],
            }
            self._emit(text_delta)
        else:
            refusal_delta: RefusalDeltaEvent = {
                "type": "response.refusal.delta",
                "sequence_number": self._next_sequence_number(),
                "item_id": message.item_id,
                "output_index": message.output_index,
                "content_index": len(message.parts),
                "delta": text,
            }
            self._emit(refusal_delta)

    def _close_part(self, message: _OpenMessage) -> None:
        if message.part_type is None:
            return
        text = "".join(message.part_text)
        content_index = len(message.parts)
        part: JSON
        if message.part_type == "output_text":
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            text_done: OutputTextDoneEvent = {
                "type": "response.output_text.done",
                "sequence_number": self._next_sequence_number(),
                "item_id": message.item_id,
                "output_index": message.output_index,
                "content_index": content_index,
                "text": text,
                "logprobs": [],
            }
            self._emit(text_done)
        else:
            part = {"type": "refusal", "refusal": text}
            refusal_done: RefusalDoneEvent = {
                "type": "response.refusal.done",
                "sequence_number": self._next_sequence_number(),
                "item_id": message.item_id,
                "output_index": message.output_index,
                "content_index": content_index,
                "refusal": text,
            }
            self._emit(refusal_done)
        self._emit_part("response.content_part.done", message, part)
        message.parts.append(part)
        message.part_type = None
        message.part_text = []

    def _open_reasoning(self) -> _OpenReasoning:
        reasoning = _OpenReasoning(self._new_id("rs"), self._take_output_index())
        self._live = reasoning
        item = {
            "id": reasoning.item_id,
            "type": "reasoning",
            "status": "in_progress",
            "summary": [],
            "content": [],
        }
        self._emit_item("response.output_item.added", reasoning.output_index, item)
        self._emit_part(
            "response.content_part.added", reasoning, {"type": "reasoning_text", "text": ""}
        )
        return reasoning

    def _reasoning_delta(self, reasoning: _OpenReasoning, text: str) -> None:
        reasoning.text.append(text)
        event: ReasoningTextDeltaEvent = {
            "type": "response.reasoning_text.delta",
            "sequence_number": self._next_sequence_number(),
            "item_id": reasoning.item_id,
            "output_index": reasoning.output_index,
            "content_index": 0,
            "delta": text,
        }
        self._emit(event)

    def _promote(self, call: _Call) -> None:
        """Put a waiting call on the wire: ``output_item.added`` and its buffered arguments."""
        assert call.name is not None and self._live is None
        call.state = "live"
        call.output_index = self._take_output_index()
        call.call_id = self._client_call_id(call.upstream_id)
        call.tool = self._resolve_tool(call.name)
        call.client_name = call.tool.tool_name.name if call.tool is not None else call.name
        call.namespace = call.tool.tool_name.namespace if call.tool is not None else None
        self._live = call
        item: JSON
        if call.kind is ToolKind.CUSTOM:
            call.item_id = self._new_id("ctc")
            item = {
                "id": call.item_id,
                "type": "custom_tool_call",
                "status": "in_progress",
                "call_id": call.call_id,
            }
            item.update(self._call_name(call))
            item["input"] = ""
        elif call.kind is ToolKind.TOOL_SEARCH:
            call.item_id = self._new_id("tsc")
            item = {
                "id": call.item_id,
                "type": "tool_search_call",
                "status": "in_progress",
                "call_id": call.call_id,
                "execution": "client",
                "arguments": {},
            }
        else:
            call.item_id = self._new_id("fc")
            item = {
                "id": call.item_id,
                "type": "function_call",
                "status": "in_progress",
                "call_id": call.call_id,
            }
            item.update(self._call_name(call))
            item["arguments"] = ""
        self._emit_item("response.output_item.added", call.output_index, item)
        if call.kind is ToolKind.FUNCTION and call.arguments:
            self._emit_arguments_delta(call, call.arguments)

    def _close_live(self, status: ItemStatus) -> None:
        """Finish the open item, if any: its ``.done`` events, then ``output_item.done``."""
        live, self._live = self._live, None
        item: JSON
        if live is None:
            return
        if isinstance(live, _OpenMessage):
            self._close_part(live)
            item = {
                "id": live.item_id,
                "type": "message",
                "status": status,
                "role": "assistant",
                "content": live.parts,
            }
        elif isinstance(live, _OpenReasoning):
            text = "".join(live.text)
            part = {"type": "reasoning_text", "text": text}
            done: ReasoningTextDoneEvent = {
                "type": "response.reasoning_text.done",
                "sequence_number": self._next_sequence_number(),
                "item_id": live.item_id,
                "output_index": live.output_index,
                "content_index": 0,
                "text": text,
            }
            self._emit(done)
            self._emit_part("response.content_part.done", live, part)
            item = {
                "id": live.item_id,
                "type": "reasoning",
                "status": status,
                "summary": [],
                "content": [part],
                "encrypted_content": seal_reasoning(text),
            }
        else:
            item = self._close_call(live, status)
        self._output.append(item)
        self._emit_item("response.output_item.done", live.output_index, item)

    def _close_call(self, call: _Call, status: ItemStatus) -> JSON:
        call.state = "closed"
        if call.kind is ToolKind.CUSTOM:
            text = self._custom_input(call)
            if text:
                input_delta: CustomToolCallInputDeltaEvent = {
                    "type": "response.custom_tool_call_input.delta",
                    "sequence_number": self._next_sequence_number(),
                    "item_id": call.item_id,
                    "output_index": call.output_index,
                    "delta": text,
                }
                self._emit(input_delta)
            input_done: CustomToolCallInputDoneEvent = {
                "type": "response.custom_tool_call_input.done",
                "sequence_number": self._next_sequence_number(),
                "item_id": call.item_id,
                "output_index": call.output_index,
                "input": text,
            }
            self._emit(input_done)
            item = {
                "id": call.item_id,
                "type": "custom_tool_call",
                "status": status,
                "call_id": call.call_id,
            }
            item.update(self._call_name(call))
            item["input"] = text
            return item
        if call.kind is ToolKind.TOOL_SEARCH:
            return {
                "id": call.item_id,
                "type": "tool_search_call",
                "status": status,
                "call_id": call.call_id,
                "execution": "client",
                "arguments": self._tool_search_arguments(call),
            }
        streamed = call.arguments
        arguments = self._function_arguments(call, status)
        if not streamed and arguments:
            self._emit_arguments_delta(call, arguments)
        arguments_done: FunctionCallArgumentsDoneEvent = {
            "type": "response.function_call_arguments.done",
            "sequence_number": self._next_sequence_number(),
            "item_id": call.item_id,
            "output_index": call.output_index,
            "arguments": arguments,
            "name": call.client_name,
        }
        self._emit(arguments_done)
        item = {
            "id": call.item_id,
            "type": "function_call",
            "status": status,
            "call_id": call.call_id,
        }
        item.update(self._call_name(call))
        item["arguments"] = arguments
        return item

    # ------------------------------------------------------------ restoring calls

    def _resolve_tool(self, upstream_name: str) -> UpstreamTool | None:
        """The declared tool a call names, by its flat upstream name.

        A model sometimes uses the tool's own name or its dotted form instead
        (``list_agents``, ``collaboration.list_agents``); when exactly one declared tool
        fits, that one is meant. Otherwise the call names an undeclared tool.
        """
        tool = self._tools.by_upstream_name(upstream_name)
        if tool is None:
            fits = [t for t in self._tools if upstream_name in (t.tool_name.name, str(t.tool_name))]
            if len(fits) != 1:
                return None
            tool = fits[0]
            self.conversions.append(f"tool name {upstream_name} resolved to {tool.tool_name}")
        if tool.kind is ToolKind.CUSTOM:
            self.conversions.append(f"custom {tool.tool_name.name} restored")
        if tool.tool_name.namespace is not None:
            self.conversions.append(f"namespace {tool.tool_name.namespace} restored")
        return tool

    @staticmethod
    def _call_name(call: _Call) -> JSON:
        named: JSON = {"name": call.client_name}
        if call.namespace is not None:
            named["namespace"] = call.namespace
        return named

    def _client_call_id(self, upstream_id: str | None) -> str:
        """The upstream id when it is safe and unused in this response, else a new one."""
        if (
            upstream_id is not None
            and _SAFE_CALL_ID.fullmatch(upstream_id)
            and upstream_id not in self._call_ids
        ):
            call_id = upstream_id
        else:
            if upstream_id is not None:
                self.conversions.append("upstream call id replaced")
            call_id = self._new_id("call", length=24)
            while call_id in self._call_ids:
                call_id = self._new_id("call", length=24)
        self._call_ids.add(call_id)
        return call_id

    def _custom_input(self, call: _Call) -> str:
        if call.native_input is not None:
            return "".join(call.native_input)
        spec = call.tool.custom if call.tool is not None else None
        if spec is None:  # a custom kind always has a CustomTool spec
            return call.arguments
        recovered = recover_custom_input(call.arguments, spec)
        if recovered.conversion is not None:
            self.conversions.append(recovered.conversion)
        return recovered.text

    def _function_arguments(self, call: _Call, status: ItemStatus) -> str:
        """The arguments to give the client.

        Empty becomes ``{}``. Invalid JSON for a ``strict`` tool is repaired (or replaced
        by ``{}``) so that the SDK's ``json.loads`` succeeds, but never for a call the
        upstream cut off: completing a truncated command could make it a valid, wrong one.
        """
        if call.native_input is not None:
            return orjson.dumps({"input": "".join(call.native_input)}).decode()
        arguments = call.arguments
        if not arguments.strip():
            return "{}"
        spec = call.tool.spec if call.tool is not None else None
        strict = isinstance(spec, FunctionTool) and spec.strict is True
        if not strict or status == "incomplete" or json_or_none(arguments) is not None:
            return arguments
        repaired = repair_json(arguments)
        if repaired is not None:
            self.conversions.append("tool arguments repaired")
            return repaired
        self.conversions.append("tool arguments replaced with {}")
        return "{}"

    def _tool_search_arguments(self, call: _Call) -> JSON:
        arguments = call.arguments
        value = json_or_none(arguments) if arguments.strip() else {}
        if isinstance(value, dict):
            return value
        repaired = repair_json(arguments)
        value = json_or_none(repaired) if repaired is not None else None
        if isinstance(value, dict):
            self.conversions.append("tool arguments repaired")
            return value
        self.conversions.append("tool arguments replaced with {}")
        return {}

    # ------------------------------------------------------------ failure

    def _fail(self, message: str, code: str) -> list[StreamEvent]:
        """``error`` (flat and nested forms) then ``response.failed`` with the items done so far.

        An item still open is left unfinished and is not in ``output``: half a tool call
        must never reach a client that executes calls on ``output_item.done``.
        """
        # The SDK's ResponseError.code enum (reference §4.3) lacks "context_length_exceeded",
        # so a strict SDK client rejects this one response object; Codex, the main client,
        # recognises a context overflow only by exactly this code (codex-client §3), so we
        # keep it and accept the strict-mode mismatch.
        error_type = (
            "invalid_request_error" if code == "context_length_exceeded" else "server_error"
        )
        error: ErrorEvent = {
            "type": "error",
            "sequence_number": self._next_sequence_number(),
            "code": code,
            "message": message,
            "param": None,
            "error": {"type": error_type, "code": code, "message": message, "param": None},
        }
        self._emit(error)
        final = self._response_object(
            "failed",
            output=list(self._output),
            usage=map_usage(self._usage),
            error={"code": code, "message": message},
        )
        self._emit_lifecycle("response.failed", final)
        self._final = final
        self._live = None
        return self._take()

    # ------------------------------------------------------------ emitting

    def _response_object(
        self,
        status: str,
        *,
        output: list[JSON],
        usage: JSON | None = None,
        error: JSON | None = None,
        incomplete_details: JSON | None = None,
        completed_at: int | None = None,
    ) -> JSON:
        return {
            "id": self._response_id,
            "object": "response",
            "created_at": self._created_at,
            "status": status,
            "model": self._model,
            "output": output,
            "usage": usage,
            "error": error,
            "incomplete_details": incomplete_details,
            "completed_at": completed_at,
            **self._echo,
        }

    def _begin(self) -> None:
        """The stream's first events, ``response.created`` and ``response.in_progress``,
        left for the public call that began it to return; nothing once it has begun."""
        if self._started:
            return
        self._started = True
        self._emit_lifecycle("response.created", self._response_object("in_progress", output=[]))
        self._emit_lifecycle(
            "response.in_progress", self._response_object("in_progress", output=[])
        )

    def _emit(self, event: StreamEvent) -> None:
        self._events.append(event)

    def _take(self) -> list[StreamEvent]:
        events, self._events = self._events, []
        return events

    def _next_sequence_number(self) -> int:
        number = self._sequence_number
        self._sequence_number += 1
        return number

    def _take_output_index(self) -> int:
        index = self._next_output_index
        self._next_output_index += 1
        return index

    def _new_id(self, prefix: str, *, length: int = 32) -> str:
        """A fresh id, derived from the response id: unique across responses, reproducible."""
        self._ids += 1
        digest = hashlib.sha256(f"{self._response_id}/{self._ids}".encode()).hexdigest()
        return f"{prefix}_{digest[:length]}"

    def _emit_lifecycle(self, kind: _LifecycleType, response: JSON) -> None:
        event: ResponseLifecycleEvent = {
            "type": kind,
            "sequence_number": self._next_sequence_number(),
            "response": response,
        }
        self._emit(event)

    def _emit_item(self, kind: _ItemEventType, output_index: int, item: JSON) -> None:
        event: OutputItemEvent = {
            "type": kind,
            "sequence_number": self._next_sequence_number(),
            "output_index": output_index,
            "item": item,
        }
        self._emit(event)

    def _emit_part(
        self, kind: _PartEventType, item: _OpenMessage | _OpenReasoning, part: JSON
    ) -> None:
        content_index = len(item.parts) if isinstance(item, _OpenMessage) else 0
        event: ContentPartEvent = {
            "type": kind,
            "sequence_number": self._next_sequence_number(),
            "item_id": item.item_id,
            "output_index": item.output_index,
            "content_index": content_index,
            "part": part,
        }
        self._emit(event)

    def _emit_arguments_delta(self, call: _Call, delta: str) -> None:
        event: FunctionCallArgumentsDeltaEvent = {
            "type": "response.function_call_arguments.delta",
            "sequence_number": self._next_sequence_number(),
            "item_id": call.item_id,
            "output_index": call.output_index,
            "delta": delta,
        }
        self._emit(event)

def _starts_another_call(call: _Call, fragment: CallFragment) -> bool:
    """Whether a fragment at ``call``'s index is really the start of another call."""
    if call.name is None:
        return False
    if fragment.upstream_id is not None and call.upstream_id is not None:
        return fragment.upstream_id != call.upstream_id
    return fragment.name is not None and call.looks_complete()
