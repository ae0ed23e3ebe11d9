"""Where a request's conversation so far comes from, and where its answer is kept.

A request with ``previous_response_id`` continues a conversation: the input and output
of that response and of its ancestors come before the request's own input. A
``History`` says what that conversation is and keeps each finished response so that a
later request can continue it. The pipeline asks it; a transport chooses which one:

* ``StoreHistory``: the response store (``--store``), for every transport. A response
  is kept only when its request did not say ``store: false``.
* ``ConnectionHistory``: one WebSocket connection's own memory, over the store. It keeps
  every response the connection answered, ``store: false`` included, so a client that
  continues on the same connection sends only its new items; an id it does not hold is
  looked up in the store. A continuation that fails forgets the response it named (the
  client then starts again from its full input), as the Open Responses WebSocket mode
  says.

A stored response belongs to the key that made it (its ``owner``): with another key it
is not found, as if it did not exist. A connection's own responses are its caller's.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

from toolwire.errors import RequestError
from toolwire.store import ItemDict, PreviousResponseNotFound, ResponseStore, StoredResponse

CONNECTION_RESPONSES_KEPT = 8
"""Responses one connection remembers (the newest; a client continues the last one)."""


class History(Protocol):
    """The conversations requests continue, and the responses they may continue later."""

    def keeps_responses(self, store_requested: bool) -> bool:
        """Whether a finished response will be kept (so the request's input must be too)."""
        ...

    async def conversation(self, previous_response_id: str, owner: str | None) -> list[ItemDict]:
        """Every item up to and including ``previous_response_id``'s output, oldest first.

        Raises ``PreviousResponseNotFound`` when the response is unknown, or not ``owner``'s.
        """
        ...

    async def keep(self, record: StoredResponse, *, before: Sequence[ItemDict], store_requested: bool) -> None:
        """Keep a finished response; ``before`` is the conversation its request continued."""
        ...

    def forget(self, response_id: str) -> None:
        """A continuation of ``response_id`` failed: do not offer it again (where that applies)."""
        ...


class StoreHistory:
    """The response store: responses kept unless their request said ``store: false``."""

    def __init__(self, store: ResponseStore | None) -> None:
        self.store = store

    def keeps_responses(self, store_requested: bool) -> bool:
        return self.store is not None and store_requested

    async def conversation(self, previous_response_id: str, owner: str | None) -> list[ItemDict]:
        if self.store is None:
            raise RequestError(
                "previous_response_id needs a response store, and this gateway has none (--store).",
                param="previous_response_id",
            )
        previous = await self.store.get(previous_response_id)
        if previous is None or not previous.visible_to(owner):
            raise PreviousResponseNotFound(previous_response_id)
        return await self.store.chain_input(previous_response_id)

    async def keep(self, record: StoredResponse, *, before: Sequence[ItemDict], store_requested: bool) -> None:
        if self.store is not None and store_requested:
            await self.store.put(record)

    def forget(self, response_id: str) -> None:
        """Stored responses stay: another client may continue them."""


class ConnectionHistory:
    """One connection's own responses (the newest ``limit``), then the store's."""

    def __init__(self, store: StoreHistory, *, limit: int = CONNECTION_RESPONSES_KEPT) -> None:
        self._store = store
        self._limit = limit
        self._conversations: OrderedDict[str, list[ItemDict]] = OrderedDict()

    def keeps_responses(self, store_requested: bool) -> bool:
        return True

    async def conversation(self, previous_response_id: str, owner: str | None) -> list[ItemDict]:
        held = self._conversations.get(previous_response_id)
        if held is not None:
            self._conversations.move_to_end(previous_response_id)
            return list(held)
        if self._store.store is None:
            # Without a store, this connection is the only place a response could be.
            raise PreviousResponseNotFound(previous_response_id)
        return await self._store.conversation(previous_response_id, owner)

    async def keep(self, record: StoredResponse, *, before: Sequence[ItemDict], store_requested: bool) -> None:
        self._conversations[record.id] = [*before, *record.input_items, *record.output_items]
        self._conversations.move_to_end(record.id)
        while len(self._conversations) > self._limit:
            self._conversations.popitem(last=False)
        await self._store.keep(record, before=before, store_requested=store_requested)

    def forget(self, response_id: str) -> None:
        self._conversations.pop(response_id, None)
