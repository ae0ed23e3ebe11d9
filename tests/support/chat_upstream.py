"""A scripted Chat Completions upstream: a real HTTP server for gateway tests.

This module owns the fake backend that every gateway test talks to. `ChatUpstream`
listens on 127.0.0.1 (a free port), answers ``POST /v1/chat/completions`` and
``GET /v1/models`` from a script, and records what it received. It is a `ThreadedServer`:
aiohttp in a background thread with its own event loop, so sync tests, async tests and a
gateway in another process can all reach it through `ChatUpstream.base_url`.

A test scripts the upstream with reply values, consumed one per chat request (FIFO):

* `Text` / `ToolCalls` -- a normal completion, streamed or not as the request asks;
* `HttpError` -- a non-200 answer before any streaming;
* `StreamError` -- a vLLM-style ``data: {"error": ...}`` after some chunks, then ``[DONE]``;
* `Cut` -- some chunks, then the server closes the connection (no finish, no ``[DONE]``);
* `Stall` -- some chunks, then silence for a while (then the rest of the stream);
* `Raw` -- exact bytes, for garbage and framing tests.

When the queue is empty, `ChatUpstream.responder` (if set) is asked instead; when neither
has an answer the upstream replies 500 with a body that says the script ran out.

Two wire styles follow the conformance reference (section 7): ``"openai"`` (role chunk
first, text and tool-call arguments in small fragments, ``id``/``name`` only on a call's
first delta, ``finish_reason`` on its own ``delta: {}`` chunk) and ``"ollama"`` (every
delta carries ``role`` and ``content``, each tool call whole in one chunk, reasoning and
content in separate chunks, ``system_fingerprint: "fp_ollama"``, no ``logprobs`` key).
Both send a usage chunk with ``choices: []`` only when the request asked for
``stream_options.include_usage``, then ``data: [DONE]``.

The chunk builders (`stream_payloads`, `completion_payload`) are pure functions; the
server is a thin shell that writes them. For each streamed request whose client went
away before the stream was over, the upstream records a `Disconnect` with the monotonic
times the stream started and the close was noticed.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import orjson
from aiohttp import web

from tests.support.threaded_server import Recorded, ScriptedServer

__all__ = [
    "DEFAULT_MODEL",
    "Call",
    "ChatUpstream",
    "Completion",
    "Cut",
    "Disconnect",
    "HttpError",
    "Raw",
    "ReasoningField",
    "RecordedRequest",
    "Reply",
    "ReplyContext",
    "Responder",
    "Stall",
    "StreamError",
    "Style",
    "Text",
    "ToolCalls",
    "completion_payload",
    "stream_payloads",
]

Style: TypeAlias = Literal["openai", "ollama"]
ReasoningField: TypeAlias = Literal["reasoning_content", "reasoning"]

DEFAULT_MODEL = "scripted-model"
_DEFAULT_REASONING_FIELD: dict[Style, ReasoningField] = {
    "openai": "reasoning_content",
    "ollama": "reasoning",
}
_FINGERPRINT: dict[Style, str] = {"openai": "fp_scripted", "ollama": "fp_ollama"}


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class Text:
    """A plain answer; `reasoning` (if any) is streamed before the text.

    `finish_reason=None` sends no finish chunk at all (``finish_reason`` null at EOF).
    `reasoning_field` overrides the server's field name for this reply only.
    `usage` replaces the computed usage object.
    """

    text: str
    reasoning: str | None = None
    finish_reason: str | None = "stop"
    reasoning_field: ReasoningField | None = None
    usage: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Call:
    """One function call; `id=None` gets a deterministic ``call_<request>_<index>``."""

    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True)
class ToolCalls:
    """Tool calls, optionally preceded by reasoning and text.

    `finish_reason` is sent as given, so ``None`` or ``"stop"`` script the wrong finish
    reasons real backends send. `interleave=True` (openai style only) interleaves the
    calls' deltas by index instead of sending the calls one after the other.
    """

    calls: Sequence[Call]
    text: str | None = None
    reasoning: str | None = None
    finish_reason: str | None = "tool_calls"
    interleave: bool = False
    reasoning_field: ReasoningField | None = None
    usage: Mapping[str, Any] | None = None


Completion: TypeAlias = Text | ToolCalls
"""The replies that describe an answer (the failure replies wrap one)."""
_PARTIAL_ANSWER = Text("This answer is going to be interrupted before it is complete.")


@dataclass(frozen=True)
class HttpError:
    """A non-200 answer before any streaming; a dict or list body is sent as JSON, a
    string as it is (``text/plain`` unless `headers` name another ``Content-Type``)."""

    status: int
    body: Mapping[str, Any] | list[Any] | str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamError:
    """`after_chunks` chunks of `reply`, then ``data: <error_body>`` and ``data: [DONE]``.

    A non-streaming request gets HTTP 500 with `error_body` instead.
    """

    after_chunks: int
    error_body: Mapping[str, Any] = field(
        default_factory=lambda: {
            "error": {
                "message": "scripted in-stream failure",
                "type": "InternalServerError",
                "param": None,
                "code": 500,
            }
        }
    )
    reply: Completion = _PARTIAL_ANSWER


@dataclass(frozen=True)
class Cut:
    """`after_chunks` chunks of `reply`, then the server closes the TCP connection.

    A non-streaming request gets its connection closed without any response.
    """

    after_chunks: int
    reply: Completion = _PARTIAL_ANSWER


@dataclass(frozen=True)
class Stall:
    """`after_chunks` chunks of `reply`, then `seconds` of silence, then the rest.

    A non-streaming request waits `seconds` before its whole answer. With `release`, the
    silence ends as soon as the test sets that event (`seconds` is then only a bound):
    a test that needs the stall to outlast something waits for that, then releases it.
    """

    after_chunks: int
    seconds: float = 30.0
    reply: Completion = _PARTIAL_ANSWER
    release: threading.Event | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Raw:
    """Exact bytes: each element is written verbatim, in its own write (a float among
    them pauses that many seconds instead).

    Nothing is added, so include ``data: `` prefixes and blank lines yourself.
    ``linger`` keeps the body open that many seconds after the last line, as a server
    that sends ``[DONE]`` and closes the body later does.
    """

    lines: Sequence[bytes | float]
    status: int = 200
    content_type: str = "text/event-stream"
    linger: float = 0.0


Reply: TypeAlias = Text | ToolCalls | HttpError | StreamError | Cut | Stall | Raw
Responder: TypeAlias = Callable[[Any], Reply]
"""Called with the request's JSON body when the queue is empty."""


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the upstream received it (header names lower-cased)."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    json: Any
    """The parsed body, or None when it was empty or not JSON."""
    received_at: float
    """`time.monotonic()` when the request arrived."""


