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


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
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
        for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate), _close_json(candidate)):
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
    return _TRAILING_COMMA.sub(r"\1", text + "".join(reversed(closers)))
