"""``ExchangePipeline``: one Responses request through the gateway, whatever carries it.

parse -> history (``previous_response_id``) -> route -> prepare (the backend's
translation) -> the backend's answer as a stream of Responses events, or as one
Response object -> stored, when the request asks for it. The pure core does the work;
the pipeline moves it along and keeps the ``Exchange`` record that observers (logs,
metrics, captures) read. It knows no transport: a ``Transport`` (HTTP + SSE, a
WebSocket) hands it the request body and delivers what it says.

The whole exchange runs in the caller's task, beside the transport's watch on the
client: when the client goes away, before the upstream's first byte or mid-stream, the
watch cancels the exchange at once, which closes the upstream connection (one task per
exchange, not two: a task and ``asyncio.wait`` cost ~15 us a request).

The caller the transport authenticated (a ``Principal``) is admitted by the ``KeyGate``
once the model is known (``gate.admit``: 403, 429); what it stores is kept under its
owner, and only its own stored responses can be continued.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from toolwire.errors import RequestError
from toolwire.keys import Principal
from toolwire.protocol import ResponsesRequest, dump_item, parse_item, parse_request
from toolwire.store import PreviousResponseNotFound, ResponseStore, StoredResponse, with_previous
from toolwire.translate import AnswerTranslator
from toolwire.upstream import StreamBatches

from ._answer import Answer, Keep, pump
from ._exchange import Exchange, ExchangeObserver
from ._routing import ModelRouter
from ._settings import GatewaySettings
from ._transport import Transport

log = logging.getLogger("toolwire.server")


class ExchangePipeline:
    """Serves Responses requests from ``router``'s backends, told to ``observers``."""

    def __init__(
        self, router: ModelRouter, settings: GatewaySettings, observers: Sequence[ExchangeObserver] = ()
    ) -> None:
        self.router = router
        self.settings = settings
        self.observers = tuple(observers)
        self._record_traffic = any(observer.wants_traffic for observer in self.observers)

    async def serve(self, body: bytes, transport: Transport, principal: Principal | None = None) -> Exchange:
        """Answer the request ``body`` of ``principal`` (None: a gateway without keys)
        through ``transport``; the finished record."""
        exchange = Exchange("resp_" + secrets.token_hex(16), body, record_traffic=self._record_traffic)
        del body  # the exchange keeps it only when an observer records traffic
        exchange.key_name = principal.name if principal is not None else None
        answer = Answer(exchange, transport, self.settings.redact)
        for observer in self.observers:
            observer.started(exchange)
        # The exchange runs in this task; the watch on the client cancels it when the client
        # leaves before the answer is out. Once the answer is out, a server may report it as
        # the client leaving: the exchange is then still closing its upstream stream (reading
        # the rest of the body puts the connection back in the pool, for a second at most).
        task = asyncio.current_task()
        assert task is not None
        gone = asyncio.ensure_future(transport.client_gone())
        watch = _ClientWatch(task, answer)
        gone.add_done_callback(watch)
        try:
            await self._serve(answer, principal)
        except asyncio.CancelledError:
            if not watch.left or task.cancelling() > 1:  # the server is shutting down, its grace over
                watch.over = True
                with contextlib.suppress(Exception):
                    await answer.cut_short()
                raise
            task.uncancel()  # the client left: the exchange is over, quietly
        except OSError:
            pass  # the client is gone: nothing more can be sent
        except Exception as failure:
            log.error("exchange %s failed", exchange.request_id, exc_info=failure)
        finally:
            watch.over = True
            gone.cancel()
            answer.conclude()
            for observer in self.observers:
                try:
                    observer.finished(exchange)
                except Exception:
                    log.exception("observer %r failed", observer)
        return exchange

    async def _serve(self, answer: Answer, principal: Principal | None) -> None:
        pending = await self._prepare(answer, principal)
        if pending is not None:
            await pending.run(answer)

    async def _prepare(self, answer: Answer, principal: Principal | None) -> PendingStream | None:
        """Answer the request, or prepare its stream: None when the answer was given."""
        exchange = answer.exchange
        try:
            request = parse_request(exchange.client_request)
            if not exchange.record_traffic:
                exchange.client_request = b""
            exchange.model, exchange.stream = request.model, bool(request.stream)
            route = self.router.resolve(request.model)
            exchange.upstream, exchange.upstream_model = route.upstream_name, route.upstream_model
            if self.settings.gate is not None:
                exchange.lease = await self.settings.gate.admit(principal, request.model)
            owner = principal.owner if principal is not None else None
            keep = Keeper.for_request(self.settings.store, request, owner)
            request = await self._with_history(request, keep, owner)
            call = route.backend.prepare(
                request,
                upstream_model=route.upstream_model,
                response_id=exchange.request_id,
                created_at=int(exchange.received_at),
            )
        except Exception as exc:
            await answer.error(exc)
            return None
        exchange.note_upstream_request(call.body)
        exchange.warnings = call.warnings
        exchange.conversions = call.conversions
        machine = call.machine
        if request.stream:
            return PendingStream(route.backend.stream(call.body), machine, keep)
        try:
            whole = await route.backend.fetch(call.body)
            exchange.note_chunk(whole)
            response = machine.translate_whole(whole)
            await keep(response)
        except Exception as exc:
            await answer.error(exc)
            return None
        exchange.conversions.extend(c for c in machine.conversions if c not in exchange.conversions)
        await answer.response(response)
        return None

    async def _with_history(self, request: ResponsesRequest, keep: Keeper, owner: str | None) -> ResponsesRequest:
        """``request`` with the stored conversation before its own input, when it continues one
        of ``owner``'s responses (anyone else's is not found)."""
        if request.previous_response_id is None:
            return request
        store = self.settings.store
        if store is None:
            raise RequestError(
                "previous_response_id needs a response store, and this gateway has none (--store).",
                param="previous_response_id",
            )
        previous = await store.get(request.previous_response_id)
        if previous is None or not previous.visible_to(owner):
            raise PreviousResponseNotFound(request.previous_response_id)
        chain = await store.chain_input(request.previous_response_id)
        full = with_previous(chain, keep.own_input(request))
        return request.model_copy(
            update={"input": [parse_item(item, where=f"input[{n}]") for n, item in enumerate(full)]}
        )


