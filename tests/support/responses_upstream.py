"""A scripted Responses upstream: a real HTTP server for the Responses backend and agent tests.

``ResponsesUpstream`` listens on 127.0.0.1 (a free port), answers ``POST /v1/responses``
from a script and ``GET /v1/models`` with a fixed list, and records every request (headers
and JSON body). Like ``ChatUpstream`` it is a ``ThreadedServer``: aiohttp in a background
thread with its own loop, so sync tests, async tests, a gateway or an agent CLI in another
process can all reach it at ``base_url``.

Replies are consumed one per request (FIFO), then ``responder`` is asked:

* `Events` -- an exact list of stream events, each sent as ``event: <type>`` plus
  ``data: <json>``; a non-streaming request gets the terminal event's ``response``;
* `HttpError` -- a non-200 answer before any streaming;
* `Cut` -- the first ``after`` events of a stream, then the connection is closed;
* `Whole` -- a JSON body answered as it is (``POST /v1/responses/compact``, which shares
  the script: a server that compacts by itself);
* ``toolwire.agent.ScriptedResponse`` -- for a streaming request, the frames of
  ``toolwire.agent.response_stream`` (response id ``resp_<request index>``, the request's
  model); one with ``stall_after`` then sends nothing until the client goes away.

For each stream whose client went away before it was over, the upstream records the
request's index in ``requests`` (``disconnects``, ``wait_for_disconnect``).

`answer(items)` builds the `Events` a well-behaved server sends for a list of output
items (``response.created`` ... per item ``output_item.added`` / deltas / ``done`` ...
``response.completed`` with the full output and usage), splitting deltas into small
fragments. The builders are pure functions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import orjson
from aiohttp import web

from tests.support.threaded_server import ScriptedServer
from toolwire.agent import ScriptedResponse, response_stream

__all__ = [
    "Cut",
    "Events",
    "HttpError",
    "RecordedRequest",
    "Reply",
    "ResponsesUpstream",
    "Whole",
    "answer",
    "custom_call",
    "function_call",
    "message",
]

JSON = dict[str, Any]


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class Events:
    """A stream, exactly: the events are written in order, ``sequence_number`` as given."""

    events: Sequence[JSON]
    done_marker: bool = False
    """Send ``data: [DONE]`` after the events (OpenAI does not; some servers do)."""


@dataclass(frozen=True)
class HttpError:
    status: int
    body: Mapping[str, Any] | str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Cut:
    """The first ``after`` events of ``events``, then the TCP connection is closed."""

    events: Sequence[JSON]
    after: int


@dataclass(frozen=True)
class Whole:
    """A JSON body, answered with status 200 as it is."""

    body: JSON


Reply: TypeAlias = Events | HttpError | Cut | ScriptedResponse | Whole
Responder: TypeAlias = Callable[[Any], Reply]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: Mapping[str, str]
    json: Any


# --------------------------------------------------------------------------- builders (pure)


def message(text: str, item_id: str = "msg_up_1") -> JSON:
    return {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def function_call(
    name: str,
    arguments: str,
    call_id: str,
    *,
    namespace: str | None = None,
    item_id: str | None = None,
) -> JSON:
    item: JSON = {
        "id": item_id or f"fc_{call_id}",
        "type": "function_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
    }
    if namespace is not None:
        item["namespace"] = namespace
    item["arguments"] = arguments
    return item


def custom_call(
    name: str, text: str, call_id: str, *, namespace: str | None = None, item_id: str | None = None
) -> JSON:
    item: JSON = {
        "id": item_id or f"ctc_{call_id}",
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
    }
    if namespace is not None:
        item["namespace"] = namespace
    item["input"] = text
    return item


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def answer(
    items: Sequence[JSON],
    *,
    model: str = "upstream-model",
    response_id: str = "resp_upstream_1",
    tools: Sequence[JSON] = (),
    fragment_size: int = 5,
    arguments_done: bool = True,
    usage: JSON | None = None,
) -> Events:
    """The events of one successful stream that outputs ``items``.

    ``arguments_done=False`` leaves out ``function_call_arguments.done`` (some servers
    go straight from the deltas to ``output_item.done``).
    """
    snapshot: JSON = {
        "id": response_id,
        "object": "response",
        "created_at": 1_750_000_000,
        "status": "in_progress",
        "model": model,
        "output": [],
        "usage": None,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "tool_choice": "auto",
        "tools": list(tools),
    }
    events: list[JSON] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    emit("response.created", response=snapshot)
    emit("response.in_progress", response=snapshot)
    for index, item in enumerate(items):
        at: JSON = {"item_id": item["id"], "output_index": index}
        kind = item["type"]
        if kind == "message":
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            for content_index, part in enumerate(item["content"]):
                emit(
                    "response.content_part.added",
                    **at,
                    content_index=content_index,
                    part={**part, "text": ""},
                )
                for piece in _pieces(part["text"], fragment_size):
                    emit(
                        "response.output_text.delta",
                        **at,
                        content_index=content_index,
                        delta=piece,
                        logprobs=[],
                    )
                emit(
                    "response.output_text.done",
                    **at,
                    content_index=content_index,
                    text=part["text"],
                    logprobs=[],
                )
                emit("response.content_part.done", **at, content_index=content_index, part=part)
        elif kind == "function_call":
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            for piece in _pieces(item["arguments"], fragment_size):
                emit("response.function_call_arguments.delta", **at, delta=piece)
            if arguments_done:
                emit(
                    "response.function_call_arguments.done",
                    **at,
                    arguments=item["arguments"],
                    name=item["name"],
                )
        elif kind == "custom_tool_call":
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "input": ""},
            )
            for piece in _pieces(item["input"], fragment_size):
                emit("response.custom_tool_call_input.delta", **at, delta=piece)
            emit("response.custom_tool_call_input.done", **at, input=item["input"])
        else:
            emit("response.output_item.added", output_index=index, item=item)
        emit("response.output_item.done", output_index=index, item=item)
    final_usage = usage or {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 120,
    }
    emit(
        "response.completed",
        response={
            **snapshot,
            "status": "completed",
            "output": list(items),
            "usage": final_usage,
            "completed_at": 1_750_000_001,
        },
    )
    return Events(events)


def _frame(event: JSON) -> bytes:
    return (
        b"event: " + str(event.get("type")).encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"
    )


_Ending: TypeAlias = Literal["eof", "close", "stall"]
"""How a stream ends after its frames: normally, by closing the connection, or never."""


def _stream_of(
    reply: Events | Cut | ScriptedResponse, response_id: str, model: str
) -> tuple[list[bytes], _Ending]:
    match reply:
        case Events(events=events, done_marker=done_marker):
            frames = [_frame(event) for event in events]
            if done_marker:
                frames.append(b"data: [DONE]\n\n")
            return frames, "eof"
        case Cut(events=events, after=after):
            return [_frame(event) for event in events[:after]], "close"
        case ScriptedResponse(stall_after=stall_after):
            frames = response_stream(reply, response_id=response_id, model=model)
            return frames, "eof" if stall_after is None else "stall"


def _terminal_response(events: Sequence[JSON]) -> JSON | None:
    for event in reversed(events):
        if event.get("type") in ("response.completed", "response.failed", "response.incomplete"):
            response = event.get("response")
            return response if isinstance(response, dict) else None
    return None


# --------------------------------------------------------------------------- server


class ResponsesUpstream(ScriptedServer[Reply, RecordedRequest, int]):
    """The scripted server. Start it (or use it as a context manager), then script it."""

    def __init__(self, models: Sequence[str] = ("upstream-model",)) -> None:
        super().__init__()
        self.models = tuple(models)

    # ----------------------------------------------------------------- script & records

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of the ``POST /v1/responses`` requests."""
        return [r.json for r in self.requests if r.path == "/v1/responses"]

    @property
    def compact_bodies(self) -> list[Any]:
        """The JSON bodies of the ``POST /v1/responses/compact`` requests."""
        return [r.json for r in self.requests if r.path == "/v1/responses/compact"]

    # ----------------------------------------------------------------- lifecycle

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_post("/v1/responses/compact", self._responses)
        app.router.add_get("/v1/models", self._models)
        return app

    # ----------------------------------------------------------------- handlers

    def _record(self, request: web.Request, body: bytes) -> tuple[int, Any]:
        """Record the request; return its index in ``requests`` and its parsed body."""
        try:
            parsed: Any = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            parsed = None
        headers = {name.lower(): value for name, value in request.headers.items()}
        recorded = RecordedRequest(request.method, request.path, headers, parsed)
        return self._requests.append(recorded), parsed

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self._record(request, await request.read())
        data = [
            {"id": model, "object": "model", "created": 0, "owned_by": "tests"}
            for model in self.models
        ]
        return web.json_response({"object": "list", "data": data})

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        index, body = self._record(request, await request.read())
        reply = self._next_reply(body)
        if reply is None:
            error = {
                "error": {"message": "ResponsesUpstream script ran out", "type": "server_error"}
            }
            return web.Response(
                status=500, body=orjson.dumps(error), content_type="application/json"
            )
        if isinstance(reply, HttpError):
            if isinstance(reply.body, str):
                return web.Response(
                    status=reply.status, text=reply.body, headers=dict(reply.headers)
                )
            response = web.Response(
                status=reply.status, body=orjson.dumps(reply.body), content_type="application/json"
            )
            response.headers.update(reply.headers)
            return response
        if isinstance(reply, Whole):
            return web.Response(status=200, body=orjson.dumps(reply.body), content_type="application/json")
        streaming = isinstance(body, dict) and body.get("stream") is True
        if not streaming:
            final = _terminal_response(reply.events) if isinstance(reply, Events) else None
            return web.Response(
                status=200, body=orjson.dumps(final), content_type="application/json"
            )
        frames, ending = _stream_of(reply, f"resp_{index}", str(body.get("model")))
        stream = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        with self._noticing_disconnect(
            lambda: self._disconnects.append(index), closed_by_us=ending == "close"
        ):
            await stream.prepare(request)
            for frame in frames:
                await stream.write(frame)
            match ending:
                case "eof":
                    await stream.write_eof()
                case "close":
                    if request.transport is not None:
                        request.transport.close()
                    await asyncio.sleep(60)  # aiohttp cancels the handler once the peer is gone
                case "stall":
                    await asyncio.Event().wait()  # likewise, once the client goes away
        return stream
