"""The benchmark's canned Chat Completions upstream: a raw HTTP/1.1 server built to be fast.

    python -m bench.upstream [--port 0] [--reply text|tool] [--chunks 40] [--write-per-event] [--pace-ms MS] [--hold]

It answers ``POST .../chat/completions`` with pre-encoded bytes, so that what a benchmark
measures is the client or the gateway in front of it, not this server:

* streaming (the request body holds ``"stream":true``): an OpenAI-style stream, chunked
  transfer encoding, one HTTP chunk per SSE event: a role chunk, ``--chunks`` text
  fragments (``--reply text``, the default) or one tool call whose arguments arrive in
  ``--chunks`` fragments (``--reply tool``), a ``finish_reason`` chunk, a usage chunk
  (``choices: []``) and ``data: [DONE]``. The whole answer goes out in one
  ``transport.write``: a ``send`` costs about 5 us on a small VM, and one per event would
  make this server, not the gateway, the bottleneck (~4k instead of ~45k requests/s).
  ``--write-per-event`` writes each event separately, as a server flushing tokens would,
  but back to back, so a loaded client finds most of the answer in one read;
  ``--pace-ms MS`` writes each event ``MS`` milliseconds after the one before it, as a model
  generating tokens does: each event is read on its own, and what a client spends per event
  shows (the body's end goes with the last event, ``[DONE]``, as a model server writes it;
  the time between events is then the answer's length, so compare CPU, not requests/s;
  a client that pipelines requests on one connection would get paced answers interleaved:
  wrk and the gateways send the next request only after the answer);
* not streaming: the same answer as one ``chat.completion`` JSON body;
* ``GET .../models``: a one-model list. Anything else: 404.

Requests are parsed just enough to be correct: the head up to the blank line, then exactly
``Content-Length`` body bytes (or a chunked body), read and discarded, so keep-alive and
pipelining work. ``Connection: close`` and HTTP/1.0 close after the answer.

``--hold`` keeps every stream open: it sends the head, the role chunk and the first text
chunk, then nothing until the client goes away (for measuring memory with many open
streams). With ``--reply tool`` the tool is chosen from the request (the first tool whose
name contains ``exec``, else the first), and its arguments are built from its schema.

The chosen port is printed on stdout as ``listening on 127.0.0.1:PORT`` once it is bound.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import signal
import sys
from typing import Any, cast

import orjson

MODEL = "bench-model"
CREATED = 1796000000
_ENVELOPE = {"id": "chatcmpl-bench0001", "object": "chat.completion.chunk", "created": CREATED, "model": MODEL,
             "system_fingerprint": "fp_bench"}
_ANSWER_TEXT = (
    "I created hello.txt with a single line, looked up the sub-agent tools and viewed "
    "pixel.png: it is one white pixel on a transparent background. Everything is in place "
    "and nothing else needs to change in the workspace, so the task is done."
)
_TOOL_ARGUMENT_TEXT = "echo hi from the toolwire benchmark && ls -la && cat hello.txt"


# --------------------------------------------------------------------------- answers
def fragments(text: str, count: int) -> list[str]:
    """``text`` cut into exactly ``count`` non-empty, roughly token-sized fragments."""
    if count <= 0:
        return []
    words = text.split(" ")
    pieces = [words[0]] + [" " + word for word in words[1:]]
    while len(pieces) < count:  # too few words: repeat the text
        pieces += [" " + word for word in words]
    pieces = pieces[:count]
    return pieces


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {**_ENVELOPE, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}


def _usage(completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": 11264,
        "completion_tokens": completion_tokens,
        "total_tokens": 11264 + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 10240},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def text_chunks(count: int = 40) -> list[dict[str, Any]]:
    """The parsed chunks of a streamed text answer: role, ``count`` fragments, finish, usage."""
    chunks = [_chunk({"role": "assistant", "content": "", "refusal": None})]
    chunks += [_chunk({"content": piece}) for piece in fragments(_ANSWER_TEXT, count)]
    chunks.append(_chunk({}, "stop"))
    chunks.append({**_ENVELOPE, "choices": [], "usage": _usage(count)})
    return chunks


def tool_chunks(name: str, arguments: str, count: int = 40) -> list[dict[str, Any]]:
    """The parsed chunks of a streamed tool call whose arguments arrive in ``count`` fragments."""
    size = max(1, -(-len(arguments) // count))
    pieces = [arguments[i : i + size] for i in range(0, len(arguments), size)]
    first = {"index": 0, "id": "call_bench0001", "type": "function", "function": {"name": name, "arguments": ""}}
    chunks = [_chunk({"role": "assistant", "content": None, "refusal": None})]
    chunks.append(_chunk({"tool_calls": [first]}))
    chunks += [_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}) for piece in pieces]
    chunks.append(_chunk({}, "tool_calls"))
    chunks.append({**_ENVELOPE, "choices": [], "usage": _usage(len(pieces) + 1)})
    return chunks


def completion(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The non-streaming ``chat.completion`` with the same content as ``chunks``."""
    content = ""
    calls: dict[int, dict[str, Any]] = {}
    finish = "stop"
    usage: Any = None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk["choices"]:
            delta = choice["delta"]
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or ():
                slot = calls.setdefault(call["index"], {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                slot["id"] = call.get("id", slot["id"])
                slot["function"]["name"] += call.get("function", {}).get("name", "")
                slot["function"]["arguments"] += call.get("function", {}).get("arguments", "")
            finish = choice["finish_reason"] or finish
    message: dict[str, Any] = {"role": "assistant", "content": content or None, "refusal": None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {
        "id": _ENVELOPE["id"], "object": "chat.completion", "created": CREATED, "model": MODEL,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage, "system_fingerprint": "fp_bench",
    }


def sse_events(chunks: list[dict[str, Any]]) -> list[bytes]:
    """Each chunk as one SSE event, then ``data: [DONE]``."""
    return [b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks] + [b"data: [DONE]\n\n"]


def _http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n"
)
_LAST_CHUNK = b"0\r\n\r\n"


def _whole(status: bytes, body: bytes, close: bool, content_type: bytes = b"application/json") -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: " + content_type
        + b"\r\ncontent-length: " + str(len(body)).encode()
        + (b"\r\nconnection: close" if close else b"") + b"\r\n\r\n" + body
    )


class Answer:
    """One canned answer, pre-encoded: the stream as writes, and the non-stream body."""

    def __init__(self, chunks: list[dict[str, Any]]) -> None:
        events = sse_events(chunks)
        self.events = events
        body = [_http_chunk(event) for event in events]
        self.stream_writes = {
            False: [_STREAM_HEAD + b"\r\n" + body[0], *body[1:], _LAST_CHUNK],
            True: [_STREAM_HEAD + b"connection: close\r\n\r\n" + body[0], *body[1:], _LAST_CHUNK],
        }
        self.stream_burst = {close: b"".join(writes) for close, writes in self.stream_writes.items()}
        # --pace-ms: the body's end goes with the last event, as a server whose stream is over
        # writes it at once (a model server's end of body follows its [DONE] in microseconds;
        # 5 ms later, it would hold each client's connection upstream that much longer).
        self.paced_writes = {close: [*writes[:-2], writes[-2] + writes[-1]] for close, writes in self.stream_writes.items()}
        # --hold: the head, the role chunk and the first content chunk, then silence.
        self.hold_prefix = self.stream_writes[False][0] + body[1]
        json_body = orjson.dumps(completion(chunks))
        self.json = {close: _whole(b"200 OK", json_body, close) for close in (False, True)}


_MODELS = orjson.dumps({"object": "list", "data": [{"id": MODEL, "object": "model", "created": CREATED, "owned_by": "bench"}]})
_NOT_FOUND = orjson.dumps({"error": {"message": "not found", "type": "invalid_request_error", "code": "not_found"}})
_BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_MAX_HEAD = 64 * 1024


def _tool_arguments(parameters: Any) -> str:
    """Arguments satisfying the required properties of a JSON schema, with plausible values."""
    arguments: dict[str, Any] = {}
    properties = parameters.get("properties", {}) if isinstance(parameters, dict) else {}
    required = parameters.get("required", list(properties)[:1]) if isinstance(parameters, dict) else []
    for name in required:
        kind = properties.get(name, {}).get("type", "string")
        kind = kind[0] if isinstance(kind, list) and kind else kind
        arguments[name] = {"integer": 1, "number": 1, "boolean": False, "array": [], "object": {}}.get(
            kind, _TOOL_ARGUMENT_TEXT
        )
    return orjson.dumps(arguments).decode()


# --------------------------------------------------------------------------- server
class Upstream:
    def __init__(
        self, reply: str = "text", chunks: int = 40, per_event: bool = False, hold: bool = False, pace: float = 0.0
    ) -> None:
        """``pace``: seconds between the events of a stream (0: written back to back)."""
        self.reply = reply
        self.chunks = chunks
        self.per_event = per_event
        self.pace = pace
        self.hold = hold
        self.text = Answer(text_chunks(chunks))
        self._tool_answers: dict[bytes, Answer] = {}
        self.requests = 0
        self.held: set[asyncio.Transport] = set()

    def answer_for(self, body: bytes) -> Answer:
        if self.reply == "text":
            return self.text
        key = body[-4096:]  # the tools are near the end of a gateway's request; cheap cache key
        answer = self._tool_answers.get(key)
        if answer is None:
            answer = Answer(self._tool_call_for(body))
            if len(self._tool_answers) < 64:
                self._tool_answers[key] = answer
        return answer

    def _tool_call_for(self, body: bytes) -> list[dict[str, Any]]:
        try:
            tools = orjson.loads(body).get("tools") or []
        except (orjson.JSONDecodeError, AttributeError):
            tools = []
        functions = [tool.get("function", {}) for tool in tools if isinstance(tool, dict)]
        chosen = next((f for f in functions if "exec" in f.get("name", "")), functions[0] if functions else None)
        if chosen is None:
            return text_chunks(self.chunks)
        return tool_chunks(chosen["name"], _tool_arguments(chosen.get("parameters")), self.chunks)


class Connection(asyncio.Protocol):
    """One client connection: parse requests in order, answer each from canned bytes."""

    __slots__ = ("body_length", "buffer", "chunked", "close_after", "held", "method", "server", "target", "transport")

    def __init__(self, server: Upstream) -> None:
        self.server = server
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.body_length = -1  # -1: reading a head; otherwise bytes of body still expected
        self.chunked = False
        self.close_after = False
        self.held = False
        self.method = b""
        self.target = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        if self.held and self.transport is not None:
            self.server.held.discard(self.transport)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        if self.held:
            return  # a held stream: whatever the client sends is ignored
        buffer = self.buffer
        buffer += data
        while self.transport is not None and not self.held:
            if self.body_length < 0:
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    if len(buffer) > _MAX_HEAD:
                        self._fail()
                    return
                if not self._head(bytes(buffer[:end])):
                    return
                del buffer[: end + 4]
            if self.chunked:
                body = _take_chunked(buffer)
                if body is None:
                    return
            else:
                if len(buffer) < self.body_length:
                    return
                body = bytes(buffer[: self.body_length])
                del buffer[: self.body_length]
            self.body_length = -1
            self._respond(body)

    def _head(self, head: bytes) -> bool:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            self._fail()
            return False
        self.method, self.target, version = parts
        self.close_after = version == b"HTTP/1.0"
        self.chunked = False
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    self._fail()
                    return False
            elif name == b"transfer-encoding":
                self.chunked = b"chunked" in value.lower()
            elif name == b"connection":
                value = value.strip().lower()
                if value == b"close":
                    self.close_after = True
                elif value == b"keep-alive":
                    self.close_after = False
        self.body_length = length
        return True

    def _respond(self, body: bytes) -> None:
        transport = self.transport
        assert transport is not None
        server = self.server
        server.requests += 1
        close = self.close_after
        path = self.target.partition(b"?")[0]
        if self.method == b"POST" and path.endswith(b"/chat/completions"):
            answer = server.answer_for(body)
            if b'"stream":true' in body or b'"stream": true' in body:
                if server.hold:
                    transport.write(answer.hold_prefix)
                    self.held = True
                    server.held.add(transport)
                    return
                if server.pace > 0:
                    _paced(transport, answer.paced_writes[close], server.pace, close)
                    return  # (a closing connection is closed after its last write)
                if server.per_event:
                    for write in answer.stream_writes[close]:
                        transport.write(write)
                else:
                    transport.write(answer.stream_burst[close])
            else:
                transport.write(answer.json[close])
        elif self.method == b"GET" and path.endswith(b"/models"):
            transport.write(_whole(b"200 OK", _MODELS, close))
        else:
            transport.write(_whole(b"404 Not Found", _NOT_FOUND, close))
        if close:
            transport.close()
            self.transport = None

    def _fail(self) -> None:
        if self.transport is not None:
            self.transport.write(_BAD_REQUEST)
            self.transport.close()
            self.transport = None


def _paced(transport: asyncio.Transport, writes: list[bytes], pace: float, close: bool) -> None:
    """Each of ``writes`` ``pace`` seconds after the one before it (the first at once), then
    the connection closed if ``close``; nothing more once the client has gone."""
    loop = asyncio.get_running_loop()

    def write(index: int) -> None:
        if transport.is_closing():
            return
        transport.write(writes[index])
        if index + 1 < len(writes):
            loop.call_later(pace, write, index + 1)
        elif close:
            transport.close()

    write(0)


def pace_ms(text: str) -> float:
    """An argparse type for ``--pace-ms`` (here and in ``bench.compare``): milliseconds,
    a finite number, 0 or more."""
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError("--pace-ms cannot be negative (nor infinite, nor NaN)")
    return value


def _take_chunked(buffer: bytearray) -> bytes | None:
    """A whole chunked body from the front of ``buffer`` (removed), or None if incomplete."""
    body = bytearray()
    position = 0
    while True:
        line_end = buffer.find(b"\r\n", position)
        if line_end < 0:
            return None
        size = int(bytes(buffer[position:line_end]).split(b";")[0].strip() or b"0", 16)
        position = line_end + 2
        if size == 0:
            while True:  # trailers, up to the blank line
                line_end = buffer.find(b"\r\n", position)
                if line_end < 0:
                    return None
                blank = line_end == position
                position = line_end + 2
                if blank:
                    del buffer[:position]
                    return bytes(body)
        if len(buffer) < position + size + 2:
            return None
        body += buffer[position : position + size]
        position += size + 2


async def serve(host: str, port: int, upstream: Upstream, ready: Any = None) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Connection(upstream), host, port, backlog=4096, reuse_address=True)
    bound = server.sockets[0].getsockname()
    print(f"listening on {bound[0]}:{bound[1]}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready(bound[1])
    async with server:
        await stop.wait()
        for transport in list(upstream.held):
            transport.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.upstream", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed on stdout)")
    parser.add_argument("--reply", choices=("text", "tool"), default="text")
    parser.add_argument("--chunks", type=int, default=40, help="text fragments (or argument fragments) per answer")
    parser.add_argument("--write-per-event", action="store_true", help="one write per SSE event instead of one per answer")
    parser.add_argument("--pace-ms", type=pace_ms, default=0.0, metavar="MS",
                        help="write a stream's events MS milliseconds apart, as a model generating tokens does")
    parser.add_argument("--hold", action="store_true", help="keep streams open after their first text chunk")
    args = parser.parse_args(argv)
    upstream = Upstream(
        reply=args.reply, chunks=args.chunks, per_event=args.write_per_event, hold=args.hold, pace=args.pace_ms / 1000
    )
    coroutine = serve(args.host, args.port, upstream)
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
        asyncio.run(coroutine)
    else:
        uvloop.run(coroutine)
    sys.exit(0)


if __name__ == "__main__":
    main()
