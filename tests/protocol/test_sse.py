"""SSEDecoder and encode_event, against the WHATWG spec's own examples and properties."""

from __future__ import annotations

import codecs
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolwire.protocol import (
    ServerSentEvent,
    SSEDecoder,
    SSELimitExceeded,
    encode_event,
    encode_events,
)
from toolwire.protocol._sse import _FRAME_STARTS, _MAX_FRAME_STARTS


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


def test_encode_events_is_the_frames_one_after_the_other() -> None:
    frames = [(b'{"a":1}', "response.created"), (b"x\ny", "two.lines"), (b"z\rw", None), (b"", "empty"), (b"{}", None)]
    assert encode_events(frames) == b"".join(encode_event(data, event) for data, event in frames) == (
        b'event: response.created\ndata: {"a":1}\n\n'
        b"event: two.lines\ndata: x\ndata: y\n\n"
        b"data: z\ndata: w\n\n"
        b"event: empty\ndata: \n\n"
        b"data: {}\n\n"
    )
    assert encode_events([]) == b""
    with pytest.raises(ValueError, match="line break"):
        encode_events([(b"{}", "a\nb")])


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


# ------------------------------------------------------ fast path and general path
# The decoder turns a block that is one ``data: `` line straight into its event and reads
# every other block line by line. ``LineByLineDecoder`` is the plain line-by-line reading
# of the spec (the decoder as it was before it had the shortcut): both must agree on any
# stream, cut anywhere.


class LineByLineDecoder:
    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._started = False
        self._after_cr = False
        self._event = ""
        self._data: list[str] = []
        self._last_id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes, final: bool = False) -> list[ServerSentEvent]:
        text = self._utf8.decode(chunk, final=final)
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._after_cr and text:
            self._after_cr = False
            text = text.removeprefix("\n")  # the LF of a CRLF cut in two
        lines: list[str] = []
        if text:
            text = self._buffer + text
            self._after_cr = text.endswith("\r")
            lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            self._buffer = lines.pop()
        events = [event for line in lines if (event := self._line(line)) is not None]
        if final:
            self._buffer, self._after_cr, self._event, self._data = "", False, "", []
        return events

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            event_type, data = self._event, self._data
            self._event, self._data = "", []
            if not data:
                return None
            return ServerSentEvent("\n".join(data), event_type or "message", self._last_id, self._retry)
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        return None


def decode_line_by_line(*chunks: bytes) -> list[ServerSentEvent]:
    decoder = LineByLineDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + decoder.feed(b"", final=True)


def decode_data(*chunks: bytes) -> list[str]:
    decoder = SSEDecoder()
    data = [payload for chunk in chunks for payload in decoder.feed_data(chunk)]
    return data + decoder.flush_data()


values = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=8)
lines = st.one_of(
    st.just(""),  # a blank line: the end of an event
    st.builds(lambda v: "data: " + v, values),  # the shape the shortcut takes
    st.builds(lambda v: 'data: {"k":"' + v + '"}', values),
    st.builds(lambda v: "data:" + v, values),
    st.sampled_from(["data", "data:", "data: ", "data:  two spaces", "event", "id", "retry"]),
    st.builds(lambda v: "event: " + v, values),
    st.builds(lambda v: "id: " + v, st.one_of(values, st.just("a\0b"))),
    st.builds(lambda v: "retry: " + v, st.one_of(st.from_regex(r"\A[0-9]{1,4}\Z"), values)),
    st.builds(lambda v: ":" + v, values),  # a comment
    st.builds(lambda v: "other: " + v, values),
    values,
)


@given(
    stream_lines=st.lists(st.tuples(lines, st.sampled_from(["\n", "\n", "\n", "\r", "\r\n"])), max_size=16),
    unterminated=st.one_of(st.just(""), lines),
    bom=st.booleans(),
    data=st.data(),
)
def test_any_lines_any_split_same_as_line_by_line(
    stream_lines: list[tuple[str, str]], unterminated: str, bom: bool, data: st.DataObject
) -> None:
    text = "".join(line + end for line, end in stream_lines) + unterminated
    stream = (b"\xef\xbb\xbf" if bom else b"") + text.encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]

    expected = decode_line_by_line(*chunks)
    assert decode(*chunks) == expected
    assert decode_data(*chunks) == [event.data for event in expected]