@dataclass(frozen=True)
class Disconnect:
    """A client that went away before its stream was over."""

    request_index: int
    """Index into `ChatUpstream.requests`."""
    stream_started_at: float
    """`time.monotonic()` just before the response headers were sent."""
    noticed_at: float
    """`time.monotonic()` when the upstream noticed the closed connection."""


# --------------------------------------------------------------------------- payloads (pure)


@dataclass(frozen=True)
class ReplyContext:
    """What the payload builders need to know about the request being answered."""

    style: Style = "openai"
    request_index: int = 0
    """Makes the ids: ``chatcmpl-<request_index>``, ``call_<request_index>_<call index>``."""
    model: str = DEFAULT_MODEL
    include_usage: bool = False
    reasoning_field: ReasoningField | None = None
    """None: ``reasoning_content`` for openai style, ``reasoning`` for ollama; a reply's
    own `reasoning_field` wins over both."""
    fragment_size: int = 4
    prompt_tokens: int = 10
    created: int = 1_700_000_000


def _reasoning_field(reply: Completion, ctx: ReplyContext) -> ReasoningField:
    return reply.reasoning_field or ctx.reasoning_field or _DEFAULT_REASONING_FIELD[ctx.style]


def _fragments(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def _calls(reply: Completion) -> Sequence[Call]:
    return reply.calls if isinstance(reply, ToolCalls) else ()


def _call_id(call: Call, index: int, ctx: ReplyContext) -> str:
    return call.id if call.id is not None else f"call_{ctx.request_index}_{index}"


def _usage(reply: Completion, ctx: ReplyContext) -> dict[str, Any]:
    if reply.usage is not None:
        return dict(reply.usage)
    reasoning_tokens = len(reply.reasoning or "") // 4
    generated = len(reply.text or "") + sum(
        len(call.name) + len(call.arguments) for call in _calls(reply)
    )
    completion_tokens = reasoning_tokens + generated // 4 + 1
    usage: dict[str, Any] = {
        "prompt_tokens": ctx.prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": ctx.prompt_tokens + completion_tokens,
    }
    if ctx.style == "openai":
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return usage


def _envelope(ctx: ReplyContext, choices: list[dict[str, Any]]) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": f"chatcmpl-{ctx.request_index}",
        "object": "chat.completion.chunk",
        "created": ctx.created,
        "model": ctx.model,
        "system_fingerprint": _FINGERPRINT[ctx.style],
        "choices": choices,
    }
    if ctx.style == "openai" and ctx.include_usage:
        chunk["usage"] = None
    return chunk


