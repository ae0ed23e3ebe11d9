"""A scripted Anthropic Messages API: a real HTTP server that enforces the API's rules.

`MessagesUpstream` listens on 127.0.0.1 (a `ThreadedServer`) and answers
``POST /v1/messages`` and ``GET /v1/models`` like Anthropic's API does, from a script:
replies queued with `enqueue` (FIFO), else `responder(request_json)`, else a 500 that
says the script ran out. Replies:

* `Answer` -- blocks (`Thinking`, `Redacted`, `Said`, `Use`, `Search`) and a stop
  reason, streamed as Anthropic streams them (``message_start``, ``ping``,
  ``content_block_start/delta/stop`` with ``thinking_delta`` + ``signature_delta``,
  ``input_json_delta`` fragments split anywhere, ``message_delta`` with usage and cache
  fields, ``message_stop``) or as one Message;
* `HttpError` -- an error status with Anthropic's error body (and headers, e.g.
  ``retry-after``);
* `StreamError` -- some events, then an ``error`` event (``overloaded_error``);
* `Cut` -- some events, then the connection closes; `Stall` -- some events, silence,
  the rest; `Raw` -- exact bytes.

Before answering, every request is checked against the rules the real API enforces,
and one that breaks a rule gets a 400 ``invalid_request_error`` naming it
(`rule_violations` is the pure check): the key in ``x-api-key`` (or, for a vendor that
wants it, ``Authorization: Bearer``) and ``anthropic-version``; ``max_tokens``; the
first message a user one, roles alternating, no empty content or text; every
``tool_use`` answered by its ``tool_result`` in the very next user message, results
first; tools declared whenever a ``tool_use`` or ``tool_result`` block is sent; tool
names in ``^[a-zA-Z0-9_-]{1,64}$`` and client tools with an object ``input_schema``; thinking blocks sent back unchanged (each signature is this server's
HMAC of its text; redacted data must be data it issued), and with thinking on, a tool
loop's assistant turn must begin with one; at most four ``cache_control`` breakpoints.

A request whose tools and system carry ``cache_control`` is billed as a prompt cache
would bill it: the first time a cache write, then reads (``cache_read_input_tokens``).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import orjson
from aiohttp import web

from tests.support.threaded_server import ScriptedServer

JSON = dict[str, Any]
_SECRET = b"scripted-messages-upstream"
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_TOOL_USE_ID = re.compile(r"[a-zA-Z0-9_-]+")
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_SERVER_TOOLS = frozenset({"web_search_20250305"})


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class Thinking:
    text: str


@dataclass(frozen=True)
class Redacted:
    data: str = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URv"


@dataclass(frozen=True)
class Said:
    text: str


@dataclass(frozen=True)
class Use:
    """A ``tool_use``; ``input`` an object, or raw JSON text (which may be malformed)."""

    name: str
    input: JSON | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Search:
    """The backend's own web search: ``server_tool_use`` then ``web_search_tool_result``."""

    query: str
    urls: Sequence[str] = ()


Block: TypeAlias = Thinking | Redacted | Said | Use | Search


