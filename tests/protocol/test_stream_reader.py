"""ResponseStreamReader: items only from output_item.done, and exactly one terminal event."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from toolwire.errors import UpstreamError, UpstreamProtocolError
from toolwire.protocol import (
    CustomToolCallItem,
    FunctionCallItem,
    MessageItem,
    ReasoningItem,
    ResponseStreamReader,
    dump_item,
    encode_event,
)

from .reference_stream import CUSTOM_CALL_ITEM, FUNCTION_CALL_ITEM, encode_stream, reference_events


def read(stream: bytes, chunk_size: int | None = None) -> ResponseStreamReader:
    reader = ResponseStreamReader()
    size = chunk_size or len(stream) or 1
    for start in range(0, len(stream), size):
        reader.feed(stream[start : start + size])
    reader.flush()
    return reader


def frame(event: dict[str, Any]) -> bytes:
    return encode_event(orjson.dumps(event), event=str(event.get("type")))


@pytest.mark.parametrize("chunk_size", [None, 1, 7, 64])
@pytest.mark.parametrize("line_end", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_reference_stream(chunk_size: int | None, line_end: bytes) -> None:
    stream, _ = encode_stream(reference_events(), line_end=line_end)
    reader = read(stream, chunk_size)
    assert [type(item) for item in reader.items] == [ReasoningItem, MessageItem, FunctionCallItem, CustomToolCallItem]
    assert dump_item(reader.items[2]) == FUNCTION_CALL_ITEM
    assert dump_item(reader.items[3]) == CUSTOM_CALL_ITEM
    assert reader.finished
    assert reader.status == "completed"
    assert reader.response is not None and reader.response["id"] == "resp_abc"


def test_feed_returns_the_events_it_completed() -> None:
    events = reference_events()
    stream, ends = encode_stream(events)
    reader = ResponseStreamReader()
    assert reader.feed(stream[: ends[1]]) == events[:2]
    assert reader.items == []
    assert reader.feed(stream[ends[1] :]) == events[2:]
    assert reader.flush() == []


def test_items_appear_only_at_output_item_done() -> None:
    events = reference_events()
    stream, ends = encode_stream(events)
    reader = ResponseStreamReader()
    start = 0
    for event, end in zip(events, ends, strict=True):
        before = len(reader.items)
        reader.feed(stream[start:end])
        start = end
        grew = len(reader.items) - before
        assert grew == (1 if event["type"] == "response.output_item.done" else 0), event["type"]


def test_done_marker_is_ignored() -> None:
    stream, _ = encode_stream(reference_events())
    reader = read(stream + b"data: [DONE]\n\n")
    assert reader.status == "completed"


@pytest.mark.parametrize("kind", ["response.failed", "response.incomplete"])
def test_other_terminal_events(kind: str) -> None:
    response = {"id": "resp_1", "status": kind.removeprefix("response."), "error": {"code": "server_error", "message": "x"}}
    reader = read(frame({"type": kind, "sequence_number": 0, "response": response}))
    assert reader.status == kind.removeprefix("response.")
    assert reader.response == response


def test_nothing_after_the_terminal_event_counts() -> None:
    stream, _ = encode_stream(reference_events())
    late_call = {"type": "response.output_item.done", "output_index": 9, "item": {**FUNCTION_CALL_ITEM, "call_id": "late"}}
    second_terminal = {"type": "response.failed", "response": {"id": "resp_abc"}}
    reader = ResponseStreamReader()
    reader.feed(stream)
    assert reader.feed(frame(late_call) + frame(second_terminal)) == []
    reader.flush()
    assert len(reader.items) == 4
    assert reader.status == "completed"


@pytest.mark.parametrize("cut", ["no-terminal", "unterminated-terminal"])
def test_stream_without_terminal_event_raises(cut: str) -> None:
    stream, ends = encode_stream(reference_events())
    stream = stream[: ends[-2]] if cut == "no-terminal" else stream[:-1]
    reader = ResponseStreamReader()
    reader.feed(stream)
    assert len(reader.items) == 4
    with pytest.raises(UpstreamError) as caught:
        reader.flush()
    assert caught.value.message == "The stream closed before a terminal event (response.completed)."


def test_malformed_output_item_is_an_upstream_protocol_error() -> None:
    bad = {"type": "response.output_item.done", "output_index": 2, "item": {**FUNCTION_CALL_ITEM, "arguments": {"cmd": "ls"}}}
    reader = ResponseStreamReader()
    with pytest.raises(UpstreamProtocolError, match=r"response\.output\[2\]\.arguments"):
        reader.feed(frame(bad))


@pytest.mark.parametrize(
    "data",
    [b"not json", b'["response.completed"]', b'{"no": "type"}', b'{"type": 5}'],
)
def test_malformed_event_is_an_upstream_protocol_error(data: bytes) -> None:
    with pytest.raises(UpstreamProtocolError):
        ResponseStreamReader().feed(b"data: " + data + b"\n\n")


def test_terminal_event_without_response_object() -> None:
    with pytest.raises(UpstreamProtocolError, match="without a response object"):
        ResponseStreamReader().feed(b'data: {"type": "response.completed"}\n\n')


def test_a_done_marker_anywhere_is_skipped_and_reading_goes_on() -> None:
    # Some servers send Chat-style [DONE] markers; one before the terminal event must not
    # end the reading of what follows it in the same chunk.
    stream, ends = encode_stream(reference_events())
    reader = ResponseStreamReader()
    reader.feed(stream[: ends[-2]] + b"data: [DONE]\n\n" + stream[ends[-2] :])
    reader.flush()
    assert (reader.status, len(reader.items)) == ("completed", 4)


def test_a_malformed_item_without_an_output_index_is_named_item() -> None:
    bad = {"type": "response.output_item.done", "item": {**FUNCTION_CALL_ITEM, "arguments": {"cmd": "ls"}}}
    with pytest.raises(UpstreamProtocolError) as caught:
        ResponseStreamReader().feed(frame(bad))
    assert caught.value.message == (
        "Malformed output item: Invalid 'item.arguments': input should be a valid string."
    )


def test_a_reader_has_no_status_before_its_terminal_event() -> None:
    stream, ends = encode_stream(reference_events())
    reader = ResponseStreamReader()
    assert (reader.status, reader.finished) == (None, False)
    reader.feed(stream[: ends[-2]])
    assert (reader.status, reader.response, reader.finished) == (None, None, False)


def whole_response() -> dict[str, Any]:
    """The reference stream's Response, whole, as a server that ignored ``stream`` sends it."""
    response = reference_events()[-1]["response"]
    assert response["status"] == "completed" and len(response["output"]) == 4
    return dict(response)


