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

A conversation comes back parsed (a ``Conversation``), and a kept response's whole
conversation is kept parsed as well (``KnownConversations``, bounded in entries and in
estimated bytes), so that a long conversation continued turn by turn is neither read
from the store nor parsed again whole on every turn: the store is asked only whether its
chain is still the same (``chain_ids``: the same checks and refresh as reading it). A
conversation also carries the history its request's own translation derived state on
(``KnownItems``, as ``protocol._history`` keeps for resent bodies), so the next request
translates only what is new: the last response's output and its own input. For that the
request's own items are used in the form its record keeps them (``stored_items``: with
ids, messages in full), the form every later turn reads them in.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import orjson

from toolwire.errors import RequestError
from toolwire.protocol import HistoryLink, Item, KnownItems, parse_item
from toolwire.protocol._history import WEIGHT_PER_BODY_BYTE
from toolwire.store import ItemDict, PreviousResponseNotFound, ResponseStore, StoredResponse

CONNECTION_RESPONSES_KEPT = 8
"""Responses one connection remembers (the newest; a client continues the last one)."""


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation up to and including one response's output.

    ``chain``: the ids of the responses holding it, oldest first; ``items``: their input
    and output items, as their records keep them, parsed; ``walked``: the history that
    its first items are, with what consumers derived from them when the last request
    translated them (None: nothing derived); ``weight``: its estimated memory in bytes.
    Read-only, and shared by every request that continues it.
    """

    chain: tuple[str, ...]
    items: tuple[Item, ...]
    walked: KnownItems | None = None
    weight: int = 0

    @classmethod
    def parse(cls, chain: tuple[str, ...], stored: Sequence[ItemDict]) -> Conversation:
        """The items read from a store, parsed; ``RequestError`` names a bad one
        (``input[n]``, its place in the request that continues them)."""
        items = tuple(parse_item(item, where=f"input[{n}]") for n, item in enumerate(stored))
        return cls(chain, items, None, WEIGHT_PER_BODY_BYTE * len(orjson.dumps(stored)))

    def continued(self, own: list[Item]) -> tuple[list[Item], HistoryLink]:
        """The input of a request that continues this conversation with ``own`` items,
        and its link: to ``walked``, and to a history of its own for what it derives."""
        items = [*self.items, *own]
        return items, HistoryLink(self.walked, KnownItems(tuple(items)), items)

    def grown(self, record: StoredResponse, sent: KnownItems | None = None) -> Conversation | None:
        """This conversation continued by the response ``record``: ``sent``, the whole
        input its request sent (this conversation's items, then its own as ``record``
        keeps them; None: those parsed from ``record``), then its output. None when an
        item does not parse (a continuation then reads the store's copy, and says so)."""
        try:
            if sent is None:
                sent = KnownItems((*self.items, *(parse_item(item) for item in record.input_items)))
            answer = tuple(parse_item(item) for item in record.output_items)
        except RequestError:
            return None
        turn = len(orjson.dumps(record.input_items)) + len(orjson.dumps(record.output_items))
        weight = self.weight + WEIGHT_PER_BODY_BYTE * turn
        return Conversation((*self.chain, record.id), (*sent.items, *answer), sent, weight)


EMPTY = Conversation((), ())
"""The conversation before a first request."""


class KnownConversations:
    """The conversations of recently kept responses, at most ``max_entries`` of estimated
    ``max_bytes`` (0: keep none), each under its response's id and owner; the least
    recently used go first, and a conversation goes when its continuation is kept: one
    entry per conversation, however long (a turn retried from an earlier response reads
    the store, once). Safe to share between threads."""

    def __init__(self, max_entries: int = 256, max_bytes: int = 128 * 1024 * 1024) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, tuple[str | None, Conversation]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()
        self.continued = 0
        """Continuations that found their conversation kept."""
        self.read = 0
        """Continuations that read their conversation from the store and parsed it whole."""

    @property
    def weight(self) -> int:
        """The estimated bytes of the kept conversations."""
        return self._weight

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, response_id: str, owner: str | None) -> Conversation | None:
        with self._lock:
            entry = self._entries.get(response_id)
            if entry is None or entry[0] != owner:
                return None
            self._entries.move_to_end(response_id)
            return entry[1]

    def keep(self, owner: str | None, conversation: Conversation, *, replacing: Conversation) -> None:
        """Keep ``conversation`` (under its last response's id), which continues ``replacing``."""
        if not conversation.chain or conversation.weight > self.max_bytes or self.max_entries <= 0:
            return
        with self._lock:
            replaced = self._entries.get(replacing.chain[-1]) if replacing.chain else None
            if replaced is not None and replaced[1] is replacing:
                self._drop(replacing.chain[-1])
            self._drop(conversation.chain[-1])
            self._entries[conversation.chain[-1]] = (owner, conversation)
            self._weight += conversation.weight
            self._evict()

    def _evict(self) -> None:
        while self._entries and (len(self._entries) > self.max_entries or self._weight > self.max_bytes):
            self._drop(next(iter(self._entries)))

    def _drop(self, response_id: str) -> None:
        entry = self._entries.pop(response_id, None)
        if entry is not None:
            self._weight -= entry[1].weight


