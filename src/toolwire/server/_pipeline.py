"""``ExchangePipeline``: one Responses request through the gateway, whatever carries it.

parse -> history (``previous_response_id``) -> route -> prepare (the backend's
translation) -> the backend's answer as a stream of Responses events, or as one
Response object -> kept, for later requests to continue. The pure core does the work;
the pipeline moves it along and keeps the ``Exchange`` record that observers (logs,
metrics, captures) read. It knows no transport: a ``Transport`` (HTTP + SSE, a
WebSocket) hands it the request body and delivers what it says, and may name the
``History`` its requests continue (the response store unless it says otherwise; a
WebSocket adds the connection's own responses). A request may also ask for no answer
from the model (``generate=False``): its response is created, empty, for a later
request to continue, and nothing goes upstream.

The whole exchange runs in the caller's task, beside the transport's watch on the
client: when the client goes away, before the upstream's first byte or mid-stream, the
watch cancels the exchange at once, which closes the upstream connection (one task per
exchange, not two: a task and ``asyncio.wait`` cost ~15 us a request).

Every exchange holds a slot under ``max_streams`` while it runs (``StreamSlots``),
whatever its transport; past the cap the transport is told 503 with ``retry-after``.

The caller the transport authenticated (a ``Principal``) is admitted by the ``KeyGate``
once the model is known (``gate.admit``: 403, 429); what it keeps is kept under its
owner, and only its own responses can be continued.

Compaction is decided here too, after the history (``Compactions``): an exchange whose
input holds a ``compaction_trigger``, or one served as ``POST /v1/responses/compact``
(``serve(..., compact=True)``: a whole ``response.compaction`` object, never stored),
compacts the conversation; every exchange has the compactions it carries opened for
its backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from toolwire.compaction import has_trigger
from toolwire.keys import Principal
from toolwire.protocol import KnownItems, ResponsesRequest, dump_item, parse_item, parse_request
from toolwire.store import MAX_INPUT_BASES, ItemDict, StoredResponse, stored_items
from toolwire.translate import AnswerTranslator
from toolwire.upstream import ListBatches, StreamBatches

from ._answer import Answer, Keep, pump
from ._compaction import Compactions
from ._exchange import Exchange, ExchangeObserver
from ._history import EMPTY, Conversation, History, StoredInput, StoreHistory
from ._limits import StreamSlot, StreamSlots
from ._routing import ModelRouter
from ._settings import GatewaySettings
from ._transport import Transport
from ._unsampled import UnsampledAnswer

log = logging.getLogger("toolwire.server")

_FAILED = frozenset({"error", "failed"})


class ExchangePipeline:
    """Serves Responses requests from ``router``'s backends, told to ``observers``."""

    def __init__(
        self, router: ModelRouter, settings: GatewaySettings, observers: Sequence[ExchangeObserver] = ()
    ) -> None:
        self.router = router
        self.settings = settings
        self.observers = tuple(observers)
        self.store_history = StoreHistory(settings.store, settings.conversations)
        self.compactions = Compactions(settings.compaction_key)
        self.streams = StreamSlots(settings.max_streams)
        self._record_traffic = any(observer.wants_traffic for observer in self.observers)

    async def serve(
        self,
        body: bytes,
        transport: Transport,
        *,
        principal: Principal | None = None,
        history: History | None = None,
        generate: bool = True,
        compact: bool = False,
        slot: StreamSlot | None = None,
        parse: Callable[[bytes], ResponsesRequest] = parse_request,
    ) -> Exchange | None:
        """Answer the request ``body`` of ``principal`` (None: a gateway without keys)
        through ``transport``; the finished record, or None when it was refused for
        want of a slot under ``max_streams`` (a 503 with ``retry-after``).

        ``history`` is where ``previous_response_id`` is looked up and the response kept
        (the response store by default); a continuation that fails is forgotten there.
        ``generate=False`` creates the response without asking the model. ``compact``: the
        body is a ``/responses/compact`` request. ``slot``: the one the transport took
        already (HTTP takes it before reading the body); else the exchange takes its own.
        ``parse`` reads the body (a WebSocket's keeps its turns' fields: ``TurnFields``).
        """
        slot = slot if slot is not None else self.streams.take()
        if slot is None:
            await transport.send_error(self.streams.refusal)
            return None
        exchange = Exchange("resp_" + secrets.token_hex(16), body, record_traffic=self._record_traffic)
        del body  # the exchange keeps it until it is parsed, or longer when an observer records traffic
        asked = _Asked(principal, self.store_history if history is None else history, generate, compact, parse)
        with slot:
            return await self._exchange(exchange, transport, asked)

    async def _exchange(self, exchange: Exchange, transport: Transport, asked: _Asked) -> Exchange:
        exchange.key_name = asked.principal.name if asked.principal is not None else None
        answer = Answer(exchange, transport, self.settings.redact)
        for observer in self.observers:
            observer.started(exchange)
        # The exchange runs in this task; the watch on the client cancels it when the client
        # leaves before the answer is out. Once the answer is out, a server may report it as
        # the client leaving: the exchange is then still closing its upstream stream (reading
        # the rest of the body puts the connection back in the pool, for a second at most).
        task = asyncio.current_task()
        assert task is not None
        watch = _ClientWatch(task, answer)
        unwatch = transport.watch_client(watch)
        failure: Exception | None = None
        try:
            await self._serve(answer, asked)
        except asyncio.CancelledError:
            if not watch.left or task.cancelling() > 1:  # the server is shutting down, its grace over
                watch.over = True
                with contextlib.suppress(Exception):
                    await answer.cut_short()
                raise
            task.uncancel()  # the client left: the exchange is over, quietly
        except OSError:
            pass  # the client is gone: nothing more can be sent
        except Exception as exc:
            failure = exc
            log.error("exchange %s failed", exchange.request_id, exc_info=exc)
        finally:
            watch.over = True
            unwatch()
            answer.conclude(failure)
            if exchange.previous_response_id is not None and exchange.outcome in _FAILED:
                asked.history.forget(exchange.previous_response_id)
            for observer in self.observers:
                try:
                    observer.finished(exchange)
                except Exception:
                    log.exception("observer %r failed", observer)
        return exchange

    async def _serve(self, answer: Answer, asked: _Asked) -> None:
        pending = await self._prepare(answer, asked)
        if pending is not None:
            await pending.run(answer)

    async def _prepare(self, answer: Answer, asked: _Asked) -> PendingStream | None:
        """Answer the request, or prepare its stream: None when the answer was given."""
        exchange = answer.exchange
        principal, generate, compact = asked.principal, asked.generate, asked.compact
        try:
            request = asked.parse(exchange.client_request)
            if not exchange.record_traffic:
                exchange.client_request = b""
            if compact:  # a whole compaction object, never stored
                request = request.model_copy(update={"stream": False, "store": False})
            exchange.model, exchange.stream = request.model, bool(request.stream) or not generate
            exchange.previous_response_id = request.previous_response_id
            route = self.router.resolve(request.model)
            exchange.upstream, exchange.upstream_model = route.upstream_name, route.upstream_model
            if self.settings.gate is not None:
                exchange.lease = await self.settings.gate.admit(principal, request.model)
            owner = principal.owner if principal is not None else None
            keep = Keeper(asked.history, request, response_id=exchange.request_id, owner=owner)
            own_items = request.input_items()
            trigger = has_trigger(request)
            request = await keep.with_history(request)
            plan = await self.compactions.plan(
                request, trigger=trigger, endpoint=compact, own_items=len(own_items), backend=route.backend, owner=owner
            )
            call = route.backend.prepare(
                plan.request,
                upstream_model=route.upstream_model,
                response_id=exchange.request_id,
                created_at=int(exchange.received_at),
            )
        except Exception as exc:
            await answer.error(exc)
            return None
        response_id, created_at = exchange.request_id, int(exchange.received_at)
        if not generate:
            unsampled = partial(UnsampledAnswer, request, response_id=response_id, created_at=created_at)
            return PendingStream(_nothing_upstream(), unsampled, keep)
        exchange.note_upstream_request(call.body)
        exchange.warnings = call.warnings
        exchange.conversions = [*plan.conversions, *call.conversions]
        wire_translator = call.translator

        def translator() -> AnswerTranslator:
            return plan.translator(wire_translator(), request, response_id=response_id, created_at=created_at)

        if request.stream:
            return PendingStream(route.backend.stream(call.body), translator, keep)
        machine = translator()
        try:
            if compact:
                response = await plan.compaction_object(route.backend, call.body, machine, exchange)
            else:
                whole = await route.backend.fetch(call.body)
                exchange.note_chunk(whole)
                response = machine.translate_whole(whole)
                await keep(response)
        except Exception as exc:
            await answer.error(exc)
            return None
        exchange.note_conversions(machine.conversions)
        await answer.response(response)
        return None


