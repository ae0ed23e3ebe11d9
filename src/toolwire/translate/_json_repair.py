"""Valid JSON for tool arguments a model got slightly wrong."""

from __future__ import annotations

import ast
import json
from typing import Any

import orjson


def json_or_none(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


_MAX_REPAIR_LENGTH = 100_000


def repair_json(text: str) -> str | None:
    """Valid JSON for arguments a model got slightly wrong, or None.

    Tried in order: raw control characters in strings, a markdown fence or prose around
    the object, trailing commas, unclosed strings and brackets, Python literal syntax.
    """
    if len(text) > _MAX_REPAIR_LENGTH:
        return None
    start, end = text.find("{"), text.rfind("}")
    body = text[start : end + 1] if 0 <= start < end else text[start:] if start >= 0 else text
    for candidate in (text, body):
        for attempt in (candidate, _without_trailing_commas(candidate), _close_json(candidate)):
            try:
                value = json.loads(attempt, strict=False)
            except (ValueError, RecursionError):
                continue
            return _dumps(value)
    try:
        value = ast.literal_eval(body.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return _dumps(value) if isinstance(value, dict | list) else None


def _dumps(value: Any) -> str | None:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return None


class _Strings:
    """Where a scan of JSON text, one character at a time, stands: in a string or not,
    and just after a backslash in one."""

    __slots__ = ("escaped", "inside")

    def __init__(self) -> None:
        self.inside = self.escaped = False

    def outside(self, char: str) -> bool:
        """Take the next ``char``: whether it stands outside every string (a quote is
        part of its string)."""
        if self.inside:
            if self.escaped:
                self.escaped = False
            elif char == "\\":
                self.escaped = True
            elif char == '"':
                self.inside = False
            return False
        if char == '"':
            self.inside = True
            return False
        return True


def _close_json(text: str) -> str:
    """``text`` with an unclosed string, a dangling comma or colon, and open brackets closed."""
    closers: list[str] = []
    strings = _Strings()
    for char in text:
        if not strings.outside(char):
            continue
        if char in "{[":
            closers.append("}" if char == "{" else "]")
        elif char in "}]" and closers and closers[-1] == char:
            closers.pop()
    if strings.inside:
        text = (text[:-1] if strings.escaped else text) + '"'
    text = text.rstrip()
    if text.endswith(","):
        text = text[:-1]
    elif text.endswith(":"):
        text += "null"
    return _without_trailing_commas(text + "".join(reversed(closers)))


def _without_trailing_commas(text: str) -> str:
    """``text`` without the commas that end an object or array (``{"a": 1,}``); a comma
    inside a string is part of its value and stays."""
    kept: list[str] = []
    strings = _Strings()
    length = len(text)
    for index, char in enumerate(text):
        if strings.outside(char) and char == ",":
            after = index + 1
            while after < length and text[after].isspace():
                after += 1
            if after < length and text[after] in "}]":
                continue
        kept.append(char)
    return "".join(kept)