@pytest.mark.parametrize(
    ("stream", "expected"), SPEC_EXAMPLES + [pytest.param(s, e, id=i) for i, s, e in FIELD_CASES]
)
def test_line_by_line_reference_agrees_with_the_spec(stream: bytes, expected: list[ServerSentEvent]) -> None:
    assert decode_line_by_line(stream) == expected


SWITCH_CASES = [
    # The shortcut's events carry the id and retry that earlier (general) blocks set.
    ("id-then-shortcut", [b"id: 7\n\n", b"data: a\n\n"], [ServerSentEvent(data="a", id="7")]),
    ("retry-then-shortcut", [b"retry: 10\n\ndata: a\n\n"], [ServerSentEvent(data="a", retry=10)]),
    # An event type or data pending from the previous chunk: the next block is not one line.
    ("event-pending", [b"event: x\n", b"data: a\n\n"], [ServerSentEvent(data="a", event="x")]),
    ("data-pending", [b"data: a\n", b"data: b\n\n"], [ServerSentEvent(data="a\nb")]),
    ("blank-line-split-in-two", [b"data: a\n", b"\ndata: b\n\n"], [ServerSentEvent("a"), ServerSentEvent("b")]),
    # Blocks that look like the shortcut's shape, but are not.
    ("no-space", [b"data:a\n\n"], [ServerSentEvent(data="a")]),
    ("two-spaces", [b"data:  a\n\n"], [ServerSentEvent(data=" a")]),
    ("two-data-lines", [b"data: a\ndata: b\n\n"], [ServerSentEvent(data="a\nb")]),
    ("comment-first", [b": c\ndata: a\n\n"], [ServerSentEvent(data="a")]),
    ("three-line-ends", [b"data: a\n\n\ndata: b\n\n"], [ServerSentEvent("a"), ServerSentEvent("b")]),
    ("event-after-data", [b"data: a\nevent: x\n\ndata: b\n\n"], [ServerSentEvent("a", "x"), ServerSentEvent("b")]),
    ("crlf-blocks", [b"data: a\r\n\r\ndata: b\r\n\r\n"], [ServerSentEvent("a"), ServerSentEvent("b")]),
    ("cr-blocks", [b"data: a\r\rdata: b\r\r"], [ServerSentEvent("a"), ServerSentEvent("b")]),
    ("partial-line-completed", [b"data: {\"a\"", b":1}\n\n"], [ServerSentEvent('{"a":1}')]),
    ("unterminated-after-shortcut", [b"data: a\n\ndata: b\n"], [ServerSentEvent("a")]),
]


@pytest.mark.parametrize(("chunks", "expected"), [pytest.param(c, e, id=i) for i, c, e in SWITCH_CASES])
def test_switching_between_shortcut_and_line_by_line(chunks: list[bytes], expected: list[ServerSentEvent]) -> None:
    assert decode(*chunks) == expected
    assert decode_data(*chunks) == [event.data for event in expected]
    for result in decode_split_everywhere(b"".join(chunks)):
        assert result == expected


def test_id_from_an_unterminated_event_persists_after_flush() -> None:
    # The id line of a dropped event was read: the spec sets the last event id at once.
    decoder = SSEDecoder()
    assert decoder.feed(b"id: 5\ndata: a\n") == []
    assert decoder.flush() == []
    assert decoder.feed(b"data: b\n\n") == [ServerSentEvent(data="b", id="5")]


def test_feed_data_gives_the_data_of_each_event() -> None:
    decoder = SSEDecoder()
    assert decoder.feed_data(b'data: {"a":1}\n\nevent: x\nid: 2\ndata: y\ndata: z\n\nda') == ['{"a":1}', "y\nz"]
    assert decoder.feed_data(b"ta: [DONE]\n\ndata: cut") == ["[DONE]"]
    assert decoder.flush_data() == []


def test_encode_event_same_bytes_every_time() -> None:
    # The start of each event name's frames is made once and reused.
    first = [encode_event(b"{}", name) for name in ("response.created", "x", "", None)]
    again = [encode_event(b"{}", name) for name in ("response.created", "x", "", None)]
    assert first == again == [
        b"event: response.created\ndata: {}\n\n",
        b"event: x\ndata: {}\n\n",
        b"data: {}\n\n",
        b"data: {}\n\n",
    ]
    with pytest.raises(ValueError, match="line break"):
        encode_event(b"{}", "a\rb")
    with pytest.raises(ValueError, match="line break"):
        encode_event(b"{}", "a\rb")  # a bad name is not remembered as good