@pytest.mark.parametrize("chunk_size", [None, 1, 50])
def test_a_whole_response_instead_of_a_stream_is_read_as_its_stream(chunk_size: int | None) -> None:
    """A body beginning with ``{`` (after blank bytes, even ones fed alone) is no event
    stream: nothing comes of it until it ends, then every item, in order, and the terminal
    event its status names, as the stream would have carried them."""
    answer = whole_response()
    reader = ResponseStreamReader()
    assert reader.feed(b"\n ") == []
    body = orjson.dumps(answer)
    size = chunk_size or len(body)
    for start in range(0, len(body), size):
        assert reader.feed(body[start : start + size]) == []
    assert (reader.items, reader.finished) == ([], False)
    events = reader.flush()
    assert [dump_item(item) for item in reader.items] == answer["output"]
    assert dump_item(reader.items[3]) == CUSTOM_CALL_ITEM
    assert (reader.status, reader.response) == ("completed", answer)
    assert [event["type"] for event in events][:2] == ["response.created", "response.output_item.added"]


@pytest.mark.parametrize("status", ["incomplete", "failed"])
def test_a_whole_response_that_did_not_complete_says_so(status: str) -> None:
    answer = {**whole_response(), "status": status, "output": []}
    reader = read(orjson.dumps(answer))
    assert (reader.status, reader.response, reader.items) == (status, answer, [])


def test_an_error_object_in_place_of_a_stream_fails_the_response_with_its_message() -> None:
    reader = read(b'{"error": {"message": "model not found", "code": "model_not_found"}}')
    assert reader.status == "failed" and reader.response is not None
    assert reader.response["error"] == {"message": "model not found", "code": "model_not_found"}


def test_blank_bytes_before_a_whole_response_in_the_same_read() -> None:
    answer = whole_response()
    reader = read(b"\r\n \n" + orjson.dumps(answer))
    assert (reader.status, len(reader.items)) == ("completed", 4)


LONG = "x" * 300


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"id": "resp_1", "output": [', "The server answered a streamed request with a body that is neither an event stream nor JSON."),
        (
            orjson.dumps({"id": LONG, "status": "completed"}),
            "The server answered a streamed request with JSON that is neither a Response nor an error: "
            + repr(orjson.dumps({"id": LONG, "status": "completed"})[:200])
            + ".",
        ),
    ],
    ids=["not JSON", "not a Response"],
)
def test_a_body_that_is_neither_a_stream_nor_a_response(body: bytes, message: str) -> None:
    reader = ResponseStreamReader()
    reader.feed(body)
    with pytest.raises(UpstreamProtocolError) as refused:
        reader.flush()
    assert refused.value.message == message


def test_a_malformed_item_in_a_whole_response_is_named_by_its_place() -> None:
    answer = {**whole_response(), "output": [{**FUNCTION_CALL_ITEM, "arguments": {"cmd": "ls"}}]}
    with pytest.raises(UpstreamProtocolError, match=r"response\.output\[0\]\.arguments"):
        read(orjson.dumps(answer))
