"""``ItemStreamTranslator``: what the stream translators of the Chat and Messages wires share.

Both build the response's items themselves from what the backend streams (Chat chunks,
Messages events), one open item at a time (``_live``), and end the same way:

* ``start``, ``feed``, ``fail`` and ``finish``: the lifecycle, a transport error (``error`` +
  ``response.failed`` with the items done so far), and the upstream's end (the wire says
  how it ended, ``_end_of_stream``; the open items are closed, or left out of a failed
  response: half a tool call never reaches the client);
* ``translate_whole``: a whole answer fed as the stream that would have carried it
  (``_as_stream``), so streamed and whole answers cannot disagree;
* tool calls: ``_go_live`` adds a named ``OpenCall`` (``CallReader`` restores it to the
  client's tool), ``_close_call`` writes its closing events and its done item;
* ``_close_live``: the open item's ``.done`` events, then ``output_item.done``.

A wire's translator says what its stream's objects mean (``_read``, which ``feed`` calls
while the stream is open), how an item of its own kind closes (``_close_item``), and
what its usage is in Responses terms (``_mapped_usage``). The translator decides;
``ResponsesEventWriter`` writes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from toolwire.protocol import PlainChunks, ResponsesRequest, StreamEvent, StreamItem, WholeAnswer
from toolwire.tools import ToolKind

from ._calls import CLOSED, CallReader, ItemStatus, OpenCall, call_item
from .stream_end import StreamEnd, StreamOutcome
from .tool_table import UpstreamToolTable
from .translator import WHOLE_ANSWER_STREAMED, WrittenAnswer
from .writer import ResponsesEventWriter

JSON = dict[str, Any]
# Bound once: an Enum member lookup costs ~60 ns in Python 3.11.
_FAILED, _COMPLETED = StreamOutcome.FAILED, StreamOutcome.COMPLETED


@dataclass(slots=True)
class OpenItem:
    """An item being streamed (a wire's own kind adds what it gathers): its id, and where
    it is in the output."""

    item_id: str
    output_index: int


OpenItemT = TypeVar("OpenItemT", bound=OpenItem)


class ItemStreamTranslator(WrittenAnswer, ABC, Generic[OpenItemT]):
    """The base of a stream translator that builds the items itself; ``OpenItemT``: the
    wire's own kinds of open item (a message, reasoning, ...), besides calls."""

    def __init__(
        self, request: ResponsesRequest, tools: UpstreamToolTable, *, response_id: str, created_at: int, model: str
    ) -> None:
        self._writer = ResponsesEventWriter(request, response_id=response_id, created_at=created_at, model=model)
        self.conversions: list[str] = []
        """Every repair applied to the upstream's output, e.g. ``custom apply_patch restored``."""
        self._reader = CallReader(tools, self.conversions)
        self._output: list[JSON] = []  # done items, in output_index order
        self._live: OpenItemT | OpenCall | None = None
        self._usage: JSON | None = None  # as the upstream reported it so far

    # ------------------------------------------------------------ public API

    def start(self) -> list[StreamEvent]:
        """``response.created`` and ``response.in_progress`` (empty output, no usage)."""
        self._writer.begin()
        return self._writer.take()

    def feed(self, item: StreamItem, /) -> list[StreamEvent]:
        """The events one object of the upstream's stream produces (``_read``)."""
        writer = self._writer
        if not writer.open():
            return []
        if isinstance(item, PlainChunks):
            self._read_plain(item)
        elif isinstance(item, WholeAnswer):
            self.conversions.append(WHOLE_ANSWER_STREAMED)
            for streamed in self._as_stream(item.answer):
                self._read(streamed)
        else:
            self._read(item)
        return writer.take()

    def finish(self, *, completed_at: int | None = None, ended_cleanly: bool = True) -> list[StreamEvent]:
        """The upstream ended: close open items in order and write the terminal event.

        ``completed_at`` (unix seconds) defaults to ``created_at``: the translator reads
        no clock. ``ended_cleanly`` is false when the body just stopped, without its
        protocol's end: with no finish reason either, the answer was cut short, and the
        response fails rather than pass a truncated answer (or tool call) as complete.
        """
        writer = self._writer
        if not writer.open():
            return []
        end = self._end_of_stream(ended_cleanly)
        if end.outcome is _FAILED:
            self._live = None  # open items stay unfinished: half a tool call never reaches the client
        else:
            self._close_open_items("completed" if end.outcome is _COMPLETED else "incomplete")
        writer.end(end, output=list(self._output), usage=self._mapped_usage(), completed_at=completed_at)
        return writer.take()

    def fail(self, message: str, *, code: str = "server_error") -> list[StreamEvent]:
        """The upstream broke (transport error, cut connection): ``error`` + ``response.failed``."""
        if not self._writer.open():
            return []
        self._write_failure(message, code)
        return self._writer.take()

    def translate_whole(self, answer: JSON, /) -> JSON:
        """The Response object for a whole (non-streamed) answer, translated as the stream
        that would have carried it (``status`` failed if it holds an error).

        A translator serves one response: this is instead of ``start``/``feed``/``finish``.
        """
        for item in self._as_stream(answer):
            self.feed(item)
        self.finish()
        return self.response

    def _response_so_far(self) -> JSON:
        """The Response so far, with the usage the upstream reported until now, if any
        (a stream the client cut still counts what it used)."""
        return self._writer.response("in_progress", output=list(self._output), usage=self._mapped_usage())

    # ------------------------------------------------------------ what the wire says

    @abstractmethod
    def _read(self, item: JSON, /) -> None:
        """What one object of the upstream's stream says, written (the stream has begun)."""

    def _read_plain(self, chunks: PlainChunks, /) -> None:
        """Plain Chat chunks read from their bytes: each read in full, unless the wire
        knows better."""
        for chunk in chunks.objects():
            self._read(chunk)

    @abstractmethod
    def _as_stream(self, answer: JSON, /) -> list[JSON]:
        """A whole answer as the stream objects that would have carried it."""

    @abstractmethod
    def _end_of_stream(self, ended_cleanly: bool) -> StreamEnd:
        """How the stream ends (``decide_stream_end``), after what the wire held back."""

    def _close_open_items(self, status: ItemStatus) -> None:
        """At the end of a stream that did not fail: close what is open."""
        self._close_live(status)

    @abstractmethod
    def _close_item(self, live: OpenItemT, status: ItemStatus) -> JSON:
        """The wire's own open item's closing events, and its done item."""

    @abstractmethod
    def _mapped_usage(self) -> JSON | None:
        """The upstream's usage so far as Responses ``usage`` (None: none reported)."""

    # ------------------------------------------------------------ items and calls

    def _go_live(self, call: OpenCall) -> None:
        """Put a named call on the wire: the tool it restores to, and ``output_item.added``."""
        writer = self._writer
        self._reader.go_live(call, writer.new_output_index(), writer.new_id)
        self._live = call
        writer.item_added(call.output_index, call_item(call, "in_progress", {} if call.kind is ToolKind.TOOL_SEARCH else ""))

    def _close_live(self, status: ItemStatus) -> None:
        """Finish the open item, if any: its ``.done`` events, then ``output_item.done``."""
        live, self._live = self._live, None
        if live is None:
            return
        item = self._close_call(live, status) if isinstance(live, OpenCall) else self._close_item(live, status)
        self._output.append(item)
        self._writer.item_done(live.output_index, item)

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

    def _write_failure(self, message: str, code: str) -> None:
        """``error`` (flat and nested forms) then ``response.failed`` with the items done so far.

        An item still open is left unfinished and is not in ``output``: half a tool call
        must never reach a client that executes calls on ``output_item.done``.
        """
        writer = self._writer
        snapshot = writer.response("in_progress", output=list(self._output), usage=self._mapped_usage())
        writer.fail(snapshot, message, code)
        self._live = None