@dataclass(frozen=True, slots=True)
class _Asked:
    """How the transport asked for one request to be served (``ExchangePipeline.serve``)."""

    principal: Principal | None
    history: History
    generate: bool
    compact: bool
    parse: Callable[[bytes], ResponsesRequest]


class _ClientWatch:
    """Called when the client is gone: cancels the exchange's task, unless its answer is
    out (the exchange is closing its upstream stream) or the exchange is over."""

    __slots__ = ("_answer", "_task", "left", "over")

    def __init__(self, task: asyncio.Task[Any], answer: Answer) -> None:
        self._task = task
        self._answer = answer
        self.left = False
        self.over = False

    def __call__(self) -> None:
        if self.over or self._answer.complete:
            return
        self.left = True
        self._task.cancel()


class PendingStream:
    """Everything an open stream needs, and nothing more: the request and its translation
    are gone once the stream is open, which keeps the memory of each open stream small.

    The answer's translator, and its opening events (``response.created``,
    ``.in_progress``), are made while the upstream works on the request
    (``TranslatorMeanwhile``): they need nothing from it but its success, and made
    before the body left they would delay the upstream's start by their time.
    """

    __slots__ = ("_translator", "keep", "opening")

    def __init__(
        self,
        opening: AbstractAsyncContextManager[StreamBatches],
        translator: Callable[[], AnswerTranslator],
        keep: Keep,
    ) -> None:
        self.opening = opening
        self._translator: Callable[[], AnswerTranslator] | None = translator
        self.keep = keep

    async def run(self, answer: Answer) -> None:
        """Open the backend's stream and pump it; a failure to open is a plain error."""
        translator, self._translator = self._translator, None  # (it holds the request)
        if translator is None:
            raise RuntimeError("a pending stream runs once")
        meanwhile = TranslatorMeanwhile(translator)
        del translator
        async with contextlib.AsyncExitStack() as stack:
            try:
                batches = await stack.enter_async_context(self.opening)
                machine, opening_events = meanwhile.made()
            except Exception as exc:  # nothing streamed yet
                await answer.error(exc)
                return
            finally:
                meanwhile.cancel()
            await pump(answer, batches, machine, self.keep, opening_events)


