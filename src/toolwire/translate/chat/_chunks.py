"""What one upstream Chat Completions chunk says, as signals the stream translator applies.

Backends disagree on details (reference §7): reasoning arrives as ``reasoning_content``
or ``reasoning`` or inside ``<think>`` tags, tool calls in fragments or whole, errors
nested or flat, usage with vendor-specific details. This module reads all of them into
a few plain values; ``ChatStreamTranslator`` decides what they mean. A whole
(non-streamed) completion is read as the one chunk that would have carried it
(``completion_chunks``), so streamed and whole answers cannot disagree.

The values are built one or more per chunk and read once, never changed. They are not
frozen dataclasses only because building a frozen one costs two to four times as much.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import orjson

from toolwire.protocol import token_count

from .._calls import CallFragment

JSON = dict[str, Any]

# How backends word a context overflow: OpenAI/vLLM/DeepSeek "maximum context length",
# llama.cpp "exceeds the available context size", others "too many tokens", "prompt is too long".
@dataclass(slots=True)
class _Said:
    """A piece of what the model said."""

    text: str


class Reasoning(_Said):
    __slots__ = ()


class Text(_Said):
    __slots__ = ()


class Refusal(_Said):
    __slots__ = ()


@dataclass(slots=True)
class Finish:
    reason: str


@dataclass(slots=True)
class Usage:
    usage: JSON


Signal = Reasoning | Text | Refusal | CallFragment | Finish | Usage


def first_choice(choices: list[Any]) -> JSON | None:
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            return choice
    return None


def reasoning_text(delta: JSON) -> str:
    """``reasoning_content`` (DeepSeek, llama.cpp, old vLLM) or ``reasoning`` (vLLM, Ollama)."""
    value = delta.get("reasoning_content")
    if not (isinstance(value, str) and value):
        value = delta.get("reasoning")
    return value if isinstance(value, str) else ""


def content_text(content: Any) -> str:
    """Message content: a string, or (some servers, non-streaming) a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict)
            and part.get("type") in ("text", "output_text")
            and isinstance(part.get("text"), str)
        )
    return ""


def call_fragment(entry: JSON) -> CallFragment:
    index = entry.get("index")
    upstream_id = entry.get("id")
    function = entry.get("function")
    custom = entry.get("custom")
    name: Any = None
    arguments: Any = ""
    native_input: str | None = None
    if isinstance(custom, dict):
        name = custom.get("name")
        native_input = custom.get("input") if isinstance(custom.get("input"), str) else ""
    elif isinstance(function, dict):
        name = function.get("name")
        arguments = function.get("arguments")
    if isinstance(arguments, (dict, list)):  # some servers send the arguments object itself
        arguments = orjson.dumps(arguments).decode()
    return CallFragment(
        index if isinstance(index, int) and not isinstance(index, bool) else None,
        upstream_id if isinstance(upstream_id, str) and upstream_id else None,
        name if isinstance(name, str) and name else None,
        arguments if isinstance(arguments, str) else "",
        native_input,
    )


def completion_chunks(completion: JSON) -> list[JSON]:
    """The stream chunks equivalent to ``completion``: one delta with the whole message.

    Only choice 0 is representable (reference §8.4). A completion without choices gives
    no chunk (so the translator reports a stream with no finish reason). Tool calls get
    the ``index`` a stream would carry.
    """
    if completion.get("error") or completion.get("object") == "error":
        return [completion if completion.get("error") else {"error": completion}]
    chunk: JSON = {"object": "chat.completion.chunk"}
    choices = completion.get("choices")
    choice = first_choice(choices) if isinstance(choices, list) else None
    if choice is not None:
        message = choice.get("message")
        delta = dict(message) if isinstance(message, dict) else {}
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list):
            delta["tool_calls"] = [
                {"index": position, **call} if isinstance(call, dict) else call
                for position, call in enumerate(tool_calls)
            ]
        chunk["choices"] = [
            {"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason")}
        ]
    if isinstance(completion.get("usage"), dict):
        chunk["usage"] = completion["usage"]
    return [chunk] if "choices" in chunk or "usage" in chunk else []


