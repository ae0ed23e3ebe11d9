"""The seam between the exchange pipeline and its backends: ``Backend``.

Whatever its kind (Chat Completions, Responses, the mock, ...), a configured upstream is
a ``Backend``. The pipeline asks it three things and never which kind it is:

* ``prepare(request, ...)``, pure: the request translated for this backend, as an
  ``UpstreamCall`` (the body to send, what was lost or reshaped on the way, and how to
  build the ``AnswerTranslator`` that translates the answer back);
* ``stream(body)``: open a streamed answer, parsed into ``StreamBatches``;
* ``fetch(body)``: a whole (non-streamed) answer.

Both I/O methods raise ``UpstreamError`` *before* anything is streamed when the backend
cannot be reached, answers with an error status, or sends no first byte in time, so
the gateway can still answer with a plain HTTP error.

A backend that compacts conversations by itself (a Responses server with its own
``/responses/compact``, when configured so) says so with ``native_compaction``; for every
other backend (None) the gateway compacts, asking the backend's model for the summary.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolwire.protocol import ResponsesRequest, StreamItem
from toolwire.translate import AnswerTranslator

JSON = dict[str, Any]


class StreamBatches(Protocol):
    """A streamed answer, parsed: one list of objects per network read (a Chat stream's
    plain chunks may come as ``PlainChunks``, read from their bytes).

    Everything that arrived together is translated and sent on together; when the
    upstream trickles, a batch holds one object. Iterating raises ``UpstreamError``
    when the stream breaks, stalls longer than the read timeout, or carries data that
    is not JSON. ``ended_cleanly`` says whether the upstream said it was done
    (``[DONE]``, or a terminal event) rather than just stopping; it turns true with the
    batch that held the end marker, so a reader can finish without waiting for the
    body's last bytes.
    """

    @property
    def ended_cleanly(self) -> bool: ...

    def __aiter__(self) -> AsyncIterator[list[StreamItem]]: ...


@dataclass(slots=True)
class UpstreamCall:
    """One request translated for its backend, and how its answer is translated back.

    ``body`` is what goes upstream (observers record it); ``translator`` builds the
    ``AnswerTranslator`` for the answer (each call a new one): built apart from the body,
    a streamed answer's translator is made once the body has gone upstream, while the
    upstream works on it (``server._pipeline.PendingStream``), not before the body leaves.
    ``warnings`` says what could not be sent, ``conversions`` what was reshaped on the way.
    """

    body: Mapping[str, Any]
    translator: Callable[[], AnswerTranslator]
    warnings: list[str] = field(default_factory=list)
    conversions: list[str] = field(default_factory=list)


class NativeCompaction(Protocol):
    """A backend's own compaction: ``compaction_trigger`` and ``compaction`` items pass to it
    as they are, and ``POST /v1/responses/compact`` goes to ``compact``."""

    async def compact(self, body: Mapping[str, Any]) -> JSON:
        """The backend's ``response.compaction`` object for ``body`` (a prepared request)."""
        ...


class Backend(Protocol):
    """One configured upstream, whatever its kind."""

    @property
    def native_compaction(self) -> NativeCompaction | None:
        """How the backend compacts by itself, or None: the gateway compacts for it."""
        ...

    def prepare(
        self, request: ResponsesRequest, *, upstream_model: str, response_id: str, created_at: int
    ) -> UpstreamCall:
        """Translate ``request`` (its stored history already in ``input``) for this backend.

        Pure; raises ``RequestError`` for what the client got wrong and this backend's wire
        cannot express (building the call's translator raises nothing of the kind).
        ``response_id`` and ``created_at`` name the Response the translator builds; its
        ``model`` is the client's (``request.model``).
        """
        ...

    def stream(self, body: Mapping[str, Any]) -> AbstractAsyncContextManager[StreamBatches]:
        """Open a streamed answer to ``body``; leaving the context closes the connection."""
        ...

    async def fetch(self, body: Mapping[str, Any]) -> JSON:
        """The whole answer to ``body``, not streamed."""
        ...

    async def check(self) -> str | None:
        """Raise ``UpstreamError`` if the backend is unreachable (for readiness probes); else
        what its answer says may keep it from serving requests (a key it refuses), or None."""
        ...

    async def aclose(self) -> None: ...


class ListBatches:
    """``StreamBatches`` over objects already in memory (the mock backend, tests)."""

    def __init__(self, batches: list[list[StreamItem]]) -> None:
        self._batches = batches
        self.ended_cleanly = False

    async def _iterate(self) -> AsyncIterator[list[StreamItem]]:
        for batch in self._batches:
            yield batch
        self.ended_cleanly = True

    def __aiter__(self) -> AsyncIterator[list[StreamItem]]:
        return self._iterate()
