"""How an upstream answer ends, decided in one pure function: ``decide_stream_end``.

An answer translator reads three facts at the upstream's end (the finish reason the
model gave, whether anything was produced, whether the stream ended cleanly) and asks
``decide_stream_end`` what the response becomes: ``completed``, ``incomplete`` with its
reason (the model was cut off), or ``failed`` with a code and a message.
``ResponsesEventWriter.end`` then writes it.

Finish reasons are Chat Completions' (``stop``, ``length``, ``tool_calls``, ...), plus
the few other spellings servers use for a normal end (``eos``, ``end_turn``); a
translator of another wire maps its own stop reasons to these first.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["StreamEnd", "StreamOutcome", "decide_stream_end"]


class StreamOutcome(Enum):
    """The terminal status of a response."""

    COMPLETED = "completed"
    """The model finished: ``response.completed``."""
    INCOMPLETE = "incomplete"
    """The model was cut off (a token limit, a content filter): ``response.incomplete``."""
    FAILED = "failed"
    """The upstream failed, or its answer cannot be trusted whole: ``error`` +
    ``response.failed``."""


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """What a response becomes at the upstream's end."""

    outcome: StreamOutcome
    incomplete_reason: str | None = None
    """For ``INCOMPLETE``: the Responses reason (``max_output_tokens``, ``content_filter``)."""
    code: str | None = None
    """For ``FAILED``: the error code (``server_error``)."""
    message: str | None = None
    """For ``FAILED``: what happened, for the client."""


# finish_reason values that mean "the model was cut off", and the Responses reason for each.
INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}
NORMAL_FINISH_REASONS = frozenset({"stop", "tool_calls", "function_call", "eos", "end_turn"})
_COMPLETED = StreamEnd(StreamOutcome.COMPLETED)


def decide_stream_end(finish_reason: str | None, *, produced: bool, ended_cleanly: bool) -> StreamEnd:
    """What a response becomes, from the upstream's ``finish_reason`` (None: it gave none),
    whether the model ``produced`` any output item, and whether the stream ``ended_cleanly``
    (``[DONE]`` or its protocol's end, rather than a body that just stopped).

    An answer cut short is never passed as complete: without a finish reason, a stream
    that did not end cleanly, or one that produced nothing, failed. An unknown finish
    reason with output is a normal end (servers invent their own); without output, a
    failure.
    """
    if finish_reason == "error":
        return _failed("The upstream finished with reason 'error'.")
    if finish_reason is None and not ended_cleanly:
        return _failed(
            "The upstream stream ended before it finished (no finish reason, no [DONE])."
        )
    if finish_reason is None and not produced:
        return _failed("upstream stream ended without a finish reason")
    incomplete_reason = INCOMPLETE_REASONS.get(finish_reason or "")
    if incomplete_reason is not None:
        return StreamEnd(StreamOutcome.INCOMPLETE, incomplete_reason=incomplete_reason)
    if not produced and finish_reason not in NORMAL_FINISH_REASONS:
        return _failed(
            f"upstream stream ended with finish reason {finish_reason!r} and no output"
        )
    return _COMPLETED


def _failed(message: str) -> StreamEnd:
    return StreamEnd(StreamOutcome.FAILED, code="server_error", message=message)
