"""Valid JSON for tool arguments a model got slightly wrong."""

from __future__ import annotations

import ast
import json
import re
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


# A JSON string, quotes included, read from its opening quote: a backslash escapes the
# next character; without its closing quote it runs to the end of the text, where a
# backslash may be left dangling. What the repairs look for outside strings is matched
# beside it, so that a scan never looks inside one.
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*(?:(?P<closed>")|(?P<dangling>\\)?\Z)'
_STRING_OR_BRACKET = re.compile(rf"{_STRING}|[\[\]{{}}]", re.DOTALL)
_STRING_OR_TRAILING_COMMA = re.compile(rf"{_STRING}|(?P<comma>,)(?=\s*[}}\]])", re.DOTALL)


def _close_json(text: str) -> str:
    """``text`` with an unclosed string, a dangling comma or colon, and open brackets closed."""
    closers: list[str] = []
    unclosed: re.Match[str] | None = None  # a string without its closing quote ends the text
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token[0] == '"':
            if match["closed"] is None:
                unclosed = match
        elif token in "{[":
            closers.append("}" if token == "{" else "]")
        elif closers and closers[-1] == token:
            closers.pop()
    if unclosed is not None:
        text = (text[:-1] if unclosed["dangling"] else text) + '"'
    text = text.rstrip()
    if text.endswith(","):
        text = text[:-1]
    elif text.endswith(":"):
        text += "null"
    return _without_trailing_commas(text + "".join(reversed(closers)))


def _without_trailing_commas(text: str) -> str:
    """``text`` without the commas that end an object or array (``{"a": 1,}``); a comma
    inside a string is part of its value and stays."""
    return _STRING_OR_TRAILING_COMMA.sub(lambda match: "" if match["comma"] else match.group(), text)
