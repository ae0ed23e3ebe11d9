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


def _close_json(text: str) -> str:
    """``text`` with an unclosed string, a dangling comma or colon, and open brackets closed."""
    closers: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            closers.append("}" if char == "{" else "]")
        elif char in "}]" and closers and closers[-1] == char:
            closers.pop()
    if in_string:
        text = (text[:-1] if escaped else text) + '"'
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
    in_string = escaped = False
    length = len(text)
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == ",":
            after = index + 1
            while after < length and text[after].isspace():
                after += 1
            if after < length and text[after] in "}]":
                continue
        kept.append(char)
    return "".join(kept)
