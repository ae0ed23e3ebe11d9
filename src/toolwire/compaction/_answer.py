"""``CompactionAnswer``: the backend's summary in, exactly one ``compaction`` item out.

When the gateway compacts a conversation itself, the backend answers the summary request
(``summary_request``) like any other, through its own wire's translator. ``CompactionAnswer``
wraps that translator: it feeds it and keeps none of its events, and when the answer is
over it takes the text the model wrote, seals it (``seal``), and writes its own
Responses stream through a ``ResponsesEventWriter`` of its own, echoing the client's
request: ``response.created``, ``response.in_progress`` (at once, so the client sees the
response begin), then ``output_item.added`` / ``.done`` of one ``compaction`` item and
``response.completed`` with the backend's usage. A backend that failed, or a model that
wrote no summary, fails the response instead (``error`` + ``response.failed``); a
compaction never completes without its item.

Whole (not streamed), ``translate_whole`` gives the same Response object, and
``compaction_object`` the ``response.compaction`` object of ``POST /v1/responses/compact``.

An ``AnswerTranslator``; pure: sealing is a function given to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolwire.errors import UpstreamError
from toolwire.protocol import ResponsesRequest, StreamEvent, StreamItem
from toolwire.translate import (
    AnswerTranslator,
    ResponsesEventWriter,
    WrittenAnswer,
    complete_usage,
)

__all__ = ["CompactionAnswer"]

JSON = dict[str, Any]
Seal = Callable[[str], str]
"""A summary in, the ``encrypted_content`` that carries it out."""

_NO_SUMMARY = "The model wrote no summary of the conversation, so it could not be compacted."
_REPORTED = ("safety_identifier", "service_tier")
"""The request's fields a compaction object repeats when the client sent them (the openai
SDK's ``CompactedResponse`` holds both since 3.60.0)."""


class CompactionAnswer(WrittenAnswer):
    """One compaction: the summary ``inner`` translates, sealed into a ``compaction`` item."""

    def __init__(
        self,
        inner: AnswerTranslator,
        request: ResponsesRequest,
        *,
        seal: Seal,
        response_id: str,
        created_at: int,
        model: str,
    ) -> None:
        self._inner = inner
        self._seal = seal
        self._writer = ResponsesEventWriter(request, response_id=response_id, created_at=created_at, model=model)
        extra = request.model_extra or {}
        self._reported = {key: extra[key] for key in _REPORTED if isinstance(extra.get(key), str)}
        self.conversions: list[str] = inner.conversions
        """The inner translator's repairs (the same list)."""

    # ------------------------------------------------------------ AnswerTranslator

    def _response_so_far(self) -> JSON:
        # Before the end, what the backend reported so far (a client that leaves is charged it).
        return self._writer.response("in_progress", output=[], usage=self._inner.response.get("usage"))

    def start(self) -> list[StreamEvent]:
        self._inner.start()
        self._writer.begin()
        return self._writer.take()

    def feed(self, item: StreamItem, /) -> list[StreamEvent]:
        if self.finished:
            return []
        self._writer.begin()
        self._inner.feed(item)
        if self._inner.finished:
            self._conclude(self._inner.response)
        return self._writer.take()

    def finish(self, *, completed_at: int | None = None, ended_cleanly: bool = True) -> list[StreamEvent]:
        if self.finished:
            return []
        self._writer.begin()
        self._inner.finish(completed_at=completed_at, ended_cleanly=ended_cleanly)
        self._conclude(self._inner.response)
        return self._writer.take()

    def fail(self, message: str, *, code: str = "server_error") -> list[StreamEvent]:
        if self.finished:
            return []
        self._writer.begin()
        self._writer.fail(self.response, message, code)
        return self._writer.take()

    def translate_whole(self, answer: JSON, /) -> JSON:
        """The Response object for a whole answer; ``UpstreamError`` (nothing was sent yet)
        when the backend's answer failed or holds no summary."""
        summary = self._inner.translate_whole(answer)
        error = summary.get("error")
        if summary.get("status") == "failed":
            message = error.get("message") if isinstance(error, dict) else None
            raise UpstreamError(str(message or "The backend failed to write the summary."))
        text = _summary_text(summary)
        if not text:
            raise UpstreamError(_NO_SUMMARY)
        item = self._item(text)
        return self._writer.response(
            "completed", output=[item], usage=summary.get("usage"), completed_at=_completed_at(summary)
        )

    # ------------------------------------------------------------ the compaction object

    def compaction_object(self, response: JSON, retained: list[JSON]) -> JSON:
        """``POST /v1/responses/compact``'s answer for the completed ``response``: the
        ``retained`` messages (given ids where they have none), then its compaction item;
        the request's ``safety_identifier`` and ``service_tier`` when it has them."""
        kept = [message if "id" in message else {"id": self._writer.new_id("msg"), **message} for message in retained]
        return {
            "id": response["id"],
            "object": "response.compaction",
            "created_at": response["created_at"],
            "output": [*kept, *response["output"]],
            "usage": complete_usage(response.get("usage")),
            **self._reported,
        }

    # ------------------------------------------------------------ the end

    def _conclude(self, summary: JSON) -> None:
        """The backend's answer is over: its summary sealed into the one item, or a failure."""
        writer = self._writer
        usage = summary.get("usage")
        if summary.get("status") == "failed":
            found = summary.get("error")
            error: JSON = found if isinstance(found, dict) else {}
            message = error.get("message") or "The backend failed to write the summary."
            writer.fail(writer.response("in_progress", output=[], usage=usage), message, error.get("code") or "server_error")
            return
        text = _summary_text(summary)
        if not text:
            writer.fail(writer.response("in_progress", output=[], usage=usage), _NO_SUMMARY)
            return
        item = self._item(text)
        writer.item_added(writer.new_output_index(), item)
        writer.item_done(0, item)
        writer.lifecycle(
            "response.completed",
            writer.response("completed", output=[item], usage=usage, completed_at=_completed_at(summary)),
        )

    def _item(self, summary: str) -> JSON:
        return {"id": self._writer.new_id("cmp"), "type": "compaction", "encrypted_content": self._seal(summary)}


def _summary_text(response: JSON) -> str:
    """The text the model wrote: its messages' ``output_text`` parts (reasoning is not
    the summary)."""
    texts = [
        part["text"]
        for item in response.get("output") or ()
        if isinstance(item, dict) and item.get("type") == "message"
        for part in item.get("content") or ()
        if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str)
    ]
    return "\n\n".join(text for text in texts if text.strip()).strip()


def _completed_at(response: JSON) -> int | None:
    value = response.get("completed_at")
    return value if isinstance(value, int) else None