class TranslatorMeanwhile:
    """Builds an answer's translator and its opening events while the upstream works on
    the request: at the event loop's next turns, by when the request's body is written.

    Two turns: aiohttp writes a request's body in a task of its own, which ``post``
    schedules; a callback scheduled before ``post`` runs ahead of that task, one it
    schedules in turn runs after. (Should the body go out later, on a new connection, the
    translator is made before it, as it would have been in ``prepare``.) ``made`` gives
    the translator and its events, building them then if the loop has not yet; a failure
    to build is raised there, in the exchange's task."""

    __slots__ = ("_build", "_failure", "_made")

    def __init__(self, build: Callable[[], AnswerTranslator]) -> None:
        self._build: Callable[[], AnswerTranslator] | None = build
        self._made: tuple[AnswerTranslator, list[Any]] | None = None
        self._failure: Exception | None = None
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, self._make)

    def made(self) -> tuple[AnswerTranslator, list[Any]]:
        """The translator, and its ``start`` events, made now if not before; handed over,
        not kept (the events list grows into the stream's first delivery)."""
        self._make()
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure
        made, self._made = self._made, None
        if made is None:
            raise RuntimeError("the translator was handed over already")
        return made

    def cancel(self) -> None:
        """Nothing more is built (what is made stays for ``made``)."""
        self._build = None

    def _make(self) -> None:
        build, self._build = self._build, None
        if build is None:
            return
        try:
            machine = build()
            self._made = machine, machine.start()
        except Exception as exc:
            self._failure = exc


