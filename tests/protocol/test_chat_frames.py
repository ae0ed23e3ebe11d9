"""PlainContentFrames: a stream's plain chunks learned from one parsed chunk and read from
their bytes; what makes a chunk plain; PlainChunks."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from toolwire.protocol import PlainChunks, PlainContentFrames, WholeAnswer, plain_content

JSON = dict[str, Any]
ENVELOPE: JSON = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": "m"}
NO_LIMIT = 2**20


def chunk(content: Any, **delta: Any) -> JSON:
    return {**ENVELOPE, "choices": [{"index": 0, "delta": {"content": content, **delta}, "finish_reason": None}]}


def frame(made: JSON | bytes) -> bytes:
    return b"data: " + (made if isinstance(made, bytes) else orjson.dumps(made)) + b"\n\n"


def taught(made: JSON | bytes) -> PlainContentFrames:
    """Frames that learned from ``made`` (a chunk, or its exact bytes)."""
    data = made if isinstance(made, bytes) else orjson.dumps(made)
    frames = PlainContentFrames()
    frames.learn(data.decode(), orjson.loads(data))
    return frames


def read(frames: PlainContentFrames, data: bytes, longest: int = NO_LIMIT) -> tuple[str, int]:
    return frames.read_run(data, 0, longest)


# ------------------------------------------------------------ plain_content


@pytest.mark.parametrize(
    ("made", "content"),
    [
        (chunk("Hi"), "Hi"),
        (chunk("Hi", role="assistant"), "Hi"),
        (chunk("Hi", reasoning_content=None, refusal=None, tool_calls=None), "Hi"),
        ({"choices": [{"delta": {"content": "Hi"}}]}, "Hi"),  # no index: choice 0
        (chunk(""), None),
        (chunk(None), None),
        (chunk(["Hi"]), None),
        (chunk("Hi", reasoning_content="hm"), None),
        (chunk("Hi", tool_calls=[]), None),
        ({**chunk("Hi"), "usage": {"total_tokens": 1}}, None),
        ({**chunk("Hi"), "usage": None}, "Hi"),
        ({**chunk("Hi"), "error": None}, None),
        ({**chunk("Hi"), "object": "error"}, None),
        ({"choices": [{"index": 1, "delta": {"content": "Hi"}}]}, None),
        ({"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]}, None),
        ({"choices": [{"index": 0, "delta": {"content": "Hi"}}, {"index": 1, "delta": {"content": "Yo"}}]}, None),
        ({"choices": []}, None),
        ({"choices": "Hi"}, None),
        ({"choices": ["Hi"]}, None),
        ({"choices": [{"index": 0, "delta": "Hi"}]}, None),
        ({}, None),
    ],
    ids=["content", "with its role", "with null fields", "no index", "empty", "null", "a list", "with reasoning",
         "with an empty call list", "with usage", "with null usage", "with a null error", "an error object",
         "another choice", "with a finish reason", "two choices", "no choice", "choices not a list",
         "choice not an object", "delta not an object", "nothing"],
)  # fmt: skip
def test_what_a_plain_chunk_is(made: JSON, content: str | None) -> None:
    assert plain_content(made) == content


# ------------------------------------------------------------ learning and reading


def test_frames_of_the_learned_shape_are_read_as_their_text() -> None:
    frames = taught(chunk("Hi"))
    assert frames.learned
    data = frame(chunk(" there")) + frame(chunk(', "quoted" \\ and \u00e9\U0001f600')) + frame(chunk("\n"))
    assert read(frames, data) == (' there, "quoted" \\ and \u00e9\U0001f600\n', len(data))


def test_nothing_is_read_before_a_shape_is_learned() -> None:
    frames = PlainContentFrames()
    assert not frames.learned
    assert read(frames, frame(chunk("Hi"))) == ("", 0)


def test_reading_starts_where_it_is_told_and_stops_at_the_first_other_frame() -> None:
    frames = taught(chunk("Hi"))
    first, second, other = frame(chunk("a")), frame(chunk("b")), frame({**chunk("c"), "usage": {"total_tokens": 1}})
    data = b": ping\n\n" + first + second + other + frame(chunk("d"))
    assert frames.read_run(data, 8, NO_LIMIT) == ("ab", 8 + len(first) + len(second))
    assert frames.read_run(data, 0, NO_LIMIT) == ("", 0)


@pytest.mark.parametrize(
    "data",
    [
        frame(chunk("Hi", role="assistant")),  # another shape
        frame({**chunk("Hi"), "id": "chatcmpl-2"}),
        frame(chunk("")),  # nothing to say
        frame(chunk(None)),
        frame(chunk(1)),
        frame(b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,'
              b'"delta":{"content":"a","role":"assistant"},"finish_reason":null}]}'),  # two fields where one was
        frame(b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,'
              b'"delta":{"content":"a\xff"},"finish_reason":null}]}'),  # invalid UTF-8
        frame(b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,'
              b'"delta":{"content":"a\tb"},"finish_reason":null}]}'),  # a raw control character
        frame(b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,'
              b'"delta":{"content":"\\ud800"},"finish_reason":null}]}'),  # a lone surrogate
        frame(b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,'
              b'"delta":{"content":{"a":"b"}},"finish_reason":null}]}'),
        frame(b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,'
              b'"delta":{"content":"},"finish_reason":null}]}'),  # a lone quote
        frame(chunk("Hi"))[:-1],  # no blank line
        frame(chunk("Hi"))[:-2] + b"\r\n\r\n",
        b"data:" + frame(chunk("Hi"))[6:],
        b"event: x\n" + frame(chunk("Hi")),
        frame(orjson.dumps(chunk("Hi")).replace(b'"Hi"', b'"Hi"\r')),  # a CR ends the line there
        frame(orjson.dumps(chunk("Hi")).replace(b'"Hi"', b'\r"Hi"')),
    ],
    ids=["with its role", "another id", "empty", "null", "a number", "another field after it", "invalid UTF-8",
         "a control character", "a lone surrogate", "an object", "a lone quote", "no blank line", "CRLF",
         "no space", "an event name", "a CR after the string", "a CR before it"],
)  # fmt: skip
def test_a_frame_of_another_shape_is_not_read(data: bytes) -> None:
    assert read(taught(chunk("Hi")), data) == ("", 0)


@pytest.mark.parametrize("before", [b"", b": ping\n\n"], ids=["at the start", "after a comment"])
def test_a_frame_longer_than_the_limit_is_left_to_the_decoder(before: bytes) -> None:
    frames = taught(chunk("Hi"))
    data = before + frame(chunk("abc"))
    size = len(data) - len(before)
    assert frames.read_run(data, len(before), size) == ("abc", len(data))
    assert frames.read_run(data, len(before), size - 1) == ("", len(before))


@pytest.mark.parametrize("before", [b"", b": ping\n\n"], ids=["at the start", "after a comment"])
def test_a_frame_with_nothing_where_the_string_goes_or_cut_short_is_not_read(before: bytes) -> None:
    frames = taught(chunk("Hi"))
    whole = frame(chunk("abc"))
    string_at = whole.index(b'"abc"')
    hollow = whole[:string_at] + whole[string_at + 5 :]
    for data in (hollow, whole[:-1], whole[:-2], whole[: string_at + 2], whole[:string_at]):
        assert frames.read_run(before + data, len(before), NO_LIMIT) == ("", len(before)), data
    assert frames.read_run(before + whole + hollow, len(before), NO_LIMIT) == ("abc", len(before + whole))


# What may stand where a frame's string goes: one string (blanks around it allowed), or
# something a frame of the shape cannot hold, among them pieces that would parse as
# strings only together with the next one.
_GOOD_STRINGS = [b'"a"', b'"\\u00e9 \\"q\\""', b' \t"b"', b'"c" ', b'"\\ud83d\\ude00"', b'"' + b"w" * 3000 + b'"']
_BAD_STRINGS = [b'""', b"null", b"1", b'["a"]', b'{"a":"b"}', b'"a" "b"', b'"c","d"', b'"x\\"', b'y"', b'"a"]',
                b'"a"\r', b'\r"a"', b'"a"\n', b'\n"a"', b'"a\tb"', b'"\\ud800"', b'"\xff"', b"", b" "]  # fmt: skip


@given(
    strings=st.lists(st.sampled_from(_GOOD_STRINGS + _BAD_STRINGS), max_size=40),
    longest=st.sampled_from([NO_LIMIT, 400, 3100]),
    after=st.sampled_from([b"", b"data: [DONE]\n\n", frame(chunk("Hi"))[:30]]),
)
# Pieces that parse as four strings when joined, though two of them are none alone:
@example(strings=[b'"a"', b'"x\\"', b'y"', b'"c","d"'], longest=NO_LIMIT, after=b"")
# A line end after a string that parses (the frame is two lines):
@example(strings=[b'"a"', b'"b"\n', b'"c"'], longest=NO_LIMIT, after=b"")
@example(strings=[b'"a"', b'"b"\r', b'"c"'], longest=NO_LIMIT, after=b"")
# Nothing to say; two strings where one goes:
@example(strings=[b'"a"', b'""', b'"c"'], longest=NO_LIMIT, after=b"")
@example(strings=[b'"a"', b'"b","c"'], longest=NO_LIMIT, after=b"")
def test_a_run_is_read_up_to_its_first_frame_not_of_the_shape(strings: list[bytes], longest: int, after: bytes) -> None:
    """Read over and over from where the last read ended (as the upstream's reader does),
    the frames give the texts of those before the first that is not of the shape, whatever
    follows and however long the run (runs longer than a window are read in parts)."""
    frames = taught(chunk("Hi"))
    framed = [frame(orjson.dumps(chunk("Hi")).replace(b'"Hi"', string)) for string in strings]
    expected, expected_end = "", 0
    for string, whole in zip(strings, framed, strict=True):
        if string not in _GOOD_STRINGS or len(whole) > longest:
            break
        expected, expected_end = expected + orjson.loads(string), expected_end + len(whole)
    data = b"".join(framed) + after
    text, end = "", 0
    while True:
        more, end_now = frames.read_run(data, end, longest)
        if not more:
            assert end_now == end
            break
        text, end = text + more, end_now
    assert (text, end) == (expected, expected_end)


def test_a_frame_alone_is_read_wherever_it_begins() -> None:
    """Line ends before it (a CR among them) are not its own."""
    frames = taught(chunk("Hi"))
    before = frame(chunk("a")) + b'data: {"x": 1}\r\n\r\n'
    data = before + frame(chunk("b")) + b"data: [DONE]\n\n"
    assert frames.read_run(data, len(before), NO_LIMIT) == ("b", len(before + frame(chunk("b"))))


def test_a_run_whose_first_frame_is_longer_than_a_window_is_read_whole() -> None:
    frames = taught(chunk("Hi"))
    long_text = "x" * 20_000
    run = frame(chunk(long_text)) + frame(chunk("y"))
    assert frames.read_run(run + b"data: [DONE]\n\n", 0, NO_LIMIT) == (long_text + "y", len(run))


def test_a_long_run_is_read_in_parts_that_give_it_whole() -> None:
    frames = taught(chunk("Hi"))
    data = b"".join(frame(chunk(f"w{n} ")) for n in range(400))
    parts, end = [], 0
    while end < len(data):
        text, end = frames.read_run(data, end, NO_LIMIT)
        assert text
        parts.append(text)
    assert len(parts) > 1 and "".join(parts) == "".join(f"w{n} " for n in range(400))


def test_a_string_after_the_key_with_spaces_is_learned_with_them() -> None:
    data = b'{"choices": [{"index": 0, "delta": {"content":  "Hi"}}]}'
    frames = taught(data)
    assert read(frames, frame(data.replace(b'"Hi"', b'"Yo \\"x\\""'))) == ('Yo "x"', len(frame(data)) + 6)


@pytest.mark.parametrize(
    "data",
    [
        orjson.dumps({**chunk("Hi"), "usage": {"total_tokens": 1}}),  # not plain
        b'{"choices":[{"index":0,"delta":{"content":"Hi"}}],\n"id":"x"}',  # more than one line
        b'{"meta":{"content":"Hi"},"choices":[{"index":0,"delta":{"content":"Hi"}}]}',  # the key twice
        # the delta's key spelled with an escape, and another "content" holding the same text:
        b'{"meta":{"content":"Hi"},"choices":[{"index":0,"delta":{"\\u0063ontent":"Hi"}}]}',
        b'{"choices":[{"index":0,"delta":{"content":"Hi"}}],"x":{"content":"Hi"}}',  # the key twice, after
        b'{"choices":[{"index":0,"delta":{"\\u0063ontent":"Hi"}}]}',  # no key as the bytes spell it
    ],
    ids=["not plain", "two lines", "the key twice", "the key escaped, a look-alike beside it", "the key twice, after",
         "the key escaped"],
)  # fmt: skip
def test_what_teaches_no_shape(data: bytes) -> None:
    frames = taught(data)
    assert not frames.learned
    assert read(frames, frame(data)) == ("", 0)


def test_a_text_spelled_with_an_escape_teaches_the_shape_around_it() -> None:
    data = b'{"choices":[{"index":0,"delta":{"content":"H\\u0069"}}]}'
    frames = taught(data)
    assert frames.learned
    assert read(frames, frame(data.replace(b"H\\u0069", b"Yo"))) == ("Yo", len(frame(data)) - 5)


def test_the_text_found_must_be_the_content_parsed() -> None:
    """Duplicate keys: the parse keeps the last, and the bytes hold another text first."""
    data = b'{"choices":[{"index":0,"delta":{"content":"Hi","\\u0063ontent":"Yo"}}]}'
    assert not taught(data).learned


def test_a_new_shape_replaces_the_old_and_lessons_are_bounded() -> None:
    frames = taught(chunk("Hi"))
    for n in range(2, 6):
        made = {**chunk("Hi"), "id": f"chatcmpl-{n}"}
        data = orjson.dumps(made)
        frames.learn(data.decode(), made)
        expected = "Yo" if n <= 4 else ""  # four shapes at most
        assert read(frames, frame({**chunk("Yo"), "id": f"chatcmpl-{n}"}))[0] == expected
    assert read(frames, frame({**chunk("Yo"), "id": "chatcmpl-4"}))[0] == "Yo"


def test_a_frame_of_the_known_shape_teaches_nothing_new() -> None:
    frames = taught(chunk("Hi"))
    for _ in range(6):  # frames split over reads come through the decoder: not a lesson each
        made = chunk("Hi")
        frames.learn(orjson.dumps(made).decode(), made)
    made = {**chunk("Hi"), "id": "other"}
    frames.learn(orjson.dumps(made).decode(), made)
    assert read(frames, frame({**chunk("Yo"), "id": "other"}))[0] == "Yo"


# ------------------------------------------------------------ PlainChunks


def test_plain_chunks_give_back_every_chunk_parsed() -> None:
    made = [chunk("a"), chunk("b", role="assistant")]
    chunks = PlainChunks("ab", b"".join(frame(m) for m in made))
    assert chunks.objects() == made
    assert (chunks.text, repr(chunks)) == ("ab", "PlainChunks('ab')")


def test_a_whole_answer_holds_the_object_that_came_and_shows_it() -> None:
    answer: JSON = {"id": "chatcmpl-1", "object": "chat.completion", "choices": []}
    whole = WholeAnswer(answer)
    assert whole.answer is answer
    assert repr(whole) == f"WholeAnswer({answer!r})"
