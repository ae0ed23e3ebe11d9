"""``decide_stream_end``: how a response ends, from three facts about the upstream's end."""

from __future__ import annotations

import itertools

import pytest

from toolwire.translate import StreamEnd, StreamOutcome, decide_stream_end

COMPLETED = StreamEnd(StreamOutcome.COMPLETED)
NO_DONE = "The upstream stream ended before it finished (no finish reason, no [DONE])."


def failed(message: str) -> StreamEnd:
    return StreamEnd(StreamOutcome.FAILED, code="server_error", message=message)


def incomplete(reason: str) -> StreamEnd:
    return StreamEnd(StreamOutcome.INCOMPLETE, incomplete_reason=reason)


# (finish_reason, produced, ended_cleanly) -> the end
TABLE = [
    # the model said it finished
    ("stop", True, True, COMPLETED),
    ("stop", False, True, COMPLETED),  # an empty answer is still an answer
    ("stop", True, False, COMPLETED),  # the finish reason came; only [DONE] was lost
    ("tool_calls", True, True, COMPLETED),
    ("function_call", True, True, COMPLETED),
    ("eos", False, True, COMPLETED),
    ("end_turn", False, True, COMPLETED),
    # servers invent reasons: with output, a normal end; without, a failure
    ("weird", True, True, COMPLETED),
    ("weird", True, False, COMPLETED),
    ("weird", False, True, failed("upstream stream ended with finish reason 'weird' and no output")),
    # the model was cut off
    ("length", True, True, incomplete("max_output_tokens")),
    ("length", False, True, incomplete("max_output_tokens")),
    ("length", True, False, incomplete("max_output_tokens")),
    ("content_filter", True, True, incomplete("content_filter")),
    ("content_filter", False, False, incomplete("content_filter")),
    # the upstream said it failed
    ("error", True, True, failed("The upstream finished with reason 'error'.")),
    ("error", False, False, failed("The upstream finished with reason 'error'.")),
    # no finish reason at all
    (None, True, True, COMPLETED),  # some servers never send one
    (None, False, True, failed("upstream stream ended without a finish reason")),
    (None, True, False, failed(NO_DONE)),  # the body just stopped: never pass it as complete
    (None, False, False, failed(NO_DONE)),
]


@pytest.mark.parametrize(
    ("finish_reason", "produced", "ended_cleanly", "expected"),
    TABLE,
    ids=[f"{reason}-{'output' if produced else 'nothing'}-{'clean' if clean else 'cut'}" for reason, produced, clean, _ in TABLE],
)
def test_the_end_of_a_stream(
    finish_reason: str | None, produced: bool, ended_cleanly: bool, expected: StreamEnd
) -> None:
    assert decide_stream_end(finish_reason, produced=produced, ended_cleanly=ended_cleanly) == expected


@pytest.mark.parametrize(
    ("finish_reason", "produced", "ended_cleanly"),
    list(itertools.product([None, "stop", "length", "content_filter", "error", "weird"], [True, False], [True, False])),
)
def test_every_end_says_what_its_outcome_needs(
    finish_reason: str | None, produced: bool, ended_cleanly: bool
) -> None:
    end = decide_stream_end(finish_reason, produced=produced, ended_cleanly=ended_cleanly)
    failed_end = end.outcome is StreamOutcome.FAILED
    assert (end.code is not None, end.message is not None) == (failed_end, failed_end)
    assert (end.incomplete_reason is not None) == (end.outcome is StreamOutcome.INCOMPLETE)
