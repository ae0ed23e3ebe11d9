"""``ChatStreamTranslator``: Chat Completions chunks in, Responses stream events out.

One translator serves one response. ``start()`` gives ``response.created`` and
``response.in_progress``; ``feed(chunk)`` takes one parsed upstream chunk, or the
``PlainChunks`` the upstream's reader read from their bytes (their text one delta when it
passes as it is, else each chunk read in full);
``finish()`` is the upstream's end (``[DONE]`` or EOF); ``fail(message)`` is a
transport error. Each returns the events to send, numbered 0, 1, 2, ... across the
whole stream, and exactly one terminal event ends it (``response.completed``,
``response.incomplete`` or ``response.failed``); after it every call returns ``[]``.
``translate_whole(completion)`` does all of it for a non-streamed answer and returns
the final Response object.

The translator decides; ``ResponsesEventWriter`` writes the events, and
``decide_stream_end`` says how the stream ends. What it shares with the Messages wire's
translator (the lifecycle, the end, calls going live and closing, the failure) is
``ItemStreamTranslator``'s (``.._item_stream``); what a chunk means is its own. What
the translator guarantees (reference §3, §5.2, and Codex §8.4):

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

from toolwire.protocol import PlainChunks, ResponsesRequest, plain_content
from toolwire.tools import ToolKind

from .._calls import CLOSED, LIVE, WAITING, CallFragment, ItemStatus, OpenCall
from .._failures import upstream_failure
from .._item_stream import ItemStreamTranslator, OpenItem
from ..reasoning import seal_reasoning
from ..stream_end import StreamEnd, decide_stream_end
from ..tool_table import UpstreamToolTable
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
class _OpenMessage(OpenItem):
    parts: list[JSON] = field(default_factory=list)  # closed parts
    part_type: _PartType | None = None  # the open part
    part_text: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _OpenReasoning(OpenItem):
    text: list[str] = field(default_factory=list)


class ChatStreamTranslator(ItemStreamTranslator[_OpenMessage | _OpenReasoning]):
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
        super().__init__(request, tools, response_id=response_id, created_at=created_at, model=model)
        self._think = ThinkTagSplitter()
        offered = len(tools) > 0 and request.tool_choice != "none"
        families = families_for(tool_call_text) if offered else frozenset()
        self._text_calls = (
            TextCallRecognizer(lambda: offered_tools(tools), families) if families else None
        )
        self._calls: list[OpenCall] = []  # in order of first appearance
        self._calls_by_index: dict[int, OpenCall] = {}
        self._finish_reason: str | None = None

    # ------------------------------------------------------------ public API

    def _read(self, chunk: JSON) -> None:
        """One upstream chunk (or in-stream ``{"error": ...}`` object)."""
        text = plain_content(chunk)
        if text is not None and self._passes(text):
            self._text_delta(text)  # nearly every chunk of an answer: its next few characters
            return
        failure = upstream_failure(chunk)
        if failure is not None:
            message, code = failure
            self._write_failure(message, code)
            return
        for signal in self._signals(chunk):
            self._apply(signal)

    def _read_plain(self, chunks: PlainChunks) -> None:
        """Plain chunks read from their bytes, as one piece of text when it passes as it
        is (the same text as theirs one by one, in fewer deltas), else one by one."""
        if self._passes(chunks.text):
            self._text_delta(chunks.text)
        else:
            for chunk in chunks.objects():
                self._read(chunk)

    # ------------------------------------------------------------ the wire's ending and usage

    def _as_stream(self, answer: JSON) -> list[JSON]:
        return completion_chunks(answer)

    def _end_of_stream(self, ended_cleanly: bool) -> StreamEnd:
        """What the content's decoders held back applied, the end decided: a call that
        has a name but waits counts as produced."""
        for signal in self._flush_content():
            self._apply(signal)
        produced = self._writer.items_added > 0 or any(c.name for c in self._calls if c.state is WAITING)
        return decide_stream_end(self._finish_reason, produced=produced, ended_cleanly=ended_cleanly)

    def _close_open_items(self, status: ItemStatus) -> None:
        """The open item, then the calls still waiting; a call that never got a name is dropped."""
        self._close_live(status)
        self._flush_waiting_calls(status)
        nameless = sum(1 for c in self._calls if c.state is WAITING)
        self.conversions.extend(["tool call without a name dropped"] * nameless)

    def _mapped_usage(self) -> JSON | None:
        return map_usage(self._usage)

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

    def _passes(self, text: str) -> bool:
        """Whether content ``text`` is answer text as it is: past any ``<think>`` block, and
        with no call written into the text beginning in it."""
        if not self._think.passes_text:
            return False
        recognizer = self._text_calls
        return recognizer is None or recognizer.passes(text)

    def _text_delta(self, text: str) -> None:
        """``_apply(Text(text))``, without the signal when a message is open."""
        message = self._live
        if isinstance(message, _OpenMessage):
            self._message_delta(message, "output_text", text)
        else:
            self._apply(Text(text))

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
        self._go_live(call)
        if call.kind is ToolKind.FUNCTION and call.arguments:
            self._writer.arguments_delta(call.item_id, call.output_index, call.arguments)

    def _close_item(self, live: _OpenMessage | _OpenReasoning, status: ItemStatus) -> JSON:
        if isinstance(live, _OpenMessage):
            self._close_part(live)
            return {
                "id": live.item_id,
                "type": "message",
                "status": status,
                "role": "assistant",
                "content": live.parts,
            }
        writer = self._writer
        text = "".join(live.text)
        part = {"type": "reasoning_text", "text": text}
        writer.reasoning_done(live.item_id, live.output_index, text)
        writer.part_done(live.item_id, live.output_index, 0, part)
        return {
            "id": live.item_id,
            "type": "reasoning",
            "status": status,
            "summary": [],
            "content": [part],
            "encrypted_content": seal_reasoning(text),
        }