def _chunk(
    ctx: ReplyContext, delta: dict[str, Any], finish_reason: str | None = None
) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "delta": delta}
    if ctx.style == "openai":
        choice["logprobs"] = None
    choice["finish_reason"] = finish_reason
    return _envelope(ctx, [choice])


def _usage_chunk(reply: Completion, ctx: ReplyContext) -> dict[str, Any]:
    chunk = _envelope(ctx, [])
    chunk["usage"] = _usage(reply, ctx)
    return chunk


def _openai_deltas(reply: Completion, ctx: ReplyContext) -> list[dict[str, Any]]:
    calls, text = _calls(reply), reply.text
    size = ctx.fragment_size
    deltas: list[dict[str, Any]] = [
        {"role": "assistant", "content": None if calls and text is None else "", "refusal": None}
    ]
    field_name = _reasoning_field(reply, ctx)
    deltas += [{field_name: piece} for piece in _fragments(reply.reasoning or "", size)]
    deltas += [{"content": piece} for piece in _fragments(text or "", size)]
    per_call: list[list[dict[str, Any]]] = []
    for index, call in enumerate(calls):
        first = {
            "index": index,
            "id": _call_id(call, index, ctx),
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        rest = [
            {"index": index, "function": {"arguments": piece}}
            for piece in _fragments(call.arguments, size)
        ]
        per_call.append([first, *rest])
    if isinstance(reply, ToolCalls) and reply.interleave:
        rounds = max((len(pieces) for pieces in per_call), default=0)
        ordered = [pieces[r] for r in range(rounds) for pieces in per_call if r < len(pieces)]
    else:
        ordered = [piece for pieces in per_call for piece in pieces]
    deltas += [{"tool_calls": [piece]} for piece in ordered]
    return deltas


def _ollama_deltas(reply: Completion, ctx: ReplyContext) -> list[dict[str, Any]]:
    size = ctx.fragment_size
    deltas: list[dict[str, Any]] = [
        {"role": "assistant", "content": "", _reasoning_field(reply, ctx): piece}
        for piece in _fragments(reply.reasoning or "", size)
    ]
    deltas += [
        {"role": "assistant", "content": piece} for piece in _fragments(reply.text or "", size)
    ]
    for index, call in enumerate(_calls(reply)):
        whole = {
            "id": _call_id(call, index, ctx),
            "index": index,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        deltas.append({"role": "assistant", "content": "", "tool_calls": [whole]})
    return deltas


def stream_payloads(reply: Completion, ctx: ReplyContext) -> list[dict[str, Any]]:
    """Every ``data:`` payload of a streamed answer, in order, without ``[DONE]``."""
    if ctx.style == "openai":
        chunks = [_chunk(ctx, delta) for delta in _openai_deltas(reply, ctx)]
        finish_delta: dict[str, Any] = {}
    else:
        chunks = [_chunk(ctx, delta) for delta in _ollama_deltas(reply, ctx)]
        finish_delta = {"role": "assistant", "content": ""}
    if reply.finish_reason is not None:
        chunks.append(_chunk(ctx, finish_delta, reply.finish_reason))
    if ctx.include_usage:
        chunks.append(_usage_chunk(reply, ctx))
    return chunks


def completion_payload(reply: Completion, ctx: ReplyContext) -> dict[str, Any]:
    """The ``chat.completion`` object of a non-streamed answer."""
    calls, text = _calls(reply), reply.text
    message: dict[str, Any] = {"role": "assistant"}
    if ctx.style == "openai":
        message["content"] = text
        if reply.reasoning is not None:
            message[_reasoning_field(reply, ctx)] = reply.reasoning
        message["refusal"] = None
    else:
        message["content"] = text or ""
        if reply.reasoning:
            message[_reasoning_field(reply, ctx)] = reply.reasoning
    if calls:
        message["tool_calls"] = [
            {
                "id": _call_id(call, index, ctx),
                **({"index": index} if ctx.style == "ollama" else {}),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for index, call in enumerate(calls)
        ]
    choice: dict[str, Any] = {"index": 0, "message": message}
    if ctx.style == "openai":
        choice["logprobs"] = None
    choice["finish_reason"] = reply.finish_reason
    return {
        "id": f"chatcmpl-{ctx.request_index}",
        "object": "chat.completion",
        "created": ctx.created,
        "model": ctx.model,
        "system_fingerprint": _FINGERPRINT[ctx.style],
        "choices": [choice],
        "usage": _usage(reply, ctx),
    }


def _sse(payload: Any) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


_DONE = b"data: [DONE]\n\n"


def _error_body(message: str, error_type: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": None}}


class _NoScriptedReply(Exception):
    """Neither the queue nor the responder had a reply (or the responder raised)."""


# --------------------------------------------------------------------------- server


class ChatUpstream(ScriptedServer[Reply, RecordedRequest, Disconnect]):
    """The scripted upstream. Start it (or use it as a context manager), then script it.

    `style`, `reasoning_field`, `fragment_size` and `responder` may be changed at any
    time; they are read when a request arrives.
    """

    def __init__(
        self,
        style: Style = "openai",
        *,
        reasoning_field: ReasoningField | None = None,
        fragment_size: int = 4,
        models: Sequence[str] = (DEFAULT_MODEL,),
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if fragment_size < 1:
            raise ValueError("fragment_size must be at least 1")
        super().__init__(port=port, ssl_context=ssl_context)
        self.style: Style = style
        self.reasoning_field: ReasoningField | None = reasoning_field
        """None: ``reasoning_content`` for openai style, ``reasoning`` for ollama."""
        self.fragment_size = fragment_size
        self.models = tuple(models)
        self._ended = Recorded[int]("response body written to its end")

    # ----------------------------------------------------------------- script & records

    @property
    def chat_requests(self) -> list[Any]:
        """The JSON bodies of the ``POST /v1/chat/completions`` requests."""
        return [r.json for r in self.requests if r.path == "/v1/chat/completions"]

    @property
    def ended(self) -> list[int]:
        """The indices (into `requests`) of the streamed or raw answers whose body was
        written to its end, in the order they ended."""
        return self._ended.snapshot()

    def reset(self) -> None:
        super().reset()
        self._ended.clear()

    # ----------------------------------------------------------------- lifecycle

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (``https`` with an ``ssl_context``), what a gateway is configured with."""
        return f"{self.scheme}://127.0.0.1:{self.port}/v1"

    def _make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_route("*", "/{tail:.*}", self._unknown_route)
        return app

    # ----------------------------------------------------------------- handlers

    def _record(self, request: web.Request, body: bytes) -> tuple[int, Any]:
        try:
            parsed: Any = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            parsed = None
        recorded = RecordedRequest(
            method=request.method,
            path=request.path,
            headers={name.lower(): value for name, value in request.headers.items()},
            body=body,
            json=parsed,
            received_at=time.monotonic(),
        )
        return self._requests.append(recorded), parsed

    def _scripted_reply(self, request_json: Any, index: int) -> Reply:
        try:
            reply = self._next_reply(request_json)
        except Exception as exc:
            raise _NoScriptedReply(
                f"ChatUpstream responder raised on request #{index}: {exc!r}"
            ) from exc
        if reply is None:
            raise _NoScriptedReply(
                f"ChatUpstream script ran out: no queued reply and no responder for "
                f"request #{index} (POST /v1/chat/completions)"
            )
        return reply

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self._record(request, await request.read())
        data = [
            {"id": model, "object": "model", "created": 0, "owned_by": "toolwire-tests"}
            for model in self.models
        ]
        return _json_response(200, {"object": "list", "data": data})

    async def _unknown_route(self, request: web.Request) -> web.StreamResponse:
        self._record(request, await request.read())
        message = f"ChatUpstream has no route {request.method} {request.path}"
        return _json_response(404, _error_body(message, "not_found_error"))

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._cancelled_on_stop(self._answer(request))

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        index, request_json = self._record(request, body)
        if not isinstance(request_json, dict):
            message = "ChatUpstream: request body is not a JSON object"
            return _json_response(400, _error_body(message, "invalid_request_error"))
        try:
            reply = self._scripted_reply(request_json, index)
        except _NoScriptedReply as exc:
            return _json_response(500, _error_body(str(exc), "scripted_upstream_error"))

        if isinstance(reply, HttpError):
            return _http_error_response(reply)
        if isinstance(reply, Raw):
            return await self._write_raw(request, index, reply)
        completion = reply if isinstance(reply, Text | ToolCalls) else reply.reply
        ctx = self._context(request_json, index)
        if request_json.get("stream") is True:
            return await self._stream(request, index, reply, stream_payloads(completion, ctx))
        return await self._whole(request, reply, completion_payload(completion, ctx))

    async def _whole(
        self, request: web.Request, reply: Reply, payload: dict[str, Any]
    ) -> web.StreamResponse:
        """Answer a non-streaming request; the failure replies have no chunks to count."""
        match reply:
            case StreamError(error_body=error_body):
                return _json_response(500, error_body)
            case Cut():
                _close_transport(request)
                return await _await_cancellation()
            case Stall():
                await _stall(reply)
        return _json_response(200, payload)

    def _context(self, request_json: dict[str, Any], index: int) -> ReplyContext:
        stream_options = request_json.get("stream_options")
        model = request_json.get("model")
        return ReplyContext(
            style=self.style,
            request_index=index,
            model=model if isinstance(model, str) else DEFAULT_MODEL,
            include_usage=isinstance(stream_options, dict)
            and stream_options.get("include_usage") is True,
            reasoning_field=self.reasoning_field,
            fragment_size=self.fragment_size,
            prompt_tokens=len(orjson.dumps(request_json.get("messages", []))) // 4 + 1,
            created=int(time.time()),
        )

    async def _write_raw(self, request: web.Request, index: int, reply: Raw) -> web.StreamResponse:
        response = web.StreamResponse(
            status=reply.status, headers={"Content-Type": reply.content_type}
        )
        started_at = time.monotonic()
        with self._noticing_disconnect(lambda: self._note_disconnect(index, started_at)):
            await response.prepare(request)
            for line in reply.lines:
                if isinstance(line, float):
                    await asyncio.sleep(line)
                else:
                    await response.write(line)
            if reply.linger:
                await asyncio.sleep(reply.linger)
            await response.write_eof()
        self._ended.append(index)
        return response

    async def _stream(
        self, request: web.Request, index: int, reply: Reply, payloads: list[dict[str, Any]]
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        after = (
            reply.after_chunks if isinstance(reply, StreamError | Cut | Stall) else len(payloads)
        )
        started_at = time.monotonic()
        with self._noticing_disconnect(
            lambda: self._note_disconnect(index, started_at), closed_by_us=isinstance(reply, Cut)
        ):
            await response.prepare(request)
            for payload in payloads[:after]:
                await response.write(_sse(payload))
            match reply:
                case StreamError(error_body=error_body):
                    await response.write(_sse(error_body))
                case Cut():
                    _close_transport(request)
                    return await _await_cancellation()
                case Stall():
                    await _stall(reply)
                    for payload in payloads[after:]:
                        await response.write(_sse(payload))
            await response.write(_DONE)
            await response.write_eof()
        self._ended.append(index)
        return response

    def _note_disconnect(self, index: int, started_at: float) -> None:
        self._disconnects.append(Disconnect(index, started_at, time.monotonic()))


async def _stall(stall: Stall) -> None:
    if stall.release is None:
        await asyncio.sleep(stall.seconds)
        return
    deadline = asyncio.get_running_loop().time() + stall.seconds
    while not stall.release.is_set() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.005)  # polled, so that a client leaving cancels it at once


def _http_error_response(reply: HttpError) -> web.Response:
    if isinstance(reply.body, str):
        return web.Response(status=reply.status, text=reply.body, headers=dict(reply.headers))
    response = _json_response(reply.status, reply.body)
    response.headers.update(reply.headers)
    return response


def _json_response(status: int, payload: Any) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(payload), content_type="application/json")


def _close_transport(request: web.Request) -> None:
    """Close the connection as a crashing backend would: buffered bytes go, nothing more."""
    transport = request.transport
    if transport is not None:
        transport.close()


async def _await_cancellation() -> web.StreamResponse:
    """Park a handler whose connection we closed until aiohttp cancels it."""
    await asyncio.sleep(60)
    raise RuntimeError("ChatUpstream: closed connection was not noticed within 60 s")
