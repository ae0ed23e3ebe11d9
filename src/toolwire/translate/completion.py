"""``translate_completion``: a non-streaming Chat Completion -> a Responses Response object.

There is one translation, not two: the completion's message is replayed as the
equivalent stream chunk through ``ChatStreamTranslator``, and its final Response is
the answer. Streaming and non-streaming requests therefore cannot disagree on item
types, ids, tool restoration, repairs or status.
"""

from __future__ import annotations

from typing import Any

from toolwire.protocol import ResponsesRequest

from .stream import ChatStreamTranslator
from .tool_table import UpstreamToolTable

__all__ = ["completion_chunks", "translate_completion"]

JSON = dict[str, Any]


def translate_completion(
    completion: JSON,
    request: ResponsesRequest,
    tools: UpstreamToolTable,
    *,
    response_id: str,
    created_at: int,
    model: str,
    tool_call_text: str = "auto",
    conversions: list[str] | None = None,
) -> JSON:
    """The Response object for ``completion`` (``status`` failed if it holds an ``error``).

    ``tool_call_text`` is the upstream's setting for calls written into the text
    (``ChatStreamTranslator``); the repairs made are appended to ``conversions``."""
    translator = ChatStreamTranslator(
        request,
        tools,
        response_id=response_id,
        created_at=created_at,
        model=model,
        tool_call_text=tool_call_text,
    )
    for chunk in completion_chunks(completion):
        translator.feed(chunk)
    translator.finish()
    if conversions is not None:
        conversions.extend(translator.conversions)
    return translator.response


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
    choice = (
        next(
            (c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0),
            None,
        )
        if isinstance(choices, list)
        else None
    )
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
