"""calls_from_stream: a call comes only from a completed item of a finished stream."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.protocol.reference_stream import (
    CUSTOM_INPUT,
    FUNCTION_ARGUMENTS,
    encode_stream,
    reference_events,
)
from toolwire.errors import UpstreamError
from toolwire.tools import CustomPayload, FunctionPayload, ToolCall, ToolName, calls_from_stream

EXPECTED = [
    ToolCall(ToolName(None, "exec_command"), "call_0", FunctionPayload(FUNCTION_ARGUMENTS)),
    ToolCall(ToolName("functions", "exec"), "call_c1", CustomPayload(CUSTOM_INPUT)),
]


class Chunks:
    """Yields the stream in pieces and remembers how many bytes were handed out."""

    def __init__(self, stream: bytes, cuts: list[int]) -> None:
        self.stream = stream
        self.cuts = cuts
        self.fed = 0

    def __iter__(self) -> Iterator[bytes]:
        for end in [*self.cuts, len(self.stream)]:
            chunk = self.stream[self.fed : end]
            self.fed = end
            yield chunk


def test_reference_stream_split_at_every_byte_boundary() -> None:
    stream, _ = encode_stream(reference_events())
    for cut in range(len(stream) + 1):
        assert list(calls_from_stream([stream[:cut], stream[cut:]])) == EXPECTED, cut


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_each_call_arrives_exactly_when_its_output_item_done_completes(line_end: bytes) -> None:
    events = reference_events()
    stream, ends = encode_stream(events, line_end=line_end)
    done_ends = [
        end
        for event, end in zip(events, ends, strict=True)
        if event["type"] == "response.output_item.done" and event["item"]["type"] in {"function_call", "custom_tool_call"}
    ]
    chunks = Chunks(stream, list(range(1, len(stream))))  # one byte at a time
    fed_at_yield: list[int] = []
    calls: list[ToolCall] = []
    for call in calls_from_stream(chunks):
        fed_at_yield.append(chunks.fed)
        calls.append(call)
    assert calls == EXPECTED
    # Not one byte early (deltas and output_item.added never make a call), and no later
    # than the byte that ends the done event's frame (with CRLF, its CR already ends it).
    slack = len(line_end) - 1
    for fed, end in zip(fed_at_yield, done_ends, strict=True):
        assert end - slack <= fed <= end


def test_deltas_alone_make_no_call() -> None:
    events = [
        event
        for event in reference_events()
        if event["type"] != "response.output_item.done" or event["item"]["type"] not in {"function_call", "custom_tool_call"}
    ]
    stream, _ = encode_stream(events)
    assert list(calls_from_stream([stream])) == []


def test_stream_without_terminal_event_raises_after_its_calls() -> None:
    stream, _ = encode_stream(reference_events(terminal=False))
    calls = calls_from_stream([stream])
    assert next(calls) == EXPECTED[0]
    assert next(calls) == EXPECTED[1]
    with pytest.raises(UpstreamError, match="before a terminal event"):
        next(calls)


def test_empty_stream_raises() -> None:
    with pytest.raises(UpstreamError):
        list(calls_from_stream([]))


def test_calls_after_the_terminal_event_are_ignored() -> None:
    stream, _ = encode_stream(reference_events())
    late, _ = encode_stream([
        {"type": "response.output_item.done", "output_index": 5, "item": {"type": "function_call", "call_id": "late", "name": "exec_command", "arguments": "{}"}},
    ])
    assert list(calls_from_stream([stream, late])) == EXPECTED


def test_a_call_that_is_the_first_item_is_yielded() -> None:
    call_item = {"type": "function_call", "call_id": "first", "name": "exec_command", "arguments": "{}"}
    stream, _ = encode_stream([
        {"type": "response.output_item.done", "output_index": 0, "item": call_item},
        {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": [call_item]}},
    ])
    expected = [ToolCall(ToolName(None, "exec_command"), "first", FunctionPayload("{}"))]
    assert list(calls_from_stream([stream])) == expected
    assert list(calls_from_stream([stream[:-1], stream[-1:]])) == expected