def map_usage(usage: JSON | None) -> JSON | None:
    """Chat ``usage`` -> Responses ``usage`` (reference §8.3-8); None when there was none."""
    if usage is None:
        return None
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    input_tokens = token_count(usage.get("prompt_tokens"))
    output_tokens = token_count(usage.get("completion_tokens"))
    cached = prompt_details.get("cached_tokens") if isinstance(prompt_details, dict) else None
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens")  # DeepSeek
    cache_write = (
        prompt_details.get("cache_write_tokens") if isinstance(prompt_details, dict) else None
    )
    reasoning = (
        completion_details.get("reasoning_tokens") if isinstance(completion_details, dict) else None
    )
    total = usage.get("total_tokens")
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {
            "cached_tokens": token_count(cached),
            "cache_write_tokens": token_count(cache_write),
        },
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": token_count(reasoning)},
        "total_tokens": token_count(total) if total is not None else input_tokens + output_tokens,
    }


# ---------------------------------------------------------------- <think> tags


class _ThinkState(Enum):
    LEADING = "leading"
    """Before any text: a ``<think>`` tag may open here (once)."""
    THINK = "think"
    """Inside ``<think>``: content is reasoning until ``</think>``."""
    TEXT = "text"
    """In the answer: content is text."""


# The members bound once: looking up an Enum member costs ~60 ns in Python 3.11, and
# ``decode`` runs for every content chunk.
_LEADING, _THINK, _TEXT = _ThinkState.LEADING, _ThinkState.THINK, _ThinkState.TEXT


class ThinkTagSplitter:
    """An incremental decoder that splits a leading ``<think>...</think>`` out of content.

    ``decode(text) -> signals``; ``flush() -> signals`` when something other than content
    arrives (or the stream ends). Tags may straddle chunks. Leading line breaks of the
    answer are dropped, and content that is only whitespace before other output is too.
    """

    _OPEN = "<think>"
    _CLOSE = "</think>"

    def __init__(self) -> None:
        self._state = _LEADING
        self._think_allowed = True
        self._buffer = ""
        self.found_tags = False

    @property
    def passes_text(self) -> bool:
        """The answer's text has begun: content now passes through as it is."""
        return self._state is _TEXT

    def decode(self, text: str) -> list[Signal]:
        if self._state is _TEXT:
            return [Text(text)]
        self._buffer += text
        signals: list[Signal] = []
        if self._state is _LEADING:
            head = self._buffer.lstrip()
            if not head:
                return []
            if self._think_allowed and head.startswith(self._OPEN):
                self._state = _THINK
                self.found_tags = True
                self._buffer = head[len(self._OPEN) :]
            elif self._think_allowed and self._OPEN.startswith(head):
                return []
            else:
                self._state = _TEXT
                text, self._buffer = self._buffer.lstrip("\r\n"), ""
                return [Text(text)]
        end = self._buffer.find(self._CLOSE)
        if end < 0:
            keep = _partial_suffix(self._buffer, self._CLOSE)
            reasoning = self._buffer[: len(self._buffer) - keep]
            self._buffer = self._buffer[len(self._buffer) - keep :]
            return [Reasoning(reasoning)] if reasoning else []
        reasoning, rest = self._buffer[:end], self._buffer[end + len(self._CLOSE) :]
        self._state, self._think_allowed, self._buffer = _LEADING, False, ""
        if reasoning:
            signals.append(Reasoning(reasoning))
        if rest:
            signals.extend(self.decode(rest))
        return signals

    def flush(self) -> list[Signal]:
        buffer, self._buffer = self._buffer, ""
        if self._state is _THINK:
            self._state, self._think_allowed = _LEADING, False
            return [Reasoning(buffer)] if buffer else []
        if self._state is _LEADING and buffer.strip():
            self._state = _TEXT
            return [Text(buffer.lstrip("\r\n"))]
        return []


def _partial_suffix(text: str, tag: str) -> int:
    """The length of the longest end of ``text`` that starts ``tag``."""
    for length in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-length:]):
            return length
    return 0
