"""``generate: false``: a response created without asking the model (a prewarm).

Codex begins each WebSocket turn with a ``response.create`` that says ``generate: false``:
the request's tools, instructions and input, which its next request continues
(``previous_response_id``) with only its new items. Nothing is sampled, so nothing goes
upstream: ``UnsampledAnswer`` stands in for the backend's answer translator, and writes
its stream through a ``ResponsesEventWriter`` of its own, echoing the request, whatever
the backend: ``response.created``, ``response.in_progress``, then at once
``response.completed`` with no output and no usage.
"""

from __future__ import annotations

import time
from typing import Any

from toolwire.protocol import ResponsesRequest, StreamEvent, StreamItem
from toolwire.translate import ResponsesEventWriter, WrittenAnswer

JSON = dict[str, Any]


class UnsampledAnswer(WrittenAnswer):
    """An ``AnswerTranslator`` whose stream ends, completed and empty, as soon as it starts."""

    def __init__(self, request: ResponsesRequest, *, response_id: str, created_at: int) -> None:
        self._writer = ResponsesEventWriter(request, response_id=response_id, created_at=created_at, model=request.model)
        self.conversions: list[str] = []

    def _response_so_far(self) -> JSON:
        return self._writer.response("in_progress", output=[])

    def start(self) -> list[StreamEvent]:
        self._writer.begin()
        return self._writer.take()

    def feed(self, item: StreamItem, /) -> list[StreamEvent]:
        return []  # nothing was asked upstream, so nothing arrives

    def finish(self, *, completed_at: int | None = None, ended_cleanly: bool = True) -> list[StreamEvent]:
        if self.finished:
            return []
        writer = self._writer
        writer.begin()
        ended = completed_at if completed_at is not None else int(time.time())
        writer.lifecycle("response.completed", writer.response("completed", output=[], completed_at=ended))
        return writer.take()

    def fail(self, message: str, *, code: str = "server_error") -> list[StreamEvent]:
        if self.finished:
            return []
        writer = self._writer
        writer.begin()
        writer.fail(writer.response("in_progress", output=[]), message, code)
        return writer.take()

    def translate_whole(self, answer: JSON, /) -> JSON:
        """Not reached (a ``generate: false`` request always streams): the completed, empty Response."""
        return self._writer.response("completed", output=[], completed_at=int(time.time()))
