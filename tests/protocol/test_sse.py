"""SSEDecoder and encode_event, against the WHATWG spec's own examples and properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolwire.protocol import ServerSentEvent, SSEDecoder, encode_event


def decode(*chunks: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events + decoder.flush()


def decode_split_everywhere(stream: bytes) -> list[list[ServerSentEvent]]:
    """The events for every way of cutting ``stream`` in two, and byte by byte."""
    results = [decode(stream[:cut], stream[cut:]) for cut in range(len(stream) + 1)]
    results.append(decode(*(stream[i : i + 1] for i in range(len(stream)))))
    return results


# ------------------------------------------------------ the WHATWG spec's examples
# https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation

SPEC_EXAMPLES = [
    pytest.param(
        b"data: YHOO\ndata: +2\ndata: 10\n\n",
        [ServerSentEvent(data="YHOO\n+2\n10")],
        id="stock-ticker-multiline-data",
    ),
    pytest.param(
        b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n",
        [
            ServerSentEvent(data="first event", id="1"),
            ServerSentEvent(data="second event", id=""),
            ServerSentEvent(data=" third event", id=""),
        ],
        id="comment-ids-and-one-space-stripped",
    ),
    pytest.param(
        b"data\n\ndata\ndata\n\ndata:",
        [ServerSentEvent(data=""), ServerSentEvent(data="\n")],
        id="data-without-colon-and-unterminated-last-block",
    ),
    pytest.param(
        b"data:test\n\ndata: test\n\n",
        [ServerSentEvent(data="test"), ServerSentEvent(data="test")],
        id="space-after-colon-is-optional",
    ),
    pytest.param(
        b"event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n",
        [
            ServerSentEvent(data="73857293", event="add"),
            ServerSentEvent(data="2153", event="remove"),
            ServerSentEvent(data="113411", event="add"),
        ],
        id="event-types",
    ),
]


@pytest.mark.parametrize(("stream", "expected"), SPEC_EXAMPLES)
def test_spec_examples(stream: bytes, expected: list[ServerSentEvent]) -> None:
    assert decode(stream) == expected


@pytest.mark.parametrize(("stream", "expected"), SPEC_EXAMPLES)
@pytest.mark.parametrize("line_end", [b"\n", b"\r", b"\r\n"], ids=["LF", "CR", "CRLF"])
def test_spec_examples_any_line_end_any_split(
    stream: bytes, expected: list[ServerSentEvent], line_end: bytes
) -> None:
    stream = stream.replace(b"\n", line_end)
    for result in decode_split_everywhere(stream):
        assert result == expected


# ------------------------------------------------------ field rules, one by one

FIELD_CASES = [
    ("comment-only", b": keep-alive\n\n", []),
    ("comment-between-data", b"data: a\n: hi\ndata: b\n\n", [ServerSentEvent(data="a\nb")]),
    ("one-space-stripped-only", b"data:   x\n\n", [ServerSentEvent(data="  x")]),
    ("tab-not-stripped", b"data:\tx\n\n", [ServerSentEvent(data="\tx")]),
    ("trailing-space-kept", b"data: x \n\n", [ServerSentEvent(data="x ")]),
    ("colon-in-value", b"data: a: b\n\n", [ServerSentEvent(data="a: b")]),
    ("empty-data", b"data:\n\n", [ServerSentEvent(data="")]),
    ("no-data-no-event", b"event: ping\n\n", []),
    ("event-reset-after-dispatch", b"event: a\ndata: 1\n\ndata: 2\n\n", [
        ServerSentEvent(data="1", event="a"),
        ServerSentEvent(data="2"),
    ]),
    ("event-without-data-does-not-leak", b"event: a\n\ndata: 2\n\n", [ServerSentEvent(data="2")]),
    ("unknown-field-ignored", b"foo: bar\ndata: x\n\n", [ServerSentEvent(data="x")]),
    ("field-name-is-case-sensitive", b"Data: x\ndata: y\n\n", [ServerSentEvent(data="y")]),
    ("id-persists", b"id: 7\ndata: a\n\ndata: b\n\n", [
        ServerSentEvent(data="a", id="7"),
        ServerSentEvent(data="b", id="7"),
    ]),
    ("id-with-null-ignored", b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", [
        ServerSentEvent(data="a", id="1"),
        ServerSentEvent(data="b", id="1"),
    ]),
    ("retry-digits", b"retry: 3000\ndata: a\n\n", [ServerSentEvent(data="a", retry=3000)]),
    ("retry-not-digits-ignored", b"retry: 30s\ndata: a\n\nretry: \xd9\xa3\ndata: b\n\n", [
        ServerSentEvent(data="a"),
        ServerSentEvent(data="b"),
    ]),
    ("bom-at-start-stripped", b"\xef\xbb\xbfdata: a\n\n", [ServerSentEvent(data="a")]),
    ("only-one-bom-stripped", b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\ndata: b\n\n", [ServerSentEvent(data="b")]),
    ("bom-later-is-data", b"data: \xef\xbb\xbfa\n\n", [ServerSentEvent(data="\ufeffa")]),
    ("done-is-data", b"data: [DONE]\n\n", [ServerSentEvent(data="[DONE]")]),
    ("invalid-utf8-replaced", b"data: a\xffb\n\n", [ServerSentEvent(data="a\ufffdb")]),
    ("unterminated-dropped", b"data: a\n\ndata: b\n", [ServerSentEvent(data="a")]),
    ("unterminated-line-dropped", b"data: a\n\ndata: b", [ServerSentEvent(data="a")]),
    ("cr-lf-mixed", b"data: a\rdata: b\r\ndata: c\n\r\n", [ServerSentEvent(data="a\nb\nc")]),
    ("lf-cr-is-two-line-ends", b"data: a\n\rdata: b\n\n", [ServerSentEvent(data="a"), ServerSentEvent(data="b")]),
    ("other-unicode-breaks-are-not-line-ends", "data: a\u2028b\x85c\x0bd\n\n".encode(), [
        ServerSentEvent(data="a\u2028b\x85c\x0bd"),
    ]),
]


@pytest.mark.parametrize(("stream", "expected"), [pytest.param(s, e, id=i) for i, s, e in FIELD_CASES])
def test_field_rules_any_split(stream: bytes, expected: list[ServerSentEvent]) -> None:
    for result in decode_split_everywhere(stream):
        assert result == expected


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    # If the LF after a chunk-final CR were a line of its own, it would end the event early.
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\ndata: b\r") == []
    assert decoder.feed(b"\n") == []
    assert decoder.feed(b"\r") == [ServerSentEvent(data="a\nb")]
    assert decoder.feed(b"\n") == []  # the rest of that CRLF, not another blank line
    assert decoder.flush() == []


def test_cr_dispatches_without_waiting_for_more_bytes() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r\r") == [ServerSentEvent(data="a")]


def test_multibyte_character_split_inside() -> None:
    text = "é€😀"
    stream = f"event: {text}\ndata: {text}\n\n".encode()
    for result in decode_split_everywhere(stream):
        assert result == [ServerSentEvent(data=text, event=text)]


def test_bom_split_across_chunks() -> None:
    assert decode(b"\xef", b"\xbb", b"\xbf", b"data: a\n\n") == [ServerSentEvent(data="a")]


def test_events_are_returned_as_soon_as_complete() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.feed(b"\ndata: b\n\nda") == [ServerSentEvent(data="a"), ServerSentEvent(data="b")]
    assert decoder.feed(b"ta: c\n\n") == [ServerSentEvent(data="c")]
    assert decoder.flush() == []


def test_flush_drops_pending_event() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: x\ndata: a\n") == []
    assert decoder.flush() == []


# ------------------------------------------------------ encode_event


def test_encode_event_shape() -> None:
    assert encode_event('{"a":1}', event="response.created") == b'event: response.created\ndata: {"a":1}\n\n'
    assert encode_event(b'{"a":1}') == b'data: {"a":1}\n\n'
    assert encode_event("a\nb") == b"data: a\ndata: b\n\n"
    assert encode_event(b"a\r\nb") == b"data: a\ndata: b\n\n"


def test_encode_event_rejects_line_break_in_event_name() -> None:
    with pytest.raises(ValueError, match="line break"):
        encode_event("x", event="a\nb")


def normalize_line_ends(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


event_names = st.one_of(
    st.none(),
    st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=12),
)
event_lists = st.lists(st.tuples(st.text(max_size=40), event_names), max_size=8)


@given(
    events=event_lists,
    line_end=st.sampled_from([b"\n", b"\r", b"\r\n"]),
    bom=st.booleans(),
    as_bytes=st.booleans(),
    data=st.data(),
)
def test_any_events_any_line_end_any_split_round_trip(
    events: list[tuple[str, str | None]],
    line_end: bytes,
    bom: bool,
    as_bytes: bool,
    data: st.DataObject,
) -> None:
    stream = b"".join(
        encode_event(text.encode() if as_bytes else text, event=name) for text, name in events
    )
    stream = (b"\xef\xbb\xbf" if bom else b"") + stream.replace(b"\n", line_end)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]

    expected = [ServerSentEvent(data=normalize_line_ends(text), event=name or "message") for text, name in events]
    assert decode(*chunks) == expected
