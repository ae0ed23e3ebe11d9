"""What every family's parser of calls written into text reads with (``_text_call_formats``).

A parser reads the text after one opening marker and answers with a verdict:

* ``Pending.MORE``: not finished, and the text so far could still become a call;
* ``Pending.NOT_A_CALL``: it cannot be one (wrong syntax, a tool that was not offered,
  arguments that do not parse): the marker is ordinary text;
* ``Found``: the whole block, its calls (``TextCall``), and its length.

A verdict depends only on the text, and once it is not ``MORE`` it stays the same
however much text follows: the recogniser (``text_calls.py``) may ask at any time and
gets the same answer. ``at_end`` says no more text will come; only then are the
forgiving endings accepted (a block whose calls are complete but whose closing marker
never came). At the end a parser may still answer ``MORE`` (a block cut short): the
recogniser then reads the block as text, as it reads ``NOT_A_CALL``.

Here too: the ``Reader`` every parser is given (the offered tools, the families read, and
how far each JSON value of the block has been scanned), an ``Opener`` (a marker and its
parser), the small readers the parsers share (markers, space, JSON values, a call whose
name is offered and whose arguments read as an object), and ``converted``: a raw
parameter value (Qwen3-Coder, GLM) as the tool's JSON schema declares it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

import orjson

JSON = dict[str, Any]
Offered = Mapping[str, JSON]
"""Every name a model may call a tool by -> the JSON schema of that tool's parameters."""


@dataclass(frozen=True, slots=True)
class TextCall:
    """One call read from text: the name as written, arguments as a JSON object text."""

    name: str
    arguments: str
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Found:
    """A complete block: its calls, and its length after the opening marker."""

    calls: tuple[TextCall, ...]
    end: int
    family: str


class Pending(Enum):
    MORE = "more"
    NOT_A_CALL = "not a call"


Verdict = Found | Pending
MORE, NOT_A_CALL = Pending.MORE, Pending.NOT_A_CALL


class Reader:
    """What every parser needs: the offered tools, the families it may recognise, and
    (for the block being read, whose text only ever grows) how far each JSON value in
    it has been scanned, so that a long block is not scanned again from its start."""

    __slots__ = ("_scans", "families", "offered")

    def __init__(self, offered: Offered, families: frozenset[str]) -> None:
        self.offered = offered
        self.families = families
        self._scans: dict[int, _JsonScan] = {}

    def could_name(self, head: str) -> bool:
        """Whether ``head`` is the start of an offered tool's name."""
        return any(name.startswith(head) for name in self.offered)

    def next_block(self) -> None:
        """The block read next is another one: forget the scans."""
        self._scans.clear()

    def json_end(self, text: str, start: int) -> int | None:
        """Where the JSON object or array opening at ``text[start]`` ends.

        None while it is unfinished; -1 when its brackets do not match. Only brackets
        and strings are read: whether the value is valid JSON is decided once it ends.
        """
        scan = self._scans.get(start)
        if scan is None:
            scan = self._scans[start] = _JsonScan(start)
        return scan.end(text)


Parser = Callable[[str, Reader, bool], Verdict]


@dataclass(frozen=True, slots=True)
class Opener:
    """A marker that opens a block, the families that write it, and its parser.

    ``endings``: the block can be complete only once one of these has arrived (the
    parser may still find it incomplete), so a long block need not be re-read for text
    that holds none of them.
    """

    marker: str
    families: frozenset[str]
    parse: Parser
    endings: tuple[str, ...]


# ---------------------------------------------------------------- small readers

_Start = Literal["yes", "partial", "no"]
_STRUCTURE = re.compile(r'[{}\[\]"]')
_SPACE = re.compile(r"\s*")


