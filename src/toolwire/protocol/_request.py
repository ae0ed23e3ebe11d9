"""The body of ``POST /v1/responses``, decoded once at the edge."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from toolwire.errors import RequestError

from ._base import WireModel
from ._errors import request_error_from
from ._items import Item
from ._tools import ToolSpec


class ResponsesRequest(WireModel):
    """A Responses API request. Fields not listed here are kept and echoed, never lost."""

    model: str
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


MAX_JSON_DEPTH = 128


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
            raise RequestError(f"The request body is not valid JSON: {exc}.", code="invalid_json") from exc
    if not isinstance(data, dict):
        raise RequestError("The request body must be a JSON object.", code="invalid_json")
    _check_depth(data)
    try:
        return ResponsesRequest.model_validate(data)
    except ValidationError as exc:
        raise request_error_from(exc) from exc


def _check_depth(data: Any) -> None:
    """Reject absurdly deep nesting iteratively (no recursion limit to hit)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise RequestError(
                f"The request body is nested deeper than {MAX_JSON_DEPTH} levels.", code="too_deep"
            )
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values() if isinstance(v, dict | list))
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value if isinstance(v, dict | list))
