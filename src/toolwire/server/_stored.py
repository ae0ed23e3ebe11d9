"""The stored-response endpoints, over a ``ResponseStore``::

    GET    /v1/responses/{response_id}               the Response object (made whole, for
                                                     a record stored by an older toolwire)
    DELETE /v1/responses/{response_id}               {"id", "object": "response", "deleted": true}
    GET    /v1/responses/{response_id}/input_items   a page of its input items

``input_items`` pages as the OpenAI API does: ``limit`` (1-100, default 20), ``order``
(``asc`` or ``desc``, default ``desc``), and item-id cursors ``after`` / ``before``;
the page is ``{"object": "list", "data", "first_id", "last_id", "has_more"}``. The
paging itself is the pure ``page_of``. Errors are OpenAI-shaped JSON; an unknown id
is 404, an unreachable store 503. A response belongs to the client key that created it:
asked for with another key, it is 404 as if it did not exist.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.errors import NotFoundError, RequestError
from toolwire.store import ItemDict, ResponseStore, StoredResponse
from toolwire.translate import complete_response

from ._auth import principal_of
from ._errors import as_toolwire_error

DEFAULT_PAGE_LIMIT = 20
MAX_PAGE_LIMIT = 100

Endpoint = Callable[[Request], Awaitable[Response]]


def stored_routes(store: ResponseStore) -> list[Route]:
    """The routes serving the responses kept in ``store``."""

    async def retrieve(request: Request) -> Response:
        record = await _record(store, request)
        return _json(complete_response(record.response))

    async def delete(request: Request) -> Response:
        response_id = (await _record(store, request)).id
        if not await store.delete(response_id):
            raise _not_found(response_id)
        return _json({"id": response_id, "object": "response", "deleted": True})

    async def input_items(request: Request) -> Response:
        query = PageQuery.parse(request.query_params)
        record = await _record(store, request)
        return _json(page_of(await store.input_of(record), query))

    return [
        Route("/v1/responses/{response_id}", _answering_errors(retrieve), methods=["GET"]),
        Route("/v1/responses/{response_id}", _answering_errors(delete), methods=["DELETE"]),
        Route("/v1/responses/{response_id}/input_items", _answering_errors(input_items), methods=["GET"]),
    ]


class PageQuery:
    """The validated paging parameters of a list request."""

    __slots__ = ("after", "before", "limit", "order")

    def __init__(
        self,
        *,
        limit: int = DEFAULT_PAGE_LIMIT,
        order: str = "desc",
        after: str | None = None,
        before: str | None = None,
    ) -> None:
        self.limit = limit
        self.order = order
        self.after = after
        self.before = before

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> PageQuery:
        """From a query string; ``RequestError`` (400) naming the bad parameter."""
        raw_limit = params.get("limit")
        limit = DEFAULT_PAGE_LIMIT
        if raw_limit is not None:
            try:
                limit = int(raw_limit)
            except ValueError:
                limit = 0
            if not 1 <= limit <= MAX_PAGE_LIMIT:
                raise RequestError(
                    f"Invalid 'limit': {raw_limit!r}; expected an integer from 1 to {MAX_PAGE_LIMIT}.",
                    param="limit",
                    code="invalid_value",
                )
        order = params.get("order", "desc")
        if order not in ("asc", "desc"):
            raise RequestError(
                f"Invalid 'order': {order!r}; expected 'asc' or 'desc'.", param="order", code="invalid_value"
            )
        return cls(limit=limit, order=order, after=params.get("after") or None, before=params.get("before") or None)


def page_of(items: Sequence[ItemDict], query: PageQuery) -> dict[str, Any]:
    """One page of ``items`` (given in input order) as an OpenAI list object.

    In the requested order, ``after`` keeps the items following that id and ``before``
    the items preceding it; the page is the first ``limit`` of those, or with only
    ``before``, the last ``limit`` (the page just before the cursor). ``has_more`` says
    whether more items lie beyond the page in the direction of travel.
    """
    ordered = list(items) if query.order == "asc" else list(reversed(items))
    ids = [item.get("id") for item in ordered]
    start, end = 0, len(ordered)
    if query.after is not None:
        start = _position(ids, query.after, "after") + 1
    if query.before is not None:
        end = _position(ids, query.before, "before")
    window = ordered[start:end]
    backwards = query.before is not None and query.after is None
    page = window[-query.limit :] if backwards else window[: query.limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0].get("id") if page else None,
        "last_id": page[-1].get("id") if page else None,
        "has_more": len(window) > len(page),
    }


def _position(ids: list[Any], cursor: str, param: str) -> int:
    try:
        return ids.index(cursor)
    except ValueError:
        raise RequestError(
            f"Invalid '{param}': no input item with id '{cursor}' in this response.",
            param=param,
            code="invalid_value",
        ) from None


async def _record(store: ResponseStore, request: Request) -> StoredResponse:
    """The stored response the path names, if the caller's key owns it; else 404."""
    response_id = request.path_params["response_id"]
    record = await store.get(response_id)
    principal = principal_of(request.scope)
    if record is None or not record.visible_to(principal.owner if principal is not None else None):
        raise _not_found(response_id)
    return record


def _not_found(response_id: str) -> NotFoundError:
    return NotFoundError(f"Response with id '{response_id}' not found.", param="response_id", code="response_not_found")


def _answering_errors(endpoint: Endpoint) -> Endpoint:
    """``endpoint`` with any failure answered as an OpenAI-shaped error (404, 400, 503, 500)."""

    async def answer(request: Request) -> Response:
        try:
            return await endpoint(request)
        except Exception as exc:
            error = as_toolwire_error(exc)
            return Response(orjson.dumps(error.to_body()), status_code=error.status, media_type="application/json")

    return answer


def _json(body: Any) -> Response:
    return Response(orjson.dumps(body), media_type="application/json")
