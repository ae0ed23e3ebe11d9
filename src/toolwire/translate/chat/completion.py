"""``translate_completion``: a non-streaming Chat Completion -> a Responses Response object.

There is one translation, not two: the completion's message is replayed as the
equivalent stream chunk (``completion_chunks``) through ``ChatStreamTranslator``
(``translate_whole``), and its final Response is the answer. Streaming and non-streaming
requests therefore cannot disagree on item types, ids, tool restoration, repairs or
status.
"""

from __future__ import annotations

from typing import Any

from toolwire.protocol import ResponsesRequest

from ..tool_table import UpstreamToolTable
from ._chunks import completion_chunks
from .stream import ChatStreamTranslator

__all__ = ["completion_chunks", "translate_completion"]

JSON = dict[str, Any]


def translate_completion(
    completion: JSON, request: ResponsesRequest, tools: UpstreamToolTable,
    *, response_id: str, created_at: int, model: str, tool_call_text: str = "auto",
) -> JSON:
    """The Response object for ``completion`` (``status`` failed if it holds an ``error``);
    ``tool_call_text`` is the upstream's setting for calls written into the text."""
    translator = ChatStreamTranslator(
        request, tools, response_id=response_id, created_at=created_at, model=model, tool_call_text=tool_call_text
    )
    return translator.translate_whole(completion)
