"""How deep a request body may nest, and the check that enforces it.

Everything toolwire sends on is serialized with orjson, which refuses values nested
deeper than 254 levels, and toolwire nests the client's values a few levels deeper (tool
parameters inside a Chat function, tools echoed inside each Response object). A body is
therefore checked by serializing it ``HEADROOM`` levels down: about 20 us for a 50 KB
Codex body, far cheaper than walking it in Python.
"""

from __future__ import annotations

from typing import Any

import orjson

from toolwire.errors import RequestError

_ORJSON_DEPTH_LIMIT = 254
HEADROOM = 32
"""Levels toolwire may wrap around the client's values: tool parameters nested in a Chat
function, tools and metadata echoed inside every Response object and event."""
MAX_JSON_DEPTH = _ORJSON_DEPTH_LIMIT - HEADROOM


def check_depth(data: Any) -> None:
    """Reject nesting deeper than ``MAX_JSON_DEPTH`` with a clear 400, up front.

    Raises ``RequestError`` (code ``too_deep``), or, for a value that is no JSON at all
    (a body given as a dict may hold one), a ``RequestError`` saying so.
    """
    try:
        json_at_depth(data, HEADROOM)
    except orjson.JSONEncodeError as exc:
        raise depth_error(exc) from exc


def depth_error(exc: orjson.JSONEncodeError) -> RequestError:
    """The ``RequestError`` for a body whose serialization failed with ``exc``."""
    if "recursion" not in str(exc).lower():
        return RequestError(f"The request body cannot be represented as JSON: {exc}.")
    return RequestError(f"The request body is nested deeper than {MAX_JSON_DEPTH} levels.", code="too_deep")


def json_at_depth(value: Any, depth: int) -> bytes:
    """``value`` serialized inside ``depth`` lists: its JSON, wrapped in ``depth`` brackets.

    orjson checks the depth of each value it meets, so this raises ``JSONEncodeError``
    exactly when ``value`` is too deep to serialize ``depth`` levels down in a body, or
    is no JSON.
    """
    wrapped: Any = value
    for _ in range(depth):
        wrapped = [wrapped]
    return orjson.dumps(wrapped)
