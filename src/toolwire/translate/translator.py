"""``AnswerTranslator``: what every wire's answer translator offers the server.

A translator serves one response. Streamed, the server calls ``start()``, then
``feed(x)`` for each object the backend sends (a Chat chunk, a Responses event), then
``finish()`` at the backend's end, or ``fail(message)`` when the transport broke; each
returns the Responses events to send, and exactly one terminal event ends the stream.
While the backend only keeps its stream alive, ``keep_alive()`` gives an event that says
the response is still in progress. Whole, the server calls ``translate_whole(answer)`` once and gets the Response object.
``response`` is the Response so far (the final one once ``finished``); ``conversions``
lists every repair made, for logs and metrics.

``ChatStreamTranslator``, ``MessagesStreamTranslator`` (both on ``ItemStreamTranslator``)
and ``ResponsesStreamRestorer`` are answer translators, built on ``WrittenAnswer``: the
part of one that its ``ResponsesEventWriter`` answers.
"""

from __future__ import annotations

from typing import Any, Protocol

from toolwire.protocol import StreamItem

from .writer import ResponsesEventWriter, StreamState

__all__ = ["WHOLE_ANSWER_STREAMED", "AnswerTranslator", "WrittenAnswer"]

JSON = dict[str, Any]

WHOLE_ANSWER_STREAMED = "streamed request answered whole, sent as a stream"
"""The conversion a translator notes when it reads a ``WholeAnswer``: the upstream ignored ``stream``."""


class AnswerTranslator(Protocol):
    """One backend answer in, the Responses stream (or Response object) out."""

    conversions: list[str]

    @property
    def finished(self) -> bool: ...

    @property
    def response(self) -> JSON: ...

    def start(self) -> list[Any]: ...

    def feed(self, item: StreamItem, /) -> list[Any]: ...

    def finish(self, *, completed_at: int | None = None, ended_cleanly: bool = True) -> list[Any]: ...

    def fail(self, message: str, *, code: str = "server_error") -> list[Any]: ...

    def translate_whole(self, answer: JSON, /) -> JSON: ...

    def keep_alive(self) -> list[Any]: ...


_ENDED = StreamState.ENDED  # bound once: an Enum member lookup costs ~60 ns (Python 3.11)
_IN_PROGRESS = StreamState.IN_PROGRESS


class WrittenAnswer:
    """The base of an answer translator that writes through a ``ResponsesEventWriter``
    (``self._writer``): ``finished`` and the final ``response`` are the writer's; a
    subclass says what the Response is before the end (``_response_so_far``)."""

    _writer: ResponsesEventWriter

    @property
    def finished(self) -> bool:
        """Whether the terminal event has been written."""
        return self._writer.state is _ENDED

    @property
    def response(self) -> JSON:
        """The final Response object once finished; before that, the current snapshot."""
        final = self._writer.final
        return final if final is not None else self._response_so_far()

    def keep_alive(self) -> list[Any]:
        """``response.in_progress`` once more, for a client whose idle timer counts events
        (Codex's counts no SSE comment): the upstream says it is alive, with nothing to say
        yet. The Response so far without its output (the client has the items from their
        own events); nothing before the stream has begun or after it has ended."""
        writer = self._writer
        if writer.state is not _IN_PROGRESS:
            return []
        writer.lifecycle("response.in_progress", {**self._response_so_far(), "status": "in_progress", "output": []})
        return writer.take()

    def _response_so_far(self) -> JSON:
        raise NotImplementedError
