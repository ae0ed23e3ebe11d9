"""The body of ``POST /v1/responses``, decoded once at the edge."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import Field, PrivateAttr, ValidationError

from toolwire.errors import RequestError

from ._base import WireModel
from ._depth import MAX_JSON_DEPTH, check_depth, depth_error
from ._errors import request_error_from
from ._history import KNOWN_HISTORIES, HistoryLink
from ._items import Item
from ._tool_cache import BodyToolLists
from ._tools import ToolSpec

__all__ = ["MAX_JSON_DEPTH", "ResponsesRequest", "parse_request"]


class ResponsesRequest(WireModel):
    """A Responses API request. Fields not listed here are kept and echoed, never lost."""

    model: str = Field(min_length=1)
    input: str | list[Item] = []
    instructions: str | None = None
    tools: list[ToolSpec] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)  # no backend makes an answer of no tokens
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

    _history: HistoryLink | None = PrivateAttr(default=None)

    def history(self) -> HistoryLink | None:
        """How this request's items continue a known history (``_history``), if they do:
        None once ``input`` is not the list it was parsed with."""
        # Read from pydantic's dict of private values: ``self._history`` goes through the
        # model's ``__getattr__`` (1.5 us against 0.05), and a request asks several times.
        link: HistoryLink | None = (self.__pydantic_private__ or {}).get("_history")
        return link if link is not None and link.input is self.input else None

    def link_history(self, link: HistoryLink | None) -> None:
        self._history = link

    def __eq__(self, other: object) -> bool:
        """Requests are equal when their fields are; how they were parsed does not count."""
        if not isinstance(other, ResponsesRequest):
            return NotImplemented
        return self.__dict__ == other.__dict__ and (self.__pydantic_extra__ or {}) == (other.__pydantic_extra__ or {})

    def input_holds(self, *kinds: type[Item]) -> bool:
        """Whether ``input`` holds an item of one of ``kinds`` (exactly that class).

        The items of a known history are looked at once: the answer for them is kept on
        the history (``KnownHistory.derived``), so a long conversation costs each turn a
        look at its new items only."""
        items = self.input_items()
        link = self.history()
        if link is None:
            return any(type(item) in kinds for item in items)
        key = ("input holds", kinds)
        start = 0
        known = link.continues.derived.get(key) if link.continues is not None else None
        if known is not None:
            start = link.known
        holds = known is True or any(type(items[index]) in kinds for index in range(start, len(items)))
        if link.own is not None:
            link.own.derived[key] = holds
        return holds

    def input_items(self) -> list[Item]:
        """``input`` as items; a plain string input is one user message."""
        if isinstance(self.input, str):
            from ._items import MessageItem

            return [MessageItem(role="user", content=self.input)]
        return self.input


def parse_request(body: bytes | str | dict[str, Any]) -> ResponsesRequest:
    """Decode and validate a request body.

    Raises ``RequestError`` for invalid UTF-8, invalid JSON, a non-object body, nesting
    deeper than ``MAX_JSON_DEPTH`` or any invalid field (its path in ``param``).

    A tool list seen before is not validated again: its specs are shared with the
    earlier requests that declared it (``_tool_cache``; bodies given as JSON only). A body
    that resends a history seen before is only decoded and validated past it
    (``_history``; bodies given as bytes).
    """
    if isinstance(body, bytes):
        continued = KNOWN_HISTORIES.parse_continued(body, _validated)
        if continued is not None:
            return continued
    if isinstance(body, dict):
        data: Any = body
    else:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise _not_json(body, exc) from exc
    if not isinstance(data, dict):
        raise RequestError("The request body must be a JSON object.", code="invalid_json")
    if data is body:
        check_depth(data)
        return _model(data)
    request = _validated(data)
    if isinstance(body, bytes):
        KNOWN_HISTORIES.learn(body, data, request)
    return request


def _validated(data: dict[str, Any]) -> ResponsesRequest:
    """A body decoded from JSON as a request: its depth checked, the tool lists seen before
    reused (then the new ones kept), validated."""
    tool_lists = BodyToolLists.find(data)
    if tool_lists is None:
        check_depth(data)
    else:
        try:
            data = tool_lists.checked_and_reused(data)
        except orjson.JSONEncodeError as exc:
            check_depth(data)  # the error the whole body gives: a part failed, so it fails
            raise depth_error(exc) from exc
    request = _model(data)
    if tool_lists is not None:
        tool_lists.remember(request)
    return request


def _model(data: dict[str, Any]) -> ResponsesRequest:
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