class History(Protocol):
    """The conversations requests continue, and the responses they may continue later."""

    def keeps_responses(self, store_requested: bool) -> bool:
        """Whether a finished response will be kept (so the request's input must be too)."""
        ...

    async def conversation(self, previous_response_id: str, owner: str | None) -> Conversation:
        """Every item up to and including ``previous_response_id``'s output, oldest first.

        Raises ``PreviousResponseNotFound`` when the response is unknown, or not ``owner``'s;
        ``RequestError`` when a kept item does not parse.
        """
        ...

    async def keep(
        self, record: StoredResponse, *, before: Conversation, after: Conversation | None, store_requested: bool
    ) -> None:
        """Keep a finished response; ``before`` is the conversation its request continued,
        ``after`` the one it makes (None: not at hand, read from the store when continued)."""
        ...

    def forget(self, response_id: str) -> None:
        """A continuation of ``response_id`` failed: do not offer it again (where that applies)."""
        ...


class StoreHistory:
    """The response store: responses kept unless their request said ``store: false``;
    their conversations kept parsed as well, while ``known`` has room."""

    def __init__(self, store: ResponseStore | None, known: KnownConversations | None = None) -> None:
        self.store = store
        self.known = known if known is not None else KnownConversations()

    def keeps_responses(self, store_requested: bool) -> bool:
        return self.store is not None and store_requested

    async def conversation(self, previous_response_id: str, owner: str | None) -> Conversation:
        if self.store is None:
            raise RequestError(
                "previous_response_id needs a response store, and this gateway has none (--store).",
                param="previous_response_id",
            )
        known = self.known.get(previous_response_id, owner)
        if known is not None and known.chain == await self.store.chain_ids(previous_response_id):
            # The same chain of records, which never change: the same owner, the same items.
            self.known.continued += 1
            return known
        previous = await self.store.get(previous_response_id)
        if previous is None or not previous.visible_to(owner):
            raise PreviousResponseNotFound(previous_response_id)
        self.known.read += 1
        chain = await self.store.chain_ids(previous_response_id)
        return Conversation.parse(chain, await self.store.chain_input(previous_response_id))

    async def keep(
        self, record: StoredResponse, *, before: Conversation, after: Conversation | None, store_requested: bool
    ) -> None:
        if self.store is not None and store_requested:
            await self.store.put(record)
            if after is not None:
                self.known.keep(record.owner, after, replacing=before)

    def forget(self, response_id: str) -> None:
        """Stored responses stay: another client may continue them."""


class ConnectionHistory:
    """One connection's own responses (the newest ``limit``), then the store's."""

    def __init__(self, store: StoreHistory, *, limit: int = CONNECTION_RESPONSES_KEPT) -> None:
        self._store = store
        self._limit = limit
        self._conversations: OrderedDict[str, Conversation] = OrderedDict()

    def keeps_responses(self, store_requested: bool) -> bool:
        return True

    async def conversation(self, previous_response_id: str, owner: str | None) -> Conversation:
        held = self._conversations.get(previous_response_id)
        if held is not None:
            self._conversations.move_to_end(previous_response_id)
            return held
        if self._store.store is None:
            # Without a store, this connection is the only place a response could be.
            raise PreviousResponseNotFound(previous_response_id)
        return await self._store.conversation(previous_response_id, owner)

    async def keep(
        self, record: StoredResponse, *, before: Conversation, after: Conversation | None, store_requested: bool
    ) -> None:
        # ``after`` is None only for an output that is not an item (the gateway's bug):
        # held nowhere, a continuation finds the store's copy, or that it is not there.
        if after is not None:
            self._conversations[record.id] = after
            self._conversations.move_to_end(record.id)
            while len(self._conversations) > self._limit:
                self._conversations.popitem(last=False)
        await self._store.keep(record, before=before, after=after, store_requested=store_requested)

    def forget(self, response_id: str) -> None:
        self._conversations.pop(response_id, None)
