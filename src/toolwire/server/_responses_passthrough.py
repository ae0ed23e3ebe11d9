"""A ``POST /v1/responses`` exchange served by a Responses backend (``kind = "responses"``).

The request is passed through, downgraded to what the backend understands
(``downgrade_request``); the backend's events come back through
``ResponsesStreamRestorer``, which gives every call the type its tool was declared with.
Everything else mirrors the Chat path in ``_responses``: the same ``Exchange`` record
for the observers, the same disconnect watcher and shutdown handling
(``_streaming.serve_stream``), the same response store.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import orjson

from toolwire.errors import UpstreamError
from toolwire.protocol import ResponsesRequest
from toolwire.translate.responses_downgrade import (
    DowngradedRequest,
    ResponsesStreamRestorer,
    downgrade_request,
)
from toolwire.upstream._responses_http import ResponsesEventStream

from ._asgi import Receive, Send, send_bytes
from ._exchange import Exchange
from ._routing import ResponsesRoute
from ._streaming import Keep, fail_before_streaming, keep_quietly, send_events, serve_stream

log = logging.getLogger("toolwire.server")


async def pass_through(
    exchange: Exchange,
    receive: Receive,
    send: Send,
    route: ResponsesRoute,
    request: ResponsesRequest,
    keep: Keep,
) -> None:
    """Serve ``request`` (its stored history already in ``input``) from ``route``'s backend."""
    try:
        downgraded = downgrade_request(request, route.capabilities, model=route.upstream_model)
    except Exception as exc:
        await fail_before_streaming(exchange, send, exc)
        return
    body = _upstream_body(downgraded)
    exchange.upstream_request = body
    exchange.warnings = downgraded.warnings
    exchange.conversions = list(downgraded.conversions)
    restorer = ResponsesStreamRestorer(
        downgraded,
        response_id=exchange.request_id,
        created_at=int(exchange.received_at),
        model=request.model,
    )
    if request.stream:
        await _stream(exchange, receive, send, route, body, restorer, keep)
    else:
        await _create(exchange, send, route, body, restorer, keep)


def _upstream_body(downgraded: DowngradedRequest) -> dict[str, Any]:
    """The body for the backend. A ``previous_response_id`` was resolved by the gateway's
    own store (its items are in ``input``): the backend has never seen that id."""
    body = downgraded.body
    body.pop("previous_response_id", None)
    return body


async def _create(
    exchange: Exchange,
    send: Send,
    route: ResponsesRoute,
    body: dict[str, Any],
    restorer: ResponsesStreamRestorer,
    keep: Keep,
) -> None:
    try:
        answer = await route.backend.create(body)
        exchange.note_chunk(answer)
        response = restorer.restore_response(answer)
        await keep(response)
    except Exception as exc:
        await fail_before_streaming(exchange, send, exc)
        return
    exchange.conversions.extend(c for c in restorer.conversions if c not in exchange.conversions)
    exchange.finish(str(response.get("status", "completed")), response=response)
    await send_bytes(send, 200, orjson.dumps(response), b"application/json")


async def _stream(
    exchange: Exchange,
    receive: Receive,
    send: Send,
    route: ResponsesRoute,
    body: dict[str, Any],
    restorer: ResponsesStreamRestorer,
    keep: Keep,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        try:
            events = await stack.enter_async_context(route.backend.stream(body))
        except Exception as exc:  # nothing streamed yet: a plain HTTP error
            await fail_before_streaming(exchange, send, exc)
            return
        await serve_stream(
            exchange, receive, send, lambda: _pump(exchange, events, restorer, send, keep), restorer
        )


async def _pump(
    exchange: Exchange,
    events: ResponsesEventStream,
    restorer: ResponsesStreamRestorer,
    send: Send,
    keep: Keep,
) -> None:
    """Backend events -> restored events -> the client, ending in one terminal event.

    The response is stored before its terminal event goes out, so a client that
    continues it at once always finds it.
    """
    try:
        async for event in events:
            exchange.note_chunk(event)
            restored = restorer.feed(event)
            if restorer.finished:
                await keep_quietly(keep, restorer.response)
            await send_events(exchange, send, restored)
            if restorer.finished:
                break
        else:
            restored = restorer.finish()
            await keep_quietly(keep, restorer.response)
            await send_events(exchange, send, restored)
    except UpstreamError as exc:
        await send_events(exchange, send, restorer.fail(exc.message))
    except OSError:
        raise  # the client is gone: nothing more can be sent
    except Exception as exc:
        log.error("stream restoration failed", exc_info=exc)
        await send_events(
            exchange, send, restorer.fail("The gateway failed while restoring the stream.")
        )
    await send({"type": "http.response.body", "body": b"", "more_body": False})
