"""``kind = "mock"``: a built-in scripted model, so the whole chain runs with no model server.

It speaks the Chat wire without HTTP: requests are translated as for a Chat Completions
server (the generic preset) and its answers are Chat chunks, translated back the same
way. As a model,

it reads the conversation and answers very literally:

- a user message ``call <tool> <json arguments>`` (or ``call <tool>``) makes a tool call
  of a declared tool whose upstream name is or ends with ``<tool>``; several
  ``call ...`` lines make parallel calls;
- after tool results it answers ``<tool> returned: <output>`` for each;
- otherwise it echoes: ``You said: <text>``; with a ``think`` word in the message it
  also streams a short reasoning text first.

It streams in the OpenAI style (name on the first delta, argument fragments after,
usage in the last chunk) and answers non-streaming requests too.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from toolwire.protocol import ResponsesRequest
from toolwire.translate import GENERIC

from .._base import ListBatches, NativeCompaction, StreamBatches, UpstreamCall
from .._kind import BackendKind, BackendSetup
from .chat import prepare_chat

if TYPE_CHECKING:
    from toolwire.config import UpstreamConfig

JSON = Mapping[str, Any]


class MockBackend:
    """A ``Backend`` that needs no server (the gateway compacts for it)."""

    native_compaction: NativeCompaction | None = None

    def prepare(
        self, request: ResponsesRequest, *, upstream_model: str, response_id: str, created_at: int
    ) -> UpstreamCall:
        return prepare_chat(
            request, GENERIC, upstream_model=upstream_model, response_id=response_id, created_at=created_at
        )

    async def check(self) -> str | None:
        return None

    async def aclose(self) -> None:
        return None

    @contextlib.asynccontextmanager
    async def stream(self, body: JSON) -> AsyncIterator[StreamBatches]:
        yield ListBatches([list(_chunks(body))])

    async def fetch(self, body: JSON) -> dict[str, Any]:
        request = body
        reasoning, text, calls = answer(request)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if reasoning:
            message["reasoning_content"] = reasoning
        if calls:
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
                for call_id, name, arguments in calls
            ]
        return {
            "id": "chatcmpl-mock-" + secrets.token_hex(6),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "mock"),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": _usage(request, text, calls),
        }


def answer(request: JSON) -> tuple[str | None, str | None, list[tuple[str, str, str]]]:
    """(reasoning, text, [(call_id, upstream tool name, arguments)]) for the conversation."""
    messages = request.get("messages", [])
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        results = []
        names = _call_names(messages)
        for message in reversed(messages):
            if message.get("role") != "tool":
                break
            results.append(f"{names.get(str(message.get('tool_call_id')), 'tool')} returned: {_text(message)}")
        return None, "\n".join(reversed(results)), []
    said = _text(last) if last.get("role") == "user" else ""
    reasoning = f"The user wrote {len(said)} characters; I will answer literally." if "think" in said.lower() else None
    tools = [tool["function"]["name"] for tool in request.get("tools", [])]
    calls = []
    for line in said.splitlines():
        words = line.strip().split(maxsplit=2)
        if len(words) >= 2 and words[0].lower() == "call":
            name = next((t for t in tools if t == words[1] or t.endswith("__" + words[1])), None)
            if name is not None:
                arguments = words[2] if len(words) == 3 else "{}"
                calls.append(("call_" + secrets.token_hex(8), name, arguments))
    if calls:
        return reasoning, None, calls
    return reasoning, f"You said: {said}", []


def _chunks(request: JSON) -> list[dict[str, Any]]:
    reasoning, text, calls = answer(request)
    base = {"id": "chatcmpl-mock-" + secrets.token_hex(6), "object": "chat.completion.chunk",
            "created": int(time.time()), "model": request.get("model", "mock")}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if reasoning:
        deltas += [{"reasoning_content": piece} for piece in _pieces(reasoning)]
    if text:
        deltas += [{"content": piece} for piece in _pieces(text)]
    for index, (call_id, name, arguments) in enumerate(calls):
        deltas.append({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                       "function": {"name": name, "arguments": ""}}]})
        deltas += [{"tool_calls": [{"index": index, "function": {"arguments": piece}}]} for piece in _pieces(arguments)]
    chunks = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"}]})
    chunks.append({**base, "choices": [], "usage": _usage(request, text, calls)})
    return chunks


def _pieces(text: str, size: int = 12) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _call_names(messages: list[Any]) -> dict[str, str]:
    names = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            names[call["id"]] = call["function"]["name"]
    return names


def _usage(request: JSON, text: str | None, calls: list[tuple[str, str, str]]) -> dict[str, int]:
    prompt = len(orjson.dumps(request.get("messages", []))) // 4
    completion = (len(text or "") + sum(len(a) for _, _, a in calls)) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _build(upstream: UpstreamConfig, setup: BackendSetup) -> MockBackend:
    return MockBackend()


MOCK = BackendKind(
    "mock", _build, needs_base_url=False, description="the built-in scripted model (no server needed)"
)
