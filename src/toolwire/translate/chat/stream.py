"""``ChatStreamTranslator``: Chat Completions chunks in, Responses stream events out.

One translator serves one response. ``start()`` gives ``response.created`` and
``response.in_progress``; ``feed(chunk)`` takes one parsed upstream chunk;
``finish()`` is the upstream's end (``[DONE]`` or EOF); ``fail(message)`` is a
transport error. Each returns the events to send, numbered 0, 1, 2, ... across the
whole stream, and exactly one terminal event ends it (``response.completed``,
``response.incomplete`` or ``response.failed``); after it every call returns ``[]``.
``translate_whole(completion)`` does all of it for a non-streamed answer and returns
the final Response object.

The translator decides; ``ResponsesEventWriter`` writes the events, and
``decide_stream_end`` says how the stream ends. What the translator guarantees
(reference §3, §5.2, and Codex §8.4):

* Items are sequential: item k is done before item k+1 is added, ``output_index``
  follows the order of adding. Tool calls that the upstream interleaves by ``index``
  are buffered until the item before them is closed.
* A call is restored to the type its tool was declared with: ``function_call``
  (namespace restored), ``custom_tool_call`` (raw input recovered from the JSON
  wrapper) or ``tool_search_call``; a call of an undeclared tool stays a
  ``function_call`` named as the model named it, so the client can answer
  "unsupported call" (``_calls``).
* ``call_id`` is unique within the response; a strict function tool always gets
  arguments that parse as JSON; the terminal event carries the full output list,
  the same item objects as the ``output_item.done`` events.
* Reasoning from ``reasoning_content``, ``reasoning`` or a leading ``<think>`` block
  becomes a ``reasoning`` item whose ``encrypted_content`` seals the text for the
  next turn.
* When tools were offered (and ``tool_choice`` is not ``"none"``), calls the model
  wrote into the content in a known family's format (a server without a tool parser
  passes them on as text) are recovered as calls (``text_calls``), unless
  ``tool_call_text="off"``; the text around them stays text.

Whether a tool was called is decided from the data, never from ``finish_reason``
(servers report "stop" for calls, or nothing at all). ``conversions`` lists every
repair made, for logs and metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from toolwire.protocol import ResponsesRequest, StreamEvent
from toolwire.tools import ToolKind

from .._calls import (
    CLOSED,
    LIVE,
    WAITING,
    CallFragment,
    CallReader,
    ItemStatus,
    OpenCall,
    call_item,
)
from .._failures import upstream_failure
from ..reasoning import seal_reasoning
from ..stream_end import StreamOutcome, decide_stream_end
from ..tool_table import UpstreamToolTable
from ..translator import WrittenAnswer
from ..writer import ResponsesEventWriter, StreamState
from ._chunks import (
    Finish,
    Reasoning,
    Refusal,
    Signal,
    Text,
    ThinkTagSplitter,
    Usage,
    call_fragment,
    completion_chunks,
    content_text,
    first_choice,
    map_usage,
    reasoning_text,
)
from .text_calls import TextCallRecognizer, families_for, offered_tools

__all__ = ["ChatStreamTranslator"]

JSON = dict[str, Any]
_PartType = Literal["output_text", "refusal"]


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


_OpenItem = _OpenMessage | _OpenReasoning | OpenCall
# Bound once: an Enum member lookup costs ~60 ns in Python 3.11.
_ENDED = StreamState.ENDED
_FAILED, _COMPLETED = StreamOutcome.FAILED, StreamOutcome.COMPLETED


class ChatStreamTranslator(WrittenAnswer):
    """Translate one upstream Chat Completions stream into one Responses event stream."""

    def __init__(
        self,
        request: ResponsesRequest,
        tools: UpstreamToolTable,
        *,
        response_id: str,
        created_at: int,
        model: str,
        tool_call_text: str = "auto",
    ) -> None:
        """``tool_call_text``: the upstream's setting, which families' calls written into
        the text are recovered (``"auto"``: all; ``"off"``: none)."""
        self._writer = ResponsesEventWriter(
            request, response_id=response_id, created_at=created_at, model=model
        )
        self.conversions: list[str] = []
        """Every repair applied to the upstream's output, e.g. ``custom apply_patch restored``."""
        self._reader = CallReader(tools, self.conversions)
        self._think = ThinkTagSplitter()
        offered = len(tools) > 0 and request.tool_choice != "none"
        families = families_for(tool_call_text) if offered else frozenset()
        self._text_calls = (
            TextCallRecognizer(lambda: offered_tools(tools), families) if families else None
        )
        self._output: list[JSON] = []  # done items, in output_index order
        self._live: _OpenItem | None = None
        self._calls: list[OpenCall] = []  # in order of first appearance
        self._calls_by_index: dict[int, OpenCall] = {}
        self._finish_reason: str | None = None
        self._usage: JSON | None = None

    # ------------------------------------------------------------ public API

    def start(self) -> list[StreamEvent]:
        """``response.created`` and ``response.in_progress`` (empty output, no usage)."""
        self._writer.begin()
        return self._writer.take()

    def feed(self, chunk: JSON) -> list[StreamEvent]:
        """The events one upstream chunk (or in-stream ``{"error": ...}`` object) produces."""
        writer = self._writer
        if writer.state is _ENDED:
            return []
        writer.begin()
        failure = upstream_failure(chunk)
        if failure is not None:
            message, code = failure
            return self._fail(message, code)
        for signal in self._signals(chunk):
            self._apply(signal)
        return writer.take()

    def finish(self, *, completed_at: int | None = None, ended_cleanly: bool = True) -> list[StreamEvent]:
        """The upstream ended: close open items in order and emit the terminal event.

        ``completed_at`` (unix seconds) defaults to ``created_at``: the translator reads
        no clock. ``ended_cleanly`` is false when the body just stopped, without
        ``[DONE]``: with no finish reason either, the answer was cut short, and the
        response fails rather than pass a truncated answer (or tool call) as complete.
        """
        writer = self._writer
        if writer.state is _ENDED:
            return []
        writer.begin()
        for signal in self._flush_content():
            self._apply(signal)
        produced = writer.items_added > 0 or any(
            c.name for c in self._calls if c.state is WAITING
        )
        end = decide_stream_end(self._finish_reason, produced=produced, ended_cleanly=ended_cleanly)
        if end.outcome is _FAILED:
            self._live = None  # open items stay unfinished: half a tool call never reaches the client
        else:
            item_status: ItemStatus = "completed" if end.outcome is _COMPLETED else "incomplete"
            self._close_live(item_status)
            self._flush_waiting_calls(item_status)
            nameless = sum(1 for c in self._calls if c.state is WAITING)
            self.conversions.extend(["tool call without a name dropped"] * nameless)
        writer.end(
            end, output=list(self._output), usage=map_usage(self._usage), completed_at=completed_at
        )
        return writer.take()

    def fail(self, message: str, *, code: str = "server_error") -> list[StreamEvent]:
        """The upstream broke (transport error, cut connection): ``error`` + ``response.failed``."""
        if self._writer.state is _ENDED:
            return []
        self._writer.begin()
        return self._fail(message, code)

    def _response_so_far(self) -> JSON:
        """The Response so far, with the usage the upstream reported until now, if any
        (a stream the client cut still counts what it used)."""
        return self._writer.response("in_progress", output=list(self._output), usage=map_usage(self._usage))

    def translate_whole(self, completion: JSON) -> JSON:
        """The Response object for a whole (non-streamed) Chat Completion, translated as the
        stream that would have carried it (``status`` failed if it holds an ``error``).

        A translator serves one response: this is instead of ``start``/``feed``/``finish``.
        """
        for chunk in completion_chunks(completion):
            self.feed(chunk)
        self.finish()
        return self.response

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
            signals.extend(self._flush_content())
            signals.append(Reasoning(reasoning))
        content = delta.get("content")
        if content:
            content = content_text(content)
            if content:
                signals.extend(self._recover_calls(self._think.decode(content)))
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            signals.extend(self._flush_content())
            signals.append(Refusal(refusal))
        tool_calls = delta.get("tool_calls")
        function_call = delta.get("function_call")  # the legacy single-call form
        if isinstance(function_call, dict):
            tool_calls = [{"index": 0, "function": function_call}]
        if isinstance(tool_calls, list):
            fragments = [call_fragment(entry) for entry in tool_calls if isinstance(entry, dict)]
            if fragments:
                signals.extend(self._flush_content())
                signals.extend(fragments)
        if self._think.found_tags:
            self._think.found_tags = False
            self.conversions.append("think tags split into reasoning")

    # ------------------------------------------------------------ calls written into the text

    def _recover_calls(self, signals: list[Signal]) -> list[Signal]:
        """The ``<think>`` splitter's signals, with calls written into the text recovered."""
        recognizer = self._text_calls
        if recognizer is None:
            return signals
        recovered: list[Signal] = []
        if len(signals) == 1 and isinstance(signals[0], Text):  # nearly every chunk
            recovered.extend(recognizer.feed(signals[0].text))
            if recognizer.recognized:
                self._note_recovered(recognizer)
            return recovered
        for signal in signals:
            if isinstance(signal, Text):
                recovered.extend(recognizer.feed(signal.text))
            else:
                recovered.extend(recognizer.flush())
                recovered.append(signal)
        self._note_recovered(recognizer)
        return recovered

    def _flush_content(self) -> list[Signal]:
        """The end of the content (or something else came): what its decoders held back."""
        signals = self._recover_calls(self._think.flush())
        if self._text_calls is not None:
            signals.extend(self._text_calls.flush())
            self._note_recovered(self._text_calls)
        return signals

    def _note_recovered(self, recognizer: TextCallRecognizer) -> None:
        for family in recognizer.recognized:
            self.conversions.append(f"tool call recovered from {family} text")
        recognizer.recognized.clear()

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
                if call.state is CLOSED:
                    if signal.arguments.strip() or signal.native_input:
                        self.conversions.append("late tool-call fragment dropped")
                    return
                if signal.name and call.name is None:
                    call.name = signal.name
                if signal.native_input is not None:
                    call.native_input = [*(call.native_input or []), signal.native_input]
                if signal.arguments:
                    call.fragments.append(signal.arguments)
                    if call.state is LIVE and call.kind is ToolKind.FUNCTION:
                        self._writer.arguments_delta(call.item_id, call.output_index, signal.arguments)
                self._advance_calls()
            case Reasoning():
                reasoning = self._live
                if not isinstance(reasoning, _OpenReasoning):
                    self._close_live("completed")
                    self._flush_waiting_calls("completed")
                    reasoning = self._open_reasoning()
                reasoning.text.append(signal.text)
                self._writer.reasoning_delta(reasoning.item_id, reasoning.output_index, signal.text)
            case Finish():
                self._finish_reason = signal.reason
            case Usage():
                self._usage = signal.usage

    def _call_for(self, fragment: CallFragment) -> OpenCall:
        """The call a fragment belongs to; a new one when it starts a call.

        Fragments are keyed by ``index``. Without one, the ``id`` decides, and a fragment
        with neither ``id`` nor name continues the last call. A fragment that names a
        different call at a known index (servers that put every call at index 0) starts
        a new call too.
        """
        call: OpenCall | None
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
        if call is None or call.starts_another_call(fragment):
            call = OpenCall(upstream_id=fragment.upstream_id)
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
                if waiting.state is WAITING and waiting.name:
                    break
            else:
                return
            if isinstance(self._live, OpenCall) and not self._live.looks_complete():
                return
            self._close_live("completed")
            self._promote(waiting)

    def _flush_waiting_calls(self, status: ItemStatus) -> None:
        """Emit every waiting call that has a name, whole, in order of appearance."""
        for call in self._calls:
            if call.state is WAITING and call.name:
                self._promote(call)
                self._close_live(status)

    # ------------------------------------------------------------ items: open, stream, close

    def _open_message(self) -> _OpenMessage:
        item_id, output_index = self._writer.add_item(
            "msg", {"type": "message", "status": "in_progress", "role": "assistant", "content": []}
        )
        message = self._live = _OpenMessage(item_id, output_index)
        return message

    def _message_delta(self, message: _OpenMessage, part_type: _PartType, text: str) -> None:
        writer = self._writer
        if message.part_type != part_type:
            self._close_part(message)
            message.part_type = part_type
            part: JSON = (
                {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                if part_type == "output_text"
                else {"type": "refusal", "refusal": ""}
            )
            writer.part_added(message.item_id, message.output_index, len(message.parts), part)
        message.part_text.append(text)
        if part_type == "output_text":
            writer.text_delta(message.item_id, message.output_index, len(message.parts), text)
        else:
            writer.refusal_delta(message.item_id, message.output_index, len(message.parts), text)

    def _close_part(self, message: _OpenMessage) -> None:
        if message.part_type is None:
            return
        writer = self._writer
        text = "".join(message.part_text)
        content_index = len(message.parts)
        part: JSON
        if message.part_type == "output_text":
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            writer.text_done(message.item_id, message.output_index, content_index, text)
        else:
            part = {"type": "refusal", "refusal": text}
            writer.refusal_done(message.item_id, message.output_index, content_index, text)
        writer.part_done(message.item_id, message.output_index, content_index, part)
        message.parts.append(part)
        message.part_type = None
        message.part_text = []

    def _open_reasoning(self) -> _OpenReasoning:
        writer = self._writer
        item_id, output_index = writer.add_item(
            "rs", {"type": "reasoning", "status": "in_progress", "summary": [], "content": []}
        )
        reasoning = self._live = _OpenReasoning(item_id, output_index)
        writer.part_added(item_id, output_index, 0, {"type": "reasoning_text", "text": ""})
        return reasoning

    def _promote(self, call: OpenCall) -> None:
        """Put a waiting call on the wire: ``output_item.added`` and its buffered arguments."""
        assert self._live is None
        writer = self._writer
        self._reader.go_live(call, writer.new_output_index(), writer.new_id)
        self._live = call
        writer.item_added(call.output_index, call_item(call, "in_progress", {} if call.kind is ToolKind.TOOL_SEARCH else ""))
        if call.kind is ToolKind.FUNCTION and call.arguments:
            writer.arguments_delta(call.item_id, call.output_index, call.arguments)

    def _close_live(self, status: ItemStatus) -> None:
        """Finish the open item, if any: its ``.done`` events, then ``output_item.done``."""
        live, self._live = self._live, None
        item: JSON
        if live is None:
            return
        writer = self._writer
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
            writer.reasoning_done(live.item_id, live.output_index, text)
            writer.part_done(live.item_id, live.output_index, 0, part)
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
        writer.item_done(live.output_index, item)

    def _close_call(self, call: OpenCall, status: ItemStatus) -> JSON:
        """A call's closing events (its whole input or arguments) and its done item."""
        call.state = CLOSED
        writer, reader = self._writer, self._reader
        if call.kind is ToolKind.CUSTOM:
            text = reader.custom_input(call)
            if text:
                writer.custom_input_delta(call.item_id, call.output_index, text)
            writer.custom_input_done(call.item_id, call.output_index, text)
            return call_item(call, status, text)
        if call.kind is ToolKind.TOOL_SEARCH:
            return call_item(call, status, reader.tool_search_arguments(call))
        streamed = call.arguments
        arguments = reader.function_arguments(call, status)
        if not streamed and arguments:
            writer.arguments_delta(call.item_id, call.output_index, arguments)
        writer.arguments_done(call.item_id, call.output_index, arguments, call.client_name)
        return call_item(call, status, arguments)

    # ------------------------------------------------------------ failure

    def _fail(self, message: str, code: str) -> list[StreamEvent]:
        """``error`` (flat and nested forms) then ``response.failed`` with the items done so far.

        An item still open is left unfinished and is not in ``output``: half a tool call
        must never reach a client that executes calls on ``output_item.done``.
        """
        writer = self._writer
        snapshot = writer.response(
            "in_progress", output=list(self._output), usage=map_usage(self._usage)
        )
        writer.fail(snapshot, message, code)
        self._live = None
        return writer.take()

