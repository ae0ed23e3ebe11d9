"""Chat chunks that say nothing but the answer's next text, read from their bytes.

Nearly every chunk of a streamed answer is the same object with a different piece of
text: ``{"id":...,"choices":[{"index":0,"delta":{"content":"..."},...}]}``. Within one
stream a server writes that object with the same bytes every time, but for the text's
JSON string. ``PlainContentFrames`` learns those bytes from one such chunk that was
decoded and parsed in full (the SSE frame before and after the string), and from then
on reads a frame of the same shape with no SSE decoding and no JSON parsing but that of
the string itself. Such chunks that come in one read, one after another, are handed on
together as ``PlainChunks``: their text is one piece of the answer.

Reading a frame this way gives exactly what the full path would, because:

* the learned bytes hold the key ``"content":`` exactly once, and a parse of them with
  another string in its place gives a plain chunk whose content is that string (checked
  when learning: the string found really is the delta's content, whatever else the
  chunk holds or however it spells its keys);
* a frame is read only if it is those bytes around one whole JSON string, blanks before
  it allowed (``orjson`` parses it alone, with nothing after it), so the JSON around it
  tokenizes as it did;
* the frame is ``data: `` and one line, ended by a blank line, with no CR or LF inside,
  and the SSE decoder is between events when it comes (``SSEDecoder.idle``): the
  decoder would have given exactly the frame's line as the event's data.

Anything else (another shape, an escape the string cannot hold, invalid UTF-8, a frame
split across reads) takes the full path, which stays the reference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["PlainChunks", "PlainContentFrames", "StreamItem", "WholeAnswer", "plain_content"]

JSON = dict[str, Any]

_CONTENT_KEY = b'"content":'
_STRING_VALUE = re.compile(rb'[ \t]*"(?:[^"\\]|\\.)*"', re.DOTALL)
"""A JSON string and the blanks before it."""
_PROBE = "\x00toolwire-probe"
_PROBE_LITERAL = orjson.dumps(_PROBE)
_DATA_PREFIX = b"data: "
_EVENT_END = b"\n\n"
_LF = b"\n"
_CR = b"\r"
_WINDOW = 16 * 1024
"""How far a run of frames is read at once: reading a run splits that much of the read,
so a stream whose runs are short is not split over and over to the end of each read."""
_MAX_LESSONS = 4
"""Shapes one stream may teach: a server that changes its chunks' bytes every time (an
ever-new field) stops costing a lesson per chunk."""


def plain_content(chunk: JSON) -> str | None:
    """The content of a chunk that says nothing but that, else None (read it in full).

    Plain: one choice (index 0, no finish reason), no usage, no error, and a delta whose
    ``content`` is a non-empty string and whose other fields are its ``role`` or null.
    """
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or chunk.get("usage") is not None:
        return None
    if "error" in chunk or chunk.get("object") == "error":
        return None
    choice = choices[0]
    if type(choice) is not dict or choice.get("index", 0) != 0 or choice.get("finish_reason") is not None:
        return None
    delta = choice.get("delta")
    if type(delta) is not dict:
        return None
    content = delta.get("content")
    if type(content) is not str or not content:
        return None
    for key, value in delta.items():
        if value is not None and key != "content" and key != "role":
            return None
    return content


class PlainChunks:
    """Plain chunks that came in one read, one after another, read from their frames:
    ``text`` is their contents joined, ``frames`` their bytes, and ``objects()`` each
    chunk parsed (to read them in full after all, or to record the upstream's traffic)."""

    __slots__ = ("frames", "text")

    def __init__(self, text: str, frames: bytes) -> None:
        self.text = text
        self.frames = frames

    def objects(self) -> list[JSON]:
        return [orjson.loads(frame[len(_DATA_PREFIX) :]) for frame in self.frames.split(_EVENT_END)[:-1]]

    def __repr__(self) -> str:
        return f"PlainChunks({self.text!r})"


class WholeAnswer:
    """A streamed request's answer that came whole, as one JSON object (a Chat completion,
    a Response, a Message), not as a stream: some servers and proxies ignore ``stream``.
    A translator reads it as the stream objects that would have carried it."""

    __slots__ = ("answer",)

    def __init__(self, answer: JSON) -> None:
        self.answer = answer

    def __repr__(self) -> str:
        return f"WholeAnswer({self.answer!r})"


StreamItem = JSON | PlainChunks | WholeAnswer
"""One object of an upstream's stream, as an answer translator is fed it: parsed, plain
Chat chunks read from their bytes, or the whole answer of a server that did not stream."""


@dataclass(frozen=True, slots=True)
class _Shape:
    """A frame of the shape is ``head``, the content's JSON string, ``tail``; an event's
    decoded data begins with ``data_head`` and ends with ``data_tail``."""

    head: bytes
    tail: bytes
    data_head: str
    data_tail: str


class PlainContentFrames:
    """One stream's shape of plain chunks: ``learn`` it from a parsed chunk, read runs of
    frames of that shape (``read_run``)."""

    __slots__ = ("_lessons", "_shape")

    def __init__(self) -> None:
        self._shape: _Shape | None = None
        self._lessons = 0

    @property
    def learned(self) -> bool:
        return self._shape is not None

    def read_run(self, data: bytes, start: int, longest: int) -> tuple[str, int]:
        """The contents, joined, of the frames of the learned shape that follow each other
        in ``data`` from ``start`` (each at most ``longest`` bytes), and where they end
        (``""`` and ``start``: none).

        A frame followed by another of the shape begins a run: the frames within the
        next ``_WINDOW`` bytes are read at once (``_whole_run``). A frame alone, and a run
        that cannot be read that way (a frame longer than that, a string that does not
        parse alone), are read frame by frame, which stops at the first frame that is not
        of the shape."""
        shape = self._shape
        if shape is None or not data.startswith(shape.head, start):
            return "", start
        # The first LF: no JSON string holds one, so in a frame of the shape it is the
        # first of the two that end it (the tail's). Found as one byte, it is found fast.
        end = data.find(_LF, start) + 2
        if not data.startswith(shape.head, end):  # a frame alone (no LF: end is 1)
            text = _frame_text(data, start, end, longest, shape)
            return (text, end) if text else ("", start)
        return _whole_run(data, start, min(longest, _WINDOW), shape) or _frame_by_frame(data, start, longest, shape)

    def learn(self, data: str, chunk: JSON) -> None:
        """Take the shape of ``chunk``, parsed from ``data``, if it is plain and its bytes
        can be read around its content's string; else keep the shape learned before.
        After ``_MAX_LESSONS`` shapes, nothing more is learned. (A decoded event's data
        holds no CR: the decoder reads one as a line end.)"""
        shape = self._shape
        if self._lessons >= _MAX_LESSONS or (
            shape is not None and data.startswith(shape.data_head) and data.endswith(shape.data_tail)
        ):
            return  # (a frame of the learned shape that came split over reads teaches nothing new)
        content = plain_content(chunk)
        if content is None or "\n" in data:
            return
        before, key, rest = data.encode().partition(_CONTENT_KEY)
        found = _STRING_VALUE.match(rest)
        if found is None or _CONTENT_KEY in rest:
            return  # (no key: nothing was found after it)
        head, tail = before + key, rest[found.end() :]
        try:
            if orjson.loads(found.group()) != content:
                return
            probe = orjson.loads(head + _PROBE_LITERAL + tail)
        except orjson.JSONDecodeError:
            return
        if type(probe) is not dict or plain_content(probe) != _PROBE:
            return
        self._shape = _Shape(_DATA_PREFIX + head, tail + _EVENT_END, head.decode(), tail.decode())
        self._lessons += 1


def _whole_run(data: bytes, start: int, window: int, shape: _Shape) -> tuple[str, int] | None:
    """The run of frames of ``shape`` that begins at ``start`` and ends within ``window``
    bytes of it, read with one split and one parse: the contents, where the run ends; None
    if one of them is not read this way (``_frame_by_frame`` says which).

    The pieces between the tails that begin with the head are the run's frames. Their
    strings are parsed as one JSON array, each piece one element, joined by a comma and a
    TAB: a raw TAB cannot be inside a JSON string, so no string spans two pieces, and an
    array of exactly as many strings as pieces means that each piece is one string (blanks
    around it allowed, as ``orjson`` allows them around a value alone)."""
    head, tail = shape.head, shape.tail
    pieces = data[start : start + window].split(tail)
    pieces.pop()  # what follows the last tail: not a whole frame
    head_size = len(head)
    strings: list[bytes] = []
    for piece in pieces:
        if not piece.startswith(head):
            break
        strings.append(piece[head_size:])
    joined = b",\t".join(strings)
    if not strings or _LF in joined or _CR in joined:
        return None  # (a line end in a frame: that frame is not one line)
    try:
        texts = orjson.loads(b"[" + joined + b"]")
    except orjson.JSONDecodeError:
        return None
    if len(texts) != len(strings) or "" in texts:
        return None
    try:
        text = "".join(texts)
    except TypeError:
        return None  # (not a string: a number, null, an object)
    return text, start + len(strings) * (head_size + len(tail)) + sum(map(len, strings))


def _frame_by_frame(data: bytes, start: int, longest: int, shape: _Shape) -> tuple[str, int]:
    """``PlainContentFrames.read_run``, one frame after another."""
    texts: list[str] = []
    head, find = shape.head, data.find
    while data.startswith(head, start):
        end = find(_LF, start) + 2
        text = _frame_text(data, start, end, longest, shape)
        if not text:
            break
        texts.append(text)
        start = end
    return "".join(texts), start


def _frame_text(data: bytes, start: int, end: int, longest: int, shape: _Shape) -> str:
    """The text of the frame that begins with the head at ``start`` and ends at ``end``
    (after the first LF after ``start``), or ``""`` if it is not a frame of the shape."""
    string_start, string_end = start + len(shape.head), end - len(shape.tail)
    if string_end <= string_start or end - start > longest or not data.startswith(shape.tail, string_end):
        return ""  # (nothing where the string goes; too long; no LF after start, or not the tail's)
    if data.find(_CR, string_start, string_end) >= 0:
        return ""  # a CR ends a line too: the frame is not one line
    try:
        text = orjson.loads(data[string_start:string_end])
    except orjson.JSONDecodeError:
        return ""  # invalid UTF-8, a control character, more than one value
    return text if type(text) is str else ""  # (not a number, null, an object)