class Keeper:
    """A request's place in its ``History``: the conversation it continues, and keeping
    its finished response there (in the store unless it said ``store: false``), under the
    ``owner`` of the key that made it; anyone else's responses are not found.

    A request that continues a conversation goes upstream with its own items in the form
    its record keeps them (``stored_items``), as every later turn reads them: so the
    state its translation derives is the next turn's to resume (``Conversation``).

    A request that resent a history the gateway knew (a client continuing by resending)
    has its response kept, but where the history says so (the store's), not its
    conversation parsed again from the record: that would cost each turn as much as the
    history is long. And where the owner's response to the request before was stored with
    that history as its input (``StoredInput``), the record builds on that one's input
    and holds only the new items: a turn then writes what is new, not the whole history
    again. Should that record be gone by then, the whole input is stored after all."""

    def __init__(
        self, history: History, request: ResponsesRequest, *, response_id: str, owner: str | None = None
    ) -> None:
        self._history = history
        self._owner = owner
        self._response_id = response_id
        self._previous = request.previous_response_id
        link = request.history()
        resent = link.continues if link is not None and self._previous is None else None  # the history it resent
        self._resent = resent is not None
        self._store_requested = request.store is not False
        self._own_input: list[ItemDict] | None = None
        self._base: StoredInput | None = None
        self._before = EMPTY
        self._sent: KnownItems | None = None  # the whole input sent, when it continues a conversation
        keeps = history.keeps_responses(self._store_requested)
        # Held for as long as the answer streams, only where its record may be noted as holding
        # the history (or stored whole after all): it holds the request's items.
        self._link = link if keeps and self._previous is None else None
        if keeps and resent is not None and history.builds_on_inputs():
            base = StoredInput.of(resent, owner)
            if base is not None and base.records < MAX_INPUT_BASES:
                self._base = base
        if keeps or self._previous is not None:
            if self._base is not None and link is not None:
                self._own_input = [dump_item(item) for item in link.input[link.known :]]
            else:
                self._own_input = link.dumped_input() if link is not None else [dump_item(i) for i in request.input_items()]

    async def with_history(self, request: ResponsesRequest) -> ResponsesRequest:
        """``request`` with the conversation so far before its own input, when it continues one."""
        if self._previous is None or self._own_input is None:
            return request
        self._before = before = await self._history.conversation(self._previous, self._owner)
        known = len(before.items)
        own = [
            parse_item(item, where=f"input[{known + n}]")
            for n, item in enumerate(stored_items(self._own_input, self._response_id))
        ]
        items, link = before.continued(own)
        continued = request.model_copy(update={"input": items})
        continued.link_history(link)
        self._sent = cast("KnownItems", link.own)
        return continued

    async def __call__(self, response: dict[str, Any]) -> None:
        if self._own_input is None or not self._history.keeps_responses(self._store_requested):
            return
        after = None
        record = self._record(response)
        if self._history.keeps_conversation(resent=self._resent):
            after = self._before.grown(record, self._sent)
        link = self._link
        if not await self._keep(record, after) and self._base is not None and link is not None:
            # The input it builds on is no longer stored whole: store its own. (A history
            # that keeps the conversation a record makes builds on no input: none to keep.)
            self._base = None
            self._own_input = link.dumped_input()
            record = self._record(response)
            await self._keep(record, None)
        if link is not None and link.own is not None:
            records = self._base.records + 1 if self._base is not None else 1
            StoredInput(record.id, records).note(link.own, self._owner)

    def _record(self, response: dict[str, Any]) -> StoredResponse:
        assert self._own_input is not None
        base, link = self._base, self._link
        return StoredResponse.from_exchange(
            response,
            self._own_input,
            previous_response_id=self._previous,
            owner=self._owner,
            input_base=base.response_id if base is not None else None,
            items_before=link.known if base is not None and link is not None else 0,
        )

    async def _keep(self, record: StoredResponse, after: Conversation | None) -> bool:
        return await self._history.keep(
            record, before=self._before, after=after, store_requested=self._store_requested
        )


@contextlib.asynccontextmanager
async def _nothing_upstream() -> AsyncIterator[StreamBatches]:
    """The upstream stream of a request that asked for no answer: ended before it began."""
    yield ListBatches([])