@dataclass(frozen=True)
class Answer:
    blocks: Sequence[Block]
    stop_reason: str | None = None
    """None: ``tool_use`` when a Use is among the blocks, else ``end_turn``."""

    @property
    def stop(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(isinstance(block, Use) for block in self.blocks) else "end_turn"


_PARTIAL = Answer([Said("This answer is going to be interrupted before it is complete.")])


@dataclass(frozen=True)
class HttpError:
    status: int
    error_type: str
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamError:
    """``after_events`` events of ``reply``, then an ``error`` event."""

    after_events: int
    error_type: str = "overloaded_error"
    message: str = "Overloaded"
    reply: Answer = _PARTIAL


@dataclass(frozen=True)
class Cut:
    after_events: int
    reply: Answer = _PARTIAL


@dataclass(frozen=True)
class Stall:
    after_events: int
    seconds: float = 30.0
    reply: Answer = _PARTIAL


@dataclass(frozen=True)
class Raw:
    lines: Sequence[bytes]
    status: int = 200
    content_type: str = "text/event-stream"


Reply: TypeAlias = Answer | HttpError | StreamError | Cut | Stall | Raw
Responder: TypeAlias = Callable[[Any], Reply]


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: Mapping[str, str]
    json: Any


# --------------------------------------------------------------------------- the rules (pure)


def sign(thinking: str) -> str:
    """The signature this server gives a thinking text (and checks when it comes back)."""
    return hmac.new(_SECRET, thinking.encode(), hashlib.sha256).hexdigest()


def rule_violations(
    body: Any, headers: Mapping[str, str], *, auth: str = "x-api-key", max_temperature: float = 1.0
) -> list[str]:
    """Every rule of the Messages API that the request breaks (empty: it is valid).
    ``max_temperature``: Anthropic's is 1 (DeepSeek's endpoint takes up to 2)."""
    found: list[str] = []
    if auth == "x-api-key" and not headers.get("x-api-key"):
        found.append("x-api-key header: required")
    if auth == "x-api-key" and "authorization" in headers:
        found.append("authorization header: this API takes the key in x-api-key")
    if auth == "bearer" and not headers.get("authorization", "").startswith("Bearer "):
        found.append("authorization header: a Bearer token is required")
    if not headers.get("anthropic-version"):
        found.append("anthropic-version header: required")
    if not isinstance(body, dict):
        return [*found, "body: expected a JSON object"]
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        found.append("max_tokens: Field required (a positive integer)")
        max_tokens = 0
    thinking = body.get("thinking")
    thinking_on = isinstance(thinking, dict) and thinking.get("type") == "enabled"
    if thinking_on:
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024 or budget >= max_tokens:
            found.append("thinking.budget_tokens: must be >= 1024 and less than max_tokens")
        if "temperature" in body:
            found.append("temperature: may not be set while thinking is enabled")
    temperature = body.get("temperature")
    if temperature is not None and not (isinstance(temperature, int | float) and 0 <= temperature <= max_temperature):
        found.append(f"temperature: must be between 0 and {max_temperature:g}")
    found += _tool_violations(body, thinking_on)
    found += _message_violations(body.get("messages"), thinking_on)
    if not body.get("tools") and _has_tool_blocks(body.get("messages")):
        found.append("Requests which include `tool_use` or `tool_result` blocks must define tools.")
    found += _system_violations(body.get("system"))
    breakpoints = orjson.dumps(body).count(b'"cache_control"')
    if breakpoints > 4:
        found.append(f"cache_control: a maximum of 4 blocks with cache_control may be provided, found {breakpoints}")
    return found


def _system_violations(system: Any) -> list[str]:
    if system is None or isinstance(system, str):
        return []
    if not isinstance(system, list):
        return ["system: expected a string or a list of text blocks"]
    return [
        f"system.{index}: text blocks must be non-empty"
        for index, block in enumerate(system)
        if not (isinstance(block, dict) and block.get("type") == "text" and block.get("text"))
    ]


def _tool_violations(body: JSON, thinking_on: bool) -> list[str]:
    found: list[str] = []
    names: set[str] = set()
    tools = body.get("tools") or []
    for index, tool in enumerate(tools):
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            found.append(f"tools.{index}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
            continue
        if name in names:
            found.append(f"tools: Tool names must be unique ({name})")
        names.add(name)
        kind = tool.get("type")
        if kind in _SERVER_TOOLS:
            continue
        if kind not in (None, "custom"):
            found.append(f"tools.{index}.type: unknown tool type {kind!r}")
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            found.append(f"tools.{index}.custom.input_schema: Field required (an object schema)")
    choice = body.get("tool_choice")
    if choice is not None:
        kind = choice.get("type") if isinstance(choice, dict) else None
        if kind not in ("auto", "any", "tool", "none"):
            found.append("tool_choice.type: must be auto, any, tool or none")
        if kind == "tool" and choice.get("name") not in names:
            found.append(f"tool_choice.name: no tool named {choice.get('name')!r}")
        if thinking_on and kind in ("any", "tool"):
            found.append("tool_choice: Thinking may not be enabled when tool_choice forces tool use.")
    return found


def _message_violations(messages: Any, thinking_on: bool) -> list[str]:
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    found: list[str] = []
    if not isinstance(messages[0], dict) or messages[0].get("role") != "user":
        found.append("messages.0.role: the first message must use the user role")
    previous_role = None
    pending_uses: list[str] = []  # tool_use ids the next message must answer
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            found.append(f"{where}.role: must be user or assistant")
            continue
        if role == previous_role:
            found.append(f"{where}.role: roles must alternate between user and assistant")
        previous_role = role
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not blocks:
            found.append(f"{where}.content: messages must have non-empty content")
            continue
        found += _block_violations(where, blocks)
        results = [b.get("tool_use_id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if pending_uses:
            leading = 0
            while leading < len(blocks) and isinstance(blocks[leading], dict) and blocks[leading].get("type") == "tool_result":
                leading += 1
            answered = set(results[:leading]) if role == "user" else set()
            missing = [use for use in pending_uses if use not in answered]
            if missing:
                found.append(
                    f"{where}: `tool_use` ids were found without `tool_result` blocks immediately after: {', '.join(missing)}. "
                    "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                )
            if leading < len(results):
                found.append(f"{where}: tool_result blocks must come first in the message content")
            stray = [r for r in results if r not in pending_uses]
        else:
            stray = results
        if stray:
            found.append(f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {', '.join(map(str, stray))}")
        pending_uses = (
            [b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"] if role == "assistant" else []
        )
    if thinking_on and len(messages) >= 2:
        found += _thinking_loop_violations(messages)
    return found


def _has_tool_blocks(messages: Any) -> bool:
    return isinstance(messages, list) and any(
        isinstance(block, dict) and block.get("type") in ("tool_use", "tool_result")
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
    )


def _thinking_loop_violations(messages: list[Any]) -> list[str]:
    last, before = messages[-1], messages[-2]
    content = last.get("content") if isinstance(last, dict) else None
    if not (isinstance(content, list) and content and content[0].get("type") == "tool_result"):
        return []
    assistant = before.get("content") if isinstance(before, dict) else None
    if isinstance(assistant, list) and assistant and assistant[0].get("type") in ("thinking", "redacted_thinking"):
        return []
    return [
        f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        f"`{assistant[0].get('type') if isinstance(assistant, list) and assistant else None}`. When `thinking` is enabled, "
        "a final `assistant` message must start with a thinking block."
    ]


def _block_violations(where: str, blocks: list[Any]) -> list[str]:
    found: list[str] = []
    for index, block in enumerate(blocks):
        here = f"{where}.content.{index}"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            if not block.get("text"):
                found.append(f"{here}.text: text content blocks must be non-empty")
        elif kind == "thinking":
            if block.get("signature") != sign(str(block.get("thinking"))):
                found.append(f"{here}: Invalid `signature` in `thinking` block (the thinking was changed or not ours)")
        elif kind == "redacted_thinking":
            if not str(block.get("data", "")).startswith(Redacted().data[:12]):
                found.append(f"{here}: Invalid `data` in `redacted_thinking` block")
        elif kind == "tool_use":
            if not _TOOL_USE_ID.fullmatch(str(block.get("id"))) or not isinstance(block.get("input"), dict):
                found.append(f"{here}: tool_use needs an id matching ^[a-zA-Z0-9_-]+$ and an object input")
        elif kind == "tool_result":
            inner = block.get("content")
            if isinstance(inner, list):
                found += _block_violations(here, inner) if inner else [f"{here}.content: must be non-empty"]
            elif inner is not None and not isinstance(inner, str):
                found.append(f"{here}.content: a string or a list of blocks")
        elif kind == "image":
            source = block.get("source") or {}
            if source.get("type") == "base64" and source.get("media_type") not in _IMAGE_TYPES:
                found.append(f"{here}.source.media_type: unsupported image type")
        elif kind not in ("document",):
            found.append(f"{here}.type: unknown block type {kind!r}")
    return found


# --------------------------------------------------------------------------- events (pure)


def _pieces(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)] or [""]


def _uneven_pieces(text: str, size: int) -> list[str]:
    """Fragments of varying sizes, so JSON is split anywhere (inside strings, escapes, keys)."""
    pieces, start, step = [], 0, 0
    while start < len(text):
        length = 1 + (step * 7 + size) % (2 * size)
        pieces.append(text[start : start + length])
        start += length
        step += 1
    return pieces


def answer_events(answer: Answer, *, message_id: str, model: str, usage: JSON, fragment_size: int = 5) -> list[JSON]:
    """Every event of a streamed answer, as Anthropic sends them (pings included)."""
    events: list[JSON] = [
        {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {**usage, "output_tokens": 1},
            },
        },
        {"type": "ping"},
    ]
    for index, block in enumerate(_wire_blocks(answer, message_id)):
        events += _stream_block(index, block, fragment_size)
        if index % 2:
            events.append({"type": "ping"})
    output_tokens = max(1, len(orjson.dumps([repr(block) for block in answer.blocks])) // 4)
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": answer.stop, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        }
    )
    events.append({"type": "message_stop"})
    return events


def whole_message(answer: Answer, *, message_id: str, model: str, usage: JSON) -> JSON:
    output_tokens = max(1, len(orjson.dumps([repr(block) for block in answer.blocks])) // 4)
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _wire_blocks(answer, message_id),
        "stop_reason": answer.stop,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": output_tokens},
    }


def _wire_blocks(answer: Answer, message_id: str) -> list[JSON]:
    blocks: list[JSON] = []
    for index, block in enumerate(answer.blocks):
        if isinstance(block, Thinking):
            blocks.append({"type": "thinking", "thinking": block.text, "signature": sign(block.text)})
        elif isinstance(block, Redacted):
            blocks.append({"type": "redacted_thinking", "data": block.data})
        elif isinstance(block, Said):
            blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, Use):
            raw = block.input if isinstance(block.input, str) else orjson.dumps(block.input).decode()
            blocks.append({"type": "tool_use", "id": block.id or f"toolu_{message_id[4:]}_{index}", "name": block.name, "_raw": raw})
        else:
            server_id = f"srvtoolu_{message_id[4:]}_{index}"
            blocks.append({"type": "server_tool_use", "id": server_id, "name": "web_search", "input": {"query": block.query}})
            results = [
                {"type": "web_search_result", "url": url, "title": url, "encrypted_content": "EqgfCioIARgB", "page_age": None}
                for url in block.urls
            ]
            blocks.append({"type": "web_search_tool_result", "tool_use_id": server_id, "content": results})
    for block in blocks:  # the whole form: the tool input as an object
        if "_raw" in block:
            raw = block.pop("_raw")
            try:
                block["input"] = orjson.loads(raw)
            except orjson.JSONDecodeError:
                block["input"] = {}
            block["_stream"] = raw
    return blocks


def _stream_block(index: int, block: JSON, size: int) -> list[JSON]:
    kind = block["type"]
    start, deltas = dict(block), []
    if kind == "thinking":
        start["thinking"], start["signature"] = "", ""
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in _pieces(block["thinking"], size * 3)]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "text":
        start["text"] = ""
        deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"], size * 2)]
    elif kind in ("tool_use", "server_tool_use"):
        raw = start.pop("_stream", None) or orjson.dumps(block["input"]).decode()
        start["input"] = {}
        deltas = [{"type": "input_json_delta", "partial_json": ""}]
        deltas += [{"type": "input_json_delta", "partial_json": piece} for piece in _uneven_pieces(raw, size)]
    start.pop("_stream", None)
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        *({"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def _sse(event: JSON) -> bytes:
    return f"event: {event['type']}\ndata: ".encode() + orjson.dumps(event) + b"\n\n"


def error_body(error_type: str, message: str) -> JSON:
    return {"type": "error", "error": {"type": error_type, "message": message}}


# --------------------------------------------------------------------------- server


class MessagesUpstream(ScriptedServer[Reply, RecordedRequest, int]):
    """The scripted Messages API. ``base_url`` is the API root (``http://127.0.0.1:PORT``)."""

    def __init__(self, *, auth: Literal["x-api-key", "bearer"] = "x-api-key", fragment_size: int = 5) -> None:
        super().__init__()
        self.auth = auth
        self.fragment_size = fragment_size
        self._cached_prefixes: set[str] = set()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def message_requests(self) -> list[Any]:
        """The JSON bodies of the ``POST /v1/messages`` requests, in order."""
        return [r.json for r in self.requests if r.path == "/v1/messages"]

    def reset(self) -> None:
        super().reset()
        self._cached_prefixes.clear()
        self.auth = "x-api-key"

    def _make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_get("/v1/models", self._models)
        return app

    async def _models(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"data": [{"type": "model", "id": "claude-scripted"}], "has_more": False})

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        return await self._cancelled_on_stop(self._answer(request))

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        headers = {name.lower(): value for name, value in request.headers.items()}
        try:
            body: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
        index = self._requests.append(RecordedRequest(request.path, headers, body))
        violations = rule_violations(body, headers, auth=self.auth)
        if violations:
            return _json(400, error_body("invalid_request_error", "; ".join(violations)))
        reply = self._next_reply(body)
        if reply is None:
            return _json(500, error_body("api_error", f"MessagesUpstream script ran out at request #{index}"))
        if isinstance(reply, HttpError):
            response = _json(reply.status, error_body(reply.error_type, reply.message))
            response.headers.update(reply.headers)
            return response
        if isinstance(reply, Raw):
            return await self._write(request, index, reply.lines, status=reply.status, content_type=reply.content_type)
        answer = reply if isinstance(reply, Answer) else reply.reply
        message_id, model = f"msg_{index:04d}{time.monotonic_ns() % 10**6:06d}", str(body.get("model"))
        usage = self._usage(body)
        if body.get("stream") is not True:
            if isinstance(reply, StreamError):
                return _json(529, error_body(reply.error_type, reply.message))
            if isinstance(reply, Cut):
                if request.transport is not None:
                    request.transport.close()
                await asyncio.sleep(60)
            if isinstance(reply, Stall):
                await asyncio.sleep(reply.seconds)
            return _json(200, whole_message(answer, message_id=message_id, model=model, usage=usage))
        events = answer_events(answer, message_id=message_id, model=model, usage=usage, fragment_size=self.fragment_size)
        lines = [_sse(event) for event in events]
        match reply:
            case StreamError(after_events=after):
                lines = [*lines[:after], _sse(error_body(reply.error_type, reply.message))]
            case Cut(after_events=after):
                return await self._write(request, index, lines[:after], cut=True)
            case Stall(after_events=after, seconds=seconds):
                return await self._write(request, index, lines[:after], pause=seconds, rest=lines[after:])
        return await self._write(request, index, lines)

    def _usage(self, body: JSON) -> JSON:
        """Input tokens, billed as a prompt cache would: the cached prefix (tools and system,
        when they carry cache_control) written once, then read."""
        total = len(orjson.dumps(body)) // 4 + 1
        usage = {"input_tokens": total, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        prefix = orjson.dumps([body.get("tools"), body.get("system")])
        if b'"cache_control"' not in prefix:
            return usage
        key = hashlib.sha256(prefix).hexdigest()
        cached = len(prefix) // 4
        usage["input_tokens"] = max(1, total - cached)
        usage["cache_read_input_tokens" if key in self._cached_prefixes else "cache_creation_input_tokens"] = cached
        self._cached_prefixes.add(key)
        return usage

    async def _write(
        self,
        request: web.Request,
        index: int,
        lines: Sequence[bytes],
        *,
        status: int = 200,
        content_type: str = "text/event-stream",
        cut: bool = False,
        pause: float = 0.0,
        rest: Sequence[bytes] = (),
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=status, headers={"Content-Type": content_type})
        with self._noticing_disconnect(lambda: self._disconnects.append(index), closed_by_us=cut):
            await response.prepare(request)
            for line in lines:
                await response.write(line)
            if cut:
                if request.transport is not None:
                    request.transport.close()
                await asyncio.sleep(60)
            if pause:
                await asyncio.sleep(pause)
                for line in rest:
                    await response.write(line)
            await response.write_eof()
        return response


def _json(status: int, payload: Any) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(payload), content_type="application/json")