def test_encode_event_many_names() -> None:
    # Names can come from an upstream: any number of them still encode (the table is bounded).
    for number in range(2000):
        assert encode_event(b"1", f"name-{number}") == f"event: name-{number}\ndata: 1\n\n".encode()
    assert len(_FRAME_STARTS) <= _MAX_FRAME_STARTS


# ------------------------------------------------------ limits on what the decoder holds

LIMIT = 64


def feed_with_limits(chunks: list[bytes], *, data_only: bool = False) -> list[str]:
    decoder = SSEDecoder(max_line_bytes=LIMIT, max_event_bytes=2 * LIMIT)
    data: list[str] = []
    for chunk in chunks:
        data += decoder.feed_data(chunk) if data_only else [e.data for e in decoder.feed(chunk)]
    return data + (decoder.flush_data() if data_only else [e.data for e in decoder.flush()])


def pieces(stream: bytes, size: int) -> list[bytes]:
    return [stream[i : i + size] for i in range(0, len(stream), size)]


A_LINE_AT_THE_LIMIT = b"data: " + b"x" * (LIMIT - 6)
UNDER_THE_LIMITS = [
    pytest.param(A_LINE_AT_THE_LIMIT + b"\n\n", ["x" * (LIMIT - 6)], id="one-line-event-at-the-line-limit"),
    pytest.param(
        (A_LINE_AT_THE_LIMIT + b"\n") * 2 + b"data: " + b"y" * 3 + b"\n\n",
        [f"{'x' * (LIMIT - 6)}\n{'x' * (LIMIT - 6)}\ny" + "yy"],
        id="three-line-event-at-the-event-limit",
    ),
    pytest.param(b": " + b"c" * (LIMIT - 2) + b"\n" + b"data: ok\n\n", ["ok"], id="comment-at-the-line-limit"),
    pytest.param(
        ("data: " + "é" * ((LIMIT - 6) // 2) + "\n\n").encode(), ["é" * ((LIMIT - 6) // 2)], id="two-byte-characters-counted-as-bytes"
    ),
    pytest.param((A_LINE_AT_THE_LIMIT + b"\n\n") * 50, ["x" * (LIMIT - 6)] * 50, id="many-events-each-under"),
]
"""The event limit is 2 * LIMIT: 58 + 1 + 58 + 1 + 3 = 121 <= 128 (with 11 ``y``, 129 is over)."""


@pytest.mark.parametrize(("stream", "expected"), UNDER_THE_LIMITS)
@pytest.mark.parametrize("size", [1, 7, 64, 10_000], ids=lambda size: f"pieces-of-{size}")
@pytest.mark.parametrize("data_only", [False, True], ids=["feed", "feed_data"])
def test_streams_within_the_limits_decode_whole(stream: bytes, expected: list[str], size: int, data_only: bool) -> None:
    assert feed_with_limits(pieces(stream, size), data_only=data_only) == expected


OVER_THE_LIMITS = [
    pytest.param(A_LINE_AT_THE_LIMIT + b"x\n\n", "line", id="one-line-event-one-byte-over"),
    pytest.param(b"data: " + b"x" * 10_000, "line", id="a-line-that-never-ends"),
    pytest.param(b"data: {" + b'"a":' * 1000, "line", id="a-json-line-that-never-ends"),
    pytest.param(b": " + b"c" * LIMIT + b"\n\n", "line", id="a-comment-over"),
    pytest.param(("data: " + "é" * ((LIMIT - 6) // 2 + 1) + "\n\n").encode(), "line", id="two-byte-characters-over"),
    pytest.param(b"event: " + b"e" * LIMIT + b"\ndata: x\n\n", "line", id="an-event-name-over"),
    pytest.param(b"data: x\n" * 1000, "event", id="an-event-that-never-ends"),
    pytest.param((A_LINE_AT_THE_LIMIT + b"\n") * 2 + b"data: " + b"y" * 11 + b"\n\n", "event", id="lines-under-event-over"),
    pytest.param(b"data: x\r" * 1000, "event", id="an-event-that-never-ends-CR"),
]


@pytest.mark.parametrize(("stream", "what"), OVER_THE_LIMITS)
@pytest.mark.parametrize("size", [1, 7, 64, 10_000], ids=lambda size: f"pieces-of-{size}")
@pytest.mark.parametrize("data_only", [False, True], ids=["feed", "feed_data"])
def test_a_line_or_event_over_its_limit_raises(stream: bytes, what: str, size: int, data_only: bool) -> None:
    with pytest.raises(SSELimitExceeded) as raised:
        feed_with_limits(pieces(stream, size), data_only=data_only)
    assert raised.value.what == what
    assert raised.value.limit == (LIMIT if what == "line" else 2 * LIMIT)
    assert f"longer than {raised.value.limit} bytes" in str(raised.value)


def test_an_endless_line_raises_before_the_decoder_holds_much_more_than_the_limit() -> None:
    decoder = SSEDecoder(max_line_bytes=1000)
    held = 0
    with pytest.raises(SSELimitExceeded):
        decoder.feed(b"data: ")
        for _ in range(1000):
            decoder.feed(b"a" * 100)
            held += 100
    assert held <= 1000


def test_events_before_the_one_over_the_limit_are_returned_by_earlier_feeds() -> None:
    decoder = SSEDecoder(max_line_bytes=LIMIT, max_event_bytes=LIMIT)
    assert decoder.feed_data(b"data: first\n\n") == ["first"]
    with pytest.raises(SSELimitExceeded):
        decoder.feed_data(b"data: " + b"z" * LIMIT)


# ------------------------------------------------------ limits: the exact boundaries
# An event's size is its data as dispatched (lines joined with LF), in bytes of UTF-8.
EVENT_LIMIT = 10
EXACTLY_AT_THE_EVENT_LIMIT = [
    pytest.param(b"data: " + b"x" * EVENT_LIMIT + b"\n\n", id="one-data-line"),
    pytest.param(b"event: e\ndata: " + b"x" * EVENT_LIMIT + b"\n\n", id="one-data-line-after-a-field"),
    pytest.param(b"data: xxxx\ndata: yyyyy\n\n", id="two-data-lines-joined-by-one-byte"),
    pytest.param(b"id: 1\ndata: xxxx\ndata: yyyyy\n\n" * 3, id="one-after-another"),
]


def decode_in(pieces_of: int, stream: bytes, *, data_only: bool) -> list[str]:
    decoder = SSEDecoder(max_line_bytes=1000, max_event_bytes=EVENT_LIMIT)
    data: list[str] = []
    for chunk in pieces(stream, pieces_of):
        data += decoder.feed_data(chunk) if data_only else [e.data for e in decoder.feed(chunk)]
    return data + (decoder.flush_data() if data_only else [e.data for e in decoder.flush()])


@pytest.mark.parametrize("stream", EXACTLY_AT_THE_EVENT_LIMIT)
@pytest.mark.parametrize("size", [1, 10_000], ids=["byte-by-byte", "whole"])
@pytest.mark.parametrize("data_only", [False, True], ids=["feed", "feed_data"])
def test_an_event_exactly_at_its_limit_is_decoded(stream: bytes, size: int, data_only: bool) -> None:
    data = decode_in(size, stream, data_only=data_only)
    assert data and all(len(d.encode()) == EVENT_LIMIT for d in data)


@pytest.mark.parametrize(
    "stream",
    [
        pytest.param(b"data: " + b"x" * (EVENT_LIMIT + 1) + b"\n\n", id="one-data-line"),
        pytest.param(b"event: e\ndata: " + b"x" * (EVENT_LIMIT + 1) + b"\n\n", id="one-data-line-after-a-field"),
        pytest.param(b"data: xxxx\ndata: yyyyyy\n\n", id="two-data-lines"),
        pytest.param(b"data: xxxx\ndata: yyyyy\n\ndata: xxxx\ndata: yyyyyy\n\n", id="the-second-event"),
    ],
)
@pytest.mark.parametrize("size", [1, 10_000], ids=["byte-by-byte", "whole"])
@pytest.mark.parametrize("data_only", [False, True], ids=["feed", "feed_data"])
def test_an_event_one_byte_over_its_limit_raises(stream: bytes, size: int, data_only: bool) -> None:
    with pytest.raises(SSELimitExceeded) as raised:
        decode_in(size, stream, data_only=data_only)
    assert (raised.value.what, raised.value.limit) == ("event", EVENT_LIMIT)
    assert str(raised.value) == f"an SSE event longer than {EVENT_LIMIT} bytes"


@pytest.mark.parametrize("data_only", [False, True], ids=["flush", "flush_data"])
def test_a_stream_that_stops_inside_a_line_at_the_limit_ends_quietly(data_only: bool) -> None:
    decoder = SSEDecoder(max_line_bytes=10)
    assert decoder.feed(b"data: ok\n\ndata: abcd") == [ServerSentEvent(data="ok")]
    assert (decoder.flush_data() if data_only else decoder.flush()) == []


# ------------------------------------------------------ encode_event: line breaks


@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
@pytest.mark.parametrize("text", ["a\nb", "a\rb", "a\r\nb", "a\n\nb"])
def test_every_line_break_in_the_data_starts_a_data_line(text: str, as_bytes: bool) -> None:
    encoded = encode_event(text.encode() if as_bytes else text, event="e")
    lines = normalize_line_ends(text).split("\n")
    assert encoded == ("event: e\n" + "".join(f"data: {line}\n" for line in lines) + "\n").encode()
    assert decode(encoded) == [ServerSentEvent(data=normalize_line_ends(text), event="e")]


@pytest.fixture
def room_for_new_names() -> Iterator[None]:
    """The table of frame starts as a fresh process has it (earlier tests filled it)."""
    kept = dict(_FRAME_STARTS)
    _FRAME_STARTS.clear()
    _FRAME_STARTS.update({None: b"data: ", "": b"data: "})
    try:
        yield
    finally:
        _FRAME_STARTS.clear()
        _FRAME_STARTS.update(kept)


def test_a_new_name_encodes_the_same_every_time(room_for_new_names: None) -> None:
    frames = [encode_event(b"{}", "response.fresh") for _ in range(3)]
    assert frames == [b"event: response.fresh\ndata: {}\n\n"] * 3
    assert encode_event(b"{}") == encode_event(b"{}", "") == b"data: {}\n\n"


@pytest.mark.parametrize("data_only", [False, True], ids=["flush", "flush_data"])
def test_a_character_cut_by_the_end_of_the_stream_counts_toward_the_line_limit(data_only: bool) -> None:
    # The end of the stream decodes the cut character too (as U+FFFD, three bytes): the
    # line limit holds for every byte decoded, the last ones included.
    decoder = SSEDecoder(max_line_bytes=10)
    assert decoder.feed(b"data: abc\xc3") == []
    with pytest.raises(SSELimitExceeded) as raised:
        decoder.flush_data() if data_only else decoder.flush()
    assert (raised.value.what, raised.value.limit) == ("line", 10)


# ------------------------------------------------------ idle: between two events


@pytest.mark.parametrize(
    ("fed", "idle"),
    [
        ([], False),  # the stream's start (a BOM may come) is ahead
        ([b""], False),
        ([b"data: a\n\n"], True),
        ([b"\xef\xbb\xbfdata: a\n\n"], True),
        ([b": comment\n\n"], True),
        ([b"data: a\n"], False),  # the event is not over
        ([b"event: x\n"], False),
        ([b"data: a\n\n", b"data"], False),  # half a line
        ([b"data: a\r"], False),
        ([b"data: a\r\r"], False),  # an LF may still follow the CR
        ([b"data: a\r\r", b"\n"], True),
        ([b"data: a\n\n", b"data: \xc3"], False),  # half a character, and a line
        ([b"data: a\n\n\xc3"], False),  # half a character
        ([b"data: a\n\n", b"id: 1\n\n"], True),  # an id is kept, but no event is pending
    ],
)
def test_idle_between_events(fed: list[bytes], idle: bool) -> None:
    decoder = SSEDecoder()
    for chunk in fed:
        decoder.feed_data(chunk)
    assert decoder.idle is idle


@given(st.lists(st.binary(max_size=12), max_size=6), st.text(max_size=20).filter(lambda s: "\n" not in s and "\r" not in s))
def test_bytes_ending_in_a_blank_line_leave_the_decoder_idle(chunks: list[bytes], data: str) -> None:
    """Whatever came before, bytes ending with LF LF end the event; then a one-line frame
    gives exactly its data."""
    decoder = SSEDecoder()
    for chunk in chunks:
        decoder.feed_data(chunk)
    decoder.feed_data(b"\n\n")
    assert decoder.idle
    assert decoder.feed_data(b"data: " + data.encode() + b"\n\n") == [data]
    assert decoder.idle
