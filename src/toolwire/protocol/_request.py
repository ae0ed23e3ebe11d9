"""The body of ``POST /v1/responses``, decoded once at the edge."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import Field, ValidationError

from toolwire.errors import RequestError

from ._base import WireModel
from ._errors import request_error_from
from ._items import Item
from ._tools import ToolSpec


class ResponsesRequest(WireModel):
    """A Responses API request. Fields not listed here are kept and echoed, never lost."""

    model: str = Field(min_length=1)
    input: str | list[Item] = []
    instructions: str | None = None
    tools: list[ToolSpec] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    text: dict[str, Any] | None = None
    reasoning: dict[str, Any] | None = None
    stream: bool | None = None
    store: bool | None = None
    previous_response_id: str | None = None
    metadata: dict[str, Any] | None = None
    include: list[str] | None = None
    user: str | None = None

    def input_items(self) -> list[Item]:
        """``input`` as items; a plain string input is one user message."""
        if isinstance(self.input, str):
            from ._items import MessageItem

            return [MessageItem(role="user", content=self.input)]
        return self.input


_ORJSON_DEPTH_LIMIT = 254
# Headroom for what toolwire wraps around the client's values: tool parameters nested in
# a Chat function, tools and metadata echoed inside every Response object and event.
_HEADROOM = 32
MAX_JSON_DEPTH = _ORJSON_DEPTH_LIMIT - _HEADROOM


def parse_request(body: bytes | str | dict[str, Any]) -> ResponsesRequest:
    """Decode and validate a request body.

    Raises ``RequestError`` for invalid UTF-8, invalid JSON, a non-object body, nesting
    deeper than ``MAX_JSON_DEPTH`` or any invalid field (its path in ``param``).
    """
    if isinstance(body, dict):
        data: Any = body
    else:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise _not_json(body, exc) from exc
    if not isinstance(data, dict):
        raise RequestError("The request body must be a JSON object.", code="invalid_json")
    _check_depth(data)
    try:
        return ResponsesRequest.model_validate(data)
    except ValidationError as exc:
        raise request_error_from(exc) from exc


def _not_json(body: bytes | str, exc: orjson.JSONDecodeError) -> RequestError:
    """Say where the body stops being UTF-8 or JSON."""
    if isinstance(body, bytes):
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as bad:
            return RequestError(
                f"The request body is not valid UTF-8: byte {bad.start} (0x{body[bad.start]:02x}) "
                f"cannot start or continue a character.",
                code="invalid_utf8",
            )
    return RequestError(f"The request body is not valid JSON: {exc}.", code="invalid_json")


def _check_depth(data: Any) -> None:
    """Reject nesting deeper than ``MAX_JSON_DEPTH``.

    Everything toolwire sends on is serialized with orjson, which refuses values nested
    deeper than 254 levels, and toolwire nests the client's values a few levels deeper
    (tool parameters inside a Chat function, tools echoed inside each Response object).
    Serializing the body wrapped in ``_HEADROOM`` extra levels (about 20 us for a 50 KB
    Codex body, far cheaper than walking it in Python) rejects up front, with a clear
    400, anything that would fail later.
    """
    wrapped: Any = data
    for _ in range(_HEADROOM):
        wrapped = [wrapped]
    try:
        orjson.dumps(wrapped)
    except orjson.JSONEncodeError as exc:
        if "recursion" not in str(exc).lower():
            raise RequestError(f"The request body cannot be represented as JSON: {exc}.") from exc
        raise RequestError(
            f"The request body is nested deeper than {MAX_JSON_DEPTH} levels.", code="too_deep"
        ) from exc
