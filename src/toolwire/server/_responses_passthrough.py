"""A ``POST /v1/responses`` exchange served by a Responses backend (``kind = "responses"``).

The request is passed through, downgraded to what the backend understands
(``downgrade_request``); the backend's events come back through
``ResponsesStreamRestorer``, which gives every call the type its tool was declared with.
Everything else is the Chat path's: the same ``Reply`` and ``pump`` (``_reply``), the
same ``Exchange`` record for the observers, the same response store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from toolwire.protocol import ResponsesRequest
from toolwire.translate import (
    DowngradedRequest,
    ResponsesStreamRestorer,
    downgrade_request,
)

from ._reply import PendingStream, Reply
from ._routing import ResponsesRoute

Keep = Callable[[dict[str, Any]], Awaitable[None]]


async def pass_through(
    reply: Reply, route: ResponsesRoute, request: ResponsesRequest, keep: Keep
) -> PendingStream | None:
    """Answer ``request`` (its stored history already in ``input``) from ``route``'s backend,
    or prepare its stream: None when the answer was sent."""
    exchange = reply.exchange
    try:
        downgraded = downgrade_request(request, route.capabilities, model=route.upstream_model)
    except Exception as exc:
        await reply.error(exc)
        return None
    body = _upstream_body(downgraded)
    exchange.note_upstream_request(body)
    exchange.warnings = downgraded.warnings
    exchange.conversions = list(downgraded.conversions)
    restorer = ResponsesStreamRestorer(
        downgraded, response_id=exchange.request_id, created_at=int(exchange.received_at), model=request.model
    )
    if not request.stream:
        try:
            answer = await route.backend.create(body)
            exchange.note_chunk(answer)
            response = restorer.restore_response(answer)
            await keep(response)
        except Exception as exc:
            await reply.error(exc)
            return None
        exchange.conversions.extend(c for c in restorer.conversions if c not in exchange.conversions)
        await reply.response(response)
        return None
    return PendingStream(route.backend.stream(body), restorer, keep)


def _upstream_body(downgraded: DowngradedRequest) -> dict[str, Any]:
    """The body for the backend. A ``previous_response_id`` was resolved by the gateway's
    own store (its items are in ``input``): the backend has never seen that id."""
    body = downgraded.body
    body.pop("previous_response_id", None)
    return body