def skip_space(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def starts(text: str, pos: int, marker: str) -> _Start:
    """Whether ``marker`` is at ``pos``: ``partial`` when the text ends inside it."""
    if text.startswith(marker, pos):
        return "yes"
    if len(text) - pos < len(marker) and marker.startswith(text[pos:]):
        return "partial"
    return "no"


_CLOSING = {"}": "{", "]": "["}


class _JsonScan:
    """The brackets and strings of one JSON value, read as far as its text has come."""

    __slots__ = ("_pos", "_stack", "_string", "_verdict")

    def __init__(self, start: int) -> None:
        self._pos = start  # read up to here
        self._stack: list[str] = []
        self._string: int | None = None  # where the open string's text starts
        self._verdict: int | None = None

    def end(self, text: str) -> int | None:
        if self._verdict is not None:
            return self._verdict
        pos = self._pos
        while True:
            if self._string is not None:
                string_end = self._string_end(text, pos)
                if string_end is None:
                    self._pos = len(text)
                    return None
                pos, self._string = string_end, None
            match = _STRUCTURE.search(text, pos)
            if match is None:
                self._pos = len(text)
                return None
            char, pos = match.group(), match.end()
            if char == '"':
                self._string = pos
            elif char in "{[":
                self._stack.append(char)
            elif not self._stack or self._stack.pop() != _CLOSING[char]:
                self._verdict = -1
                return -1
            elif not self._stack:
                self._verdict = pos
                return pos

    def _string_end(self, text: str, pos: int) -> int | None:
        """The end of the open string, its closing quote searched from ``pos``."""
        assert self._string is not None
        while True:
            quote = text.find('"', pos)
            if quote < 0:
                return None
            escaped = quote
            while escaped > self._string and text[escaped - 1] == "\\":
                escaped -= 1
            if (quote - escaped) % 2 == 0:
                return quote + 1
            pos = quote + 1


def json_value(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return NOT_A_CALL


def _arguments_text(value: Any) -> str | None:
    """Arguments given as an object, as a string holding one, or not at all -> object text."""
    if value is None:
        return "{}"
    if isinstance(value, str):
        value = json_value(value) if value.strip() else {}
    if isinstance(value, dict):
        return orjson.dumps(value).decode()
    return None


def text_call(reader: Reader, name: Any, arguments: Any, call_id: Any = None) -> TextCall | None:
    """The call if ``name`` is an offered tool and ``arguments`` read as an object."""
    if not isinstance(name, str) or name not in reader.offered:
        return None
    text = _arguments_text(arguments)
    if text is None:
        return None
    return TextCall(name, text, call_id if isinstance(call_id, str) and call_id else None)


def call_from_json(reader: Reader, name: str, text: str, call_id: str | None = None) -> TextCall | None:
    """The call if ``name`` is an offered tool and ``text`` is a JSON object."""
    value = json_value(text.strip())
    return text_call(reader, name, value, call_id) if isinstance(value, dict) else None


# ---------------------------------------------------------------- raw values by schema


def _declared_types(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    types: set[str] = set()
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or []:
            types |= _declared_types(option)
    return types


def _fits(value: Any, types: set[str]) -> bool:
    kinds = {  # no "boolean": converted took true and false, the only JSON booleans, already
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "null": value is None,
    }
    return any(kinds.get(t, False) for t in types)


def converted(raw: str, schema: Any) -> Any:
    """A raw parameter value as the parameter's schema declares it.

    A string parameter, or one the schema does not describe, keeps the text. Another
    type is read as JSON (``true``/``false`` in any case for a boolean); a value that
    does not read as that type stays text.
    """
    types = _declared_types(schema)
    if not types or "string" in types:
        return raw
    text = raw.strip()
    if "boolean" in types and text.lower() in ("true", "false"):
        return text.lower() == "true"
    value = json_value(text)
    return value if value is not NOT_A_CALL and _fits(value, types) else raw


def property_schema(parameters: JSON, key: str) -> Any:
    properties = parameters.get("properties")
    return properties.get(key) if isinstance(properties, dict) else None