class _ClientWatch:
    """Called when the client is gone: cancels the exchange's task, unless its answer is
    out (the exchange is closing its upstream stream) or the exchange is over."""

    __slots__ = ("_answer", "_task", "left", "over")

    def __init__(self, task: asyncio.Task[Any], answer: Answer) -> None:
        self._task = task
        self._answer = answer
        self.left = False
        self.over = False

    def __call__(self, gone: asyncio.Future[None]) -> None:
        if gone.cancelled():
            return
        gone.exception()  # retrieved: a watch that fails counts as the client gone
        if self.over or self._answer.complete:
            return
        self.left = True
        self._task.cancel()


@dataclass(frozen=True, slots=True)
class PendingStream:
    """Everything an open stream needs, and nothing more: the request and its translation
    are gone by the time it runs, which keeps the memory of each open stream small."""

    opening: AbstractAsyncContextManager[StreamBatches]
    machine: AnswerTranslator
    keep: Keep

    async def run(self, answer: Answer) -> None:
        """Open the backend's stream and pump it; a failure to open is a plain error."""
        async with contextlib.AsyncExitStack() as stack:
            try:
                batches = await stack.enter_async_context(self.opening)
            except Exception as exc:  # nothing streamed yet
                await answer.error(exc)
                return
            await pump(answer, batches, self.machine, self.keep)


class Keeper:
    """Stores a finished response (``store`` defaults to true) with the request's own input,
    under the ``owner`` of the key that made it."""

    def __init__(self, store: ResponseStore | None, previous_response_id: str | None, owner: str | None) -> None:
        self._store = store
        self._previous = previous_response_id
        self._owner = owner
        self._own_input: list[dict[str, Any]] | None = None

    @classmethod
    def for_request(cls, store: ResponseStore | None, request: ResponsesRequest, owner: str | None) -> Keeper:
        keeper = cls(store if request.store is not False else None, request.previous_response_id, owner)
        if keeper._store is not None or request.previous_response_id is not None:
            keeper.own_input(request)
        return keeper

    def own_input(self, request: ResponsesRequest) -> list[dict[str, Any]]:
        """The request's own input items as JSON (taken before history is merged in)."""
        if self._own_input is None:
            self._own_input = [dump_item(item) for item in request.input_items()]
        return self._own_input

    async def __call__(self, response: dict[str, Any]) -> None:
        if self._store is not None and self._own_input is not None:
            record = StoredResponse.from_exchange(
                response, self._own_input, previous_response_id=self._previous, owner=self._owner
            )
            await self._store.put(record)
