"""``ResponsesStreamRestorer``: a downgraded backend's answer, as the client declared it.

The backend answered a request rewritten by ``downgrade_request``; the restorer gives
the client back what it asked for. Its events pass through, renumbered into the
client's stream by ``ResponsesEventWriter``, with every item restored (``ItemRestorer``:
a ``function_call`` of a custom tool becomes a ``custom_tool_call``, its arguments events
``custom_tool_call_input`` events; a flattened name gets its namespace back) and every
Response object under the gateway's id, model and the client's own tools, with every
field the specification requires (``complete_response``); a flat ``error`` event gets
its ``error`` object. Restoring is decided by the declared tool's kind, never by the
capability alone: a ``function_call`` that names a custom tool always comes back as a
``custom_tool_call``, since Codex aborts a turn on a call whose payload does not match
its tool.

Pure: an incremental decoder (``feed(event) -> list[event]``, ``finish() ->
list[event]``) with the same methods as ``ChatStreamTranslator``, including
``translate_whole`` for a non-streamed answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from toolwire.protocol import (
    TERMINAL_EVENT_TYPES,
    PlainChunks,
    StreamItem,
    WholeAnswer,
    response_as_events,
)
from toolwire.tools import ToolKind

from .._echo import complete_response
from ..translator import WHOLE_ANSWER_STREAMED, WrittenAnswer
from ..writer import ResponsesEventWriter, StreamState
from ._items import ItemRestorer
from ._table import DowngradedTool
from .downgrade import DowngradedRequest

__all__ = ["ResponsesStreamRestorer"]

JSON = dict[str, Any]


@dataclass(slots=True)
class _RestoredCall:
    """A call whose events are rewritten: its arguments events become input events."""

    tool: DowngradedTool
    item_id: str
    arguments: list[str] = field(default_factory=list)
    input_sent: bool = False


class ResponsesStreamRestorer(WrittenAnswer):
    """The backend's Responses events in, the events the client should see out.

    ``feed(event)`` takes one parsed event; ``finish()`` is the end of the backend's
    stream; ``fail(message)`` a transport error. Each returns the events to send,
    numbered 0, 1, 2, ... across the stream. Exactly one terminal event ends it (the
    backend's, or ``response.failed`` from ``finish``/``fail`` if it sent none); after
    it every call returns ``[]``.

    Every Response object carries ``response_id`` (the gateway's id: it keeps the
    conversation, so it names the response), ``model`` (the client's name for the
    model; without one, the request's) and the client's ``tools`` and ``tool_choice``, not the downgraded ones, and
    every field the specification requires, filled from the request where the backend
    left one out.
    ``created_at`` is used only when the backend failed before sending a Response.
    """

    def __init__(
        self,
        downgraded: DowngradedRequest,
        *,
        response_id: str,
        created_at: int,
        model: str | None = None,
    ) -> None:
        self.conversions: list[str] = []
        """Every repair applied to the backend's output, e.g. ``custom exec restored``."""
        request = downgraded.request
        self._request = request
        model = model if model is not None else request.model
        self._writer = ResponsesEventWriter(
            request, response_id=response_id, created_at=created_at, model=model
        )
        self._items = ItemRestorer(downgraded.tools, self.conversions)
        self._response_id = response_id
        self._model = model
        self._snapshot: JSON | None = None
        self._calls: dict[int, _RestoredCall] = {}  # by output_index
        self._done: dict[int, JSON] = {}  # restored done items, by output_index

    def _response_so_far(self) -> JSON:
        snapshot = dict(self._snapshot or self._writer.response("in_progress", output=[]))
        snapshot["output"] = [self._done[index] for index in sorted(self._done)]
        return snapshot

    # ------------------------------------------------------------ public API

    def feed(self, item: StreamItem) -> list[JSON]:
        """The events to send for one backend event (Chat chunks, which a Responses backend
        never sends, are read one by one)."""
        if isinstance(item, PlainChunks):
            return [event for chunk in item.objects() for event in self.feed(chunk)]
        if isinstance(item, WholeAnswer):
            self.conversions.append(WHOLE_ANSWER_STREAMED)
            return [event for streamed in response_as_events(item.answer) for event in self.feed(streamed)]
        if self.finished:
            return []
        event = item
        kind = event.get("type")
        if kind in ("response.output_item.added", "response.output_item.done"):
            self._on_item(event)
        elif kind in (
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
        ):
            self._on_arguments(event)
        elif isinstance(event.get("response"), dict):
            self._on_lifecycle(event)
        elif kind == "error":
            self._writer.relay(_error_event(event))
        else:
            self._writer.relay(event)
        return self._take()

    def start(self) -> list[JSON]:
        """Nothing to send before the backend's own ``response.created``."""
        return []

    def finish(self, *, completed_at: int | None = None, ended_cleanly: bool = True) -> list[JSON]:
        """The backend's stream ended; a stream without a terminal event has failed.

        The arguments are the stream translators' common ones: the backend's own
        terminal event carries its times and says it ended.
        """
        if self.finished:
            return []
        return self.fail("The upstream stream closed before a terminal event (response.completed).")

    def fail(self, message: str, *, code: str = "server_error") -> list[JSON]:
        """``error`` then ``response.failed`` with the items done so far."""
        if self.finished:
            return []
        writer = self._writer
        if writer.state is StreamState.NOT_STARTED:
            writer.lifecycle("response.created", writer.response("in_progress", output=[]))
        writer.fail(self.response, message, code)
        return self._take()

    def translate_whole(self, answer: JSON) -> JSON:
        """A whole (non-streamed) Response object from the backend, restored the same way."""
        restored = self._echo(answer)
        output = answer.get("output")
        if isinstance(output, list):
            restored["output"] = [
                self._items.restore(item, done=True) if isinstance(item, dict) else item
                for item in output
            ]
        return restored

    restore_response = translate_whole
    """The former name of ``translate_whole``."""

    # ------------------------------------------------------------ events

    def _on_lifecycle(self, event: JSON) -> None:
        """created / in_progress / ... and the terminal events: the Response object restored."""
        response = self._echo(event["response"])
        output = event["response"].get("output")  # before _echo, which makes a missing one []
        terminal = event["type"] in TERMINAL_EVENT_TYPES
        if isinstance(output, list):
            response["output"] = [
                self._items.restore(item, done=True, record=False)
                if isinstance(item, dict)
                else item
                for item in output
            ]
        elif terminal:
            response["output"] = [self._done[index] for index in sorted(self._done)]
        if not terminal:
            self._snapshot = response
        self._writer.relay({**event, "response": response})

    def _on_item(self, event: JSON) -> None:
        item = event.get("item")
        index = event.get("output_index")
        if not isinstance(item, dict) or not isinstance(index, int):
            self._writer.relay(event)
            return
        done = event["type"] == "response.output_item.done"
        tool = self._items.call_tool(item)
        restored = self._items.restore(item, done=done)
        if tool is not None and item.get("type") != restored.get("type"):
            # A function call restored to another kind: its arguments events are rewritten.
            call = self._calls.setdefault(index, _RestoredCall(tool, str(restored["id"])))
            if done and restored["type"] == "custom_tool_call" and not call.input_sent:
                self._write_input(call, index, str(restored["input"]))
        if done:
            self._done[index] = restored
            self._calls.pop(index, None)
        self._writer.relay({**event, "item": restored})

    def _on_arguments(self, event: JSON) -> None:
        index = event.get("output_index")
        call = self._calls.get(index) if isinstance(index, int) else None
        if call is None:
            self._writer.relay(self._renamed_arguments(event))
            return
        if event["type"] == "response.function_call_arguments.delta":
            delta = event.get("delta")
            if isinstance(delta, str):
                call.arguments.append(delta)
            return
        if call.tool.kind is not ToolKind.CUSTOM or call.input_sent:
            return
        arguments = event.get("arguments")
        if not isinstance(arguments, str):
            arguments = "".join(call.arguments)
        text = self._items.custom_input({"arguments": arguments}, call.tool, record=False)
        assert isinstance(index, int)
        self._write_input(call, index, text)

    def _renamed_arguments(self, event: JSON) -> JSON:
        """An arguments event may name the function (``done`` does; a backend's deltas may
        too): the client's name."""
        name = event.get("name")
        if not isinstance(name, str):
            return event
        client_name = self._items.function_name(name)
        return event if client_name is None else {**event, "name": client_name}

    def _write_input(self, call: _RestoredCall, index: int, text: str) -> None:
        """A restored custom call's input events, once: the whole input as one delta."""
        call.input_sent = True
        if text:
            self._writer.custom_input_delta(call.item_id, index, text)
        self._writer.custom_input_done(call.item_id, index, text)

    # ------------------------------------------------------------ the client's view

    def _take(self) -> list[JSON]:
        return cast("list[JSON]", self._writer.take())

    def _echo(self, response: JSON) -> JSON:
        """The Response object under the gateway's id, repeating the client's request, with
        every field the specification requires (a backend may leave some out)."""
        echo = self._writer.echo
        restored = complete_response(response, echo)
        restored["id"] = self._response_id
        restored["tools"] = echo["tools"]
        # The gateway resolved previous_response_id itself: the backend never saw it.
        restored["previous_response_id"] = echo["previous_response_id"]
        if self._request.tool_choice is not None:
            restored["tool_choice"] = self._request.tool_choice
        restored["model"] = self._model
        return restored


def _error_event(event: JSON) -> JSON:
    """A backend's ``error`` event with the ``error`` object the specification requires
    (OpenAI's servers send the flat form only: ``code``, ``message``, ``param``)."""
    if isinstance(event.get("error"), dict):
        return event
    code, message, param = event.get("code"), event.get("message"), event.get("param")
    error_type = "invalid_request_error" if code == "context_length_exceeded" else "server_error"
    return {
        **event,
        "error": {
            "type": error_type,
            "code": code if isinstance(code, str) else None,
            "message": message if isinstance(message, str) else "The upstream reported an error.",
            "param": param if isinstance(param, str) else None,
        },
    }
