"""``ResponsesEventWriter``: the one writer of a Responses event stream.

Every answer translator (a Chat stream, a Responses backend's stream, an Anthropic
Messages stream) decides *what* happens to the response it builds; the writer says it,
as the events a Responses client reads (reference §2-§5):

* every event gets the next ``sequence_number`` (0, 1, 2, ... across the stream);
* item ids are fresh and reproducible (``new_id``), output indices follow the order of
  adding (``new_output_index``; ``add_item`` takes both and writes ``.added``);
* one method per event: the lifecycle (``begin``, ``lifecycle``; ``open`` begins the
  stream if need be and says whether it still takes events), items
  (``item_added`` / ``item_done``), content parts, text / refusal / reasoning deltas
  and their ``.done``, function-call arguments, custom tool input, and ``error``;
* the stream's end: ``end(decide_stream_end(...), ...)`` writes ``response.completed``,
  ``response.incomplete`` or ``error`` + ``response.failed``; ``fail`` writes the latter
  for a response the translator already holds (a backend's own snapshot);
* the Response object itself (``response``): the skeleton every event repeats and the
  request fields it echoes (``echo_request``), built here and nowhere else;
* foreign events (a Responses backend's own) are renumbered into the stream by ``relay``.

A translator writes, then hands the client ``take()``: the events since the last take.
The writer keeps the stream's state (``StreamState``): ``NOT_STARTED`` until
``response.created``, ``IN_PROGRESS`` until a terminal event, then ``ENDED``, with the
terminal Response object in ``final``.

The writer is on the hot path (one or more events per upstream chunk): each event is
written by one call, inline, as the dict literal the client gets (typed by the
``StreamEvent`` TypedDicts, checked statically only), appended to a list; nothing else
is allocated for it and no further call is made.

Writing an answer translator on it (``ChatStreamTranslator`` does; ``WrittenAnswer`` in
``translator`` gives it ``finished`` and ``response``)::

    writer = ResponsesEventWriter(request, response_id=..., created_at=..., model=...)
    writer.begin()                                  # created + in_progress
    item_id, index = writer.add_item(
        "msg", {"type": "message", "status": "in_progress", "role": "assistant", "content": []}
    )                                               # a fresh id, the next index, .added
    empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    writer.part_added(item_id, index, 0, empty)
    writer.text_delta(item_id, index, 0, "Hello")   # once per upstream chunk
    writer.text_done(item_id, index, 0, "Hello")
    writer.part_done(item_id, index, 0, part)       # part: the whole output_text part
    writer.item_done(index, item)                   # item: the whole message, completed
    writer.end(decide_stream_end("stop", produced=True, ended_cleanly=True),
               output=[item], usage=usage)          # response.completed
    events = writer.take()                          # what to send, numbered 0, 1, 2, ...
"""

from __future__ import annotations

import hashlib
from enum import Enum
from typing import Any, Literal, cast

from toolwire.protocol import ResponsesRequest, StreamEvent

from ._echo import echo_request
from .stream_end import StreamEnd, StreamOutcome

__all__ = ["LifecycleType", "ResponsesEventWriter", "StreamState"]

JSON = dict[str, Any]
LifecycleType = Literal[
    "response.created",
    "response.in_progress",
    "response.completed",
    "response.failed",
    "response.incomplete",
]
_TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete"})


class StreamState(Enum):
    """Where a Responses event stream is."""

    NOT_STARTED = "not started"
    """Nothing written yet: the next event is ``response.created``."""
    IN_PROGRESS = "in progress"
    """``response.created`` written; items and their events may follow."""
    ENDED = "ended"
    """A terminal event written; nothing follows it."""


# The members bound once: looking up an Enum member costs ~60 ns in Python 3.11.
_NOT_STARTED, _IN_PROGRESS, _ENDED = (
    StreamState.NOT_STARTED,
    StreamState.IN_PROGRESS,
    StreamState.ENDED,
)
_FAILED, _INCOMPLETE = StreamOutcome.FAILED, StreamOutcome.INCOMPLETE


class ResponsesEventWriter:
    """Writes one response's Responses stream events, numbered, into a list to ``take``."""

    __slots__ = (
        "_created_at",
        "_events",
        "_ids",
        "_model",
        "_next_output_index",
        "_response_id",
        "_sequence_number",
        "echo",
        "final",
        "state",
    )

    def __init__(
        self, request: ResponsesRequest, *, response_id: str, created_at: int, model: str
    ) -> None:
        self._response_id = response_id
        self._created_at = created_at
        self._model = model
        self.echo: JSON = echo_request(request)
        """The request fields every Response object repeats (shared: do not change)."""
        self.state = _NOT_STARTED
        self.final: JSON | None = None
        """The Response object of the terminal event, once written."""
        self._events: list[StreamEvent] = []
        self._sequence_number = 0
        self._ids = 0
        self._next_output_index = 0

    # ------------------------------------------------------------ what the writer keeps

    def take(self) -> list[StreamEvent]:
        """The events written since the last ``take``, in order."""
        events, self._events = self._events, []
        return events

    def new_id(self, prefix: str, *, length: int = 32) -> str:
        """A fresh id (``msg_...``), derived from the response id: unique across
        responses, and the same for the same response, event for event."""
        self._ids += 1
        digest = hashlib.sha256(f"{self._response_id}/{self._ids}".encode()).hexdigest()
        return f"{prefix}_{digest[:length]}"

    def new_output_index(self) -> int:
        """The ``output_index`` of the next item added."""
        index = self._next_output_index
        self._next_output_index = index + 1
        return index

    def add_item(self, prefix: str, fields: JSON) -> tuple[str, int]:
        """A new item: a fresh id (``prefix_...``), the next output index, and its
        ``output_item.added`` (``{"id": ..., **fields}``). The id and the index."""
        item_id, output_index = self.new_id(prefix), self.new_output_index()
        self.item_added(output_index, {"id": item_id, **fields})
        return item_id, output_index

    @property
    def items_added(self) -> int:
        """How many output indices were given out (items added, or about to be)."""
        return self._next_output_index

    def response(
        self,
        status: str,
        *,
        output: list[JSON],
        usage: JSON | None = None,
        error: JSON | None = None,
        incomplete_details: JSON | None = None,
        completed_at: int | None = None,
    ) -> JSON:
        """A Response object: this response's skeleton, then the request it echoes."""
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
            **self.echo,
        }

    # ------------------------------------------------------------ the lifecycle

    def begin(self) -> None:
        """``response.created`` and ``response.in_progress`` (no output, no usage), unless
        the stream has begun."""
        if self.state is _NOT_STARTED:
            self.lifecycle("response.created", self.response("in_progress", output=[]))
            self.lifecycle("response.in_progress", self.response("in_progress", output=[]))

    def open(self) -> bool:
        """Whether the stream takes more events (no terminal event yet), ``begin`` written
        first if it was not: what a translator asks before it writes."""
        state = self.state
        if state is _ENDED:
            return False
        if state is _NOT_STARTED:
            self.begin()
        return True

    def lifecycle(self, kind: LifecycleType, response: JSON) -> None:
        """A lifecycle event carrying ``response``; a terminal one ends the stream."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append({"type": kind, "sequence_number": number, "response": response})
        self._lifecycle_written(kind, response)

    def end(
        self,
        end: StreamEnd,
        *,
        output: list[JSON],
        usage: JSON | None = None,
        completed_at: int | None = None,
    ) -> JSON:
        """The terminal event ``end`` says, with ``output`` and ``usage``; the final Response.

        ``completed_at`` (unix seconds) defaults to ``created_at``: no clock is read here.
        """
        if end.outcome is _FAILED:
            assert end.message is not None and end.code is not None
            return self.fail(
                self.response("in_progress", output=output, usage=usage), end.message, end.code
            )
        if end.outcome is _INCOMPLETE:
            final = self.response(
                "incomplete",
                output=output,
                usage=usage,
                incomplete_details={"reason": end.incomplete_reason},
            )
            self.lifecycle("response.incomplete", final)
        else:
            final = self.response(
                "completed",
                output=output,
                usage=usage,
                completed_at=self._created_at if completed_at is None else completed_at,
            )
            self.lifecycle("response.completed", final)
        return final

    def fail(self, response: JSON, message: str, code: str = "server_error") -> JSON:
        """``error`` then ``response.failed`` carrying ``response``, marked failed in place."""
        self.error(message, code)
        response["status"] = "failed"
        response["error"] = {"code": code, "message": message}
        self.lifecycle("response.failed", response)
        return response

    def error(self, message: str, code: str = "server_error") -> None:
        """An ``error`` event, in the flat (spec) form and OpenAI's nested one."""
        # The SDK's ResponseError.code enum (reference §4.3) lacks "context_length_exceeded",
        # so a strict SDK client rejects the failed response carrying it; Codex, the main
        # client, recognises a context overflow only by exactly this code (codex-client §3),
        # so it is kept and the strict-mode mismatch accepted.
        error_type = (
            "invalid_request_error" if code == "context_length_exceeded" else "server_error"
        )
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "error",
                "sequence_number": number,
                "code": code,
                "message": message,
                "param": None,
                "error": {"type": error_type, "code": code, "message": message, "param": None},
            }
        )

    def relay(self, event: JSON) -> None:
        """An event from elsewhere (a Responses backend's), renumbered into this stream.

        A lifecycle event moves the stream's state as if it had been written here.
        """
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(cast("StreamEvent", {**event, "sequence_number": number}))
        response = event.get("response")
        if isinstance(response, dict):
            self._lifecycle_written(str(event.get("type")), response)

    def _lifecycle_written(self, kind: str, response: JSON) -> None:
        if kind in _TERMINAL:
            self.state = _ENDED
            self.final = response
        elif self.state is _NOT_STARTED:
            self.state = _IN_PROGRESS

    # ------------------------------------------------------------ items and content parts

    def item_added(self, output_index: int, item: JSON) -> None:
        """``response.output_item.added``: ``item`` as it starts (``status`` in_progress)."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "response.output_item.added",
                "sequence_number": number,
                "output_index": output_index,
                "item": item,
            }
        )

    def item_done(self, output_index: int, item: JSON) -> None:
        """``response.output_item.done``: ``item`` as the client keeps it (``output`` holds
        this very object)."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "response.output_item.done",
                "sequence_number": number,
                "output_index": output_index,
                "item": item,
            }
        )

    def part_added(self, item_id: str, output_index: int, content_index: int, part: JSON) -> None:
        """``response.content_part.added``: a message's or reasoning's part, empty."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "response.content_part.added",
                "sequence_number": number,
                "item_id": item_id,
                "output_index": output_index,
                "content_index": content_index,
                "part": part,
            }
        )

    def part_done(self, item_id: str, output_index: int, content_index: int, part: JSON) -> None:
        """``response.content_part.done``: the part whole."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "response.content_part.done",
                "sequence_number": number,
                "item_id": item_id,
                "output_index": output_index,
                "content_index": content_index,
                "part": part,
            }
        )

    # ------------------------------------------------------------ text, refusal, reasoning

    def text_delta(self, item_id: str, output_index: int, content_index: int, delta: str) -> None:
        """``response.output_text.delta``: more of an ``output_text`` part."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "response.output_text.delta",
                "sequence_number": number,
                "item_id": item_id,
                "output_index": output_index,
                "content_index": content_index,
                "delta": delta,
                "logprobs": [],
            }
        )

    def text_done(self, item_id: str, output_index: int, content_index: int, text: str) -> None:
        """``response.output_text.done``: the part's whole text."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "response.output_text.done",
                "sequence_number": number,
                "item_id": item_id,
                "output_index": output_index,
                "content_index": content_index,
                "text": text,
                "logprobs": [],
            }
        )

    def refusal_delta(
        self, item_id: str, output_index: int, content_index: int, delta: str
    ) -> None:
        """``response.refusal.delta``: more of a ``refusal`` part."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "response.refusal.delta",
                "sequence_number": number,
                "item_id": item_id,
                "output_index": output_index,
                "content_index": content_index,
                "delta": delta,
            }
        )

    def refusal_done(
        self, item_id: str, output_index: int, content_index: int, refusal: str
    ) -> None:
        """``response.refusal.done``: the part's whole refusal."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "response.refusal.done",
                "sequence_number": number,
                "item_id": item_id,
                "output_index": output_index,
                "content_index": content_index,
                "refusal": refusal,
            }
        )

    def reasoning_delta(
        self, item_id: str, output_index: int, delta: str, content_index: int = 0
    ) -> None:
        """``response.reasoning_text.delta``: more of the raw reasoning (not a summary)."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "response.reasoning_text.delta",
                "sequence_number": number,
                "item_id": item_id,
                "output_index": output_index,
                "content_index": content_index,
                "delta": delta,
            }
        )

    def reasoning_done(
        self, item_id: str, output_index: int, text: str, content_index: int = 0
    ) -> None:
        """``response.reasoning_text.done``: the whole reasoning text."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "response.reasoning_text.done",
                "sequence_number": number,
                "item_id": item_id,
                "output_index": output_index,
                "content_index": content_index,
                "text": text,
            }
        )

    # ------------------------------------------------------------ tool calls

    def arguments_delta(self, item_id: str, output_index: int, delta: str) -> None:
        """``response.function_call_arguments.delta``: more of a ``function_call``'s arguments."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "response.function_call_arguments.delta",
                "sequence_number": number,
                "item_id": item_id,
                "output_index": output_index,
                "delta": delta,
            }
        )

    def arguments_done(self, item_id: str, output_index: int, arguments: str, name: str) -> None:
        """``response.function_call_arguments.done``: the whole arguments, and the function's
        name as the client knows it."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "response.function_call_arguments.done",
                "sequence_number": number,
                "item_id": item_id,
                "output_index": output_index,
                "arguments": arguments,
                "name": name,
            }
        )

    def custom_input_delta(self, item_id: str, output_index: int, delta: str) -> None:
        """``response.custom_tool_call_input.delta``: more of a ``custom_tool_call``'s input."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "response.custom_tool_call_input.delta",
                "sequence_number": number,
                "item_id": item_id,
                "output_index": output_index,
                "delta": delta,
            }
        )

    def custom_input_done(self, item_id: str, output_index: int, text: str) -> None:
        """``response.custom_tool_call_input.done``: the whole raw input."""
        number = self._sequence_number
        self._sequence_number = number + 1
        self._events.append(
            {
                "type": "response.custom_tool_call_input.done",
                "sequence_number": number,
                "item_id": item_id,
                "output_index": output_index,
                "input": text,
            }
        )
