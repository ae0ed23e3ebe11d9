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

Gateways behind one load balancer share the store, and the turns of one conversation
come to them in turn: a gateway then holds the conversation as it was a turn or a few
ago. It reads only the responses added since (``CATCH_UP_RESPONSES`` at most, each by
itself), parses them onto what it holds, and translates only what is new, as for its own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import orjson

from toolwire.errors import RequestError
from toolwire.protocol import HistoryLink, Item, KnownHistory, KnownItems, parse_item
from toolwire.protocol._history import WEIGHT_PER_BODY_BYTE
from toolwire.store import ItemDict, PreviousResponseNotFound, ResponseStore, StoredResponse

CONNECTION_RESPONSES_KEPT = 8
"""Responses one connection remembers (the newest; a client continues the last one)."""

CATCH_UP_RESPONSES = 8
"""The most responses a kept conversation is caught up by, each read from the store alone
(more are read with the rest of the chain, in one walk)."""


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

    def caught_up(self, records: Sequence[StoredResponse]) -> Conversation | None:
        """This conversation continued by ``records`` (oldest first), responses the gateway
        did not answer itself: their items parsed onto this conversation's, the translation's
        state still this conversation's (the next request walks their items once). None
        when an item does not parse."""
        conversation = self
        for record in records:
            grown = conversation.grown(record)
            if grown is None:
                return None
            conversation = grown
        return Conversation(conversation.chain, conversation.items, self.walked, conversation.weight)


EMPTY = Conversation((), ())
"""The conversation before a first request."""


@dataclass(frozen=True, slots=True)
class StoredInput:
    """Where one owner's response stored a known history's items as its whole input: the
    response ``response_id``, whose input is spread over ``records`` records (its own and
    those it builds on). Noted on the history (``KnownHistory.derived``, under the owner:
    another's records are never built on), so that the record of a request resending those
    items builds on that one's (``StoredResponse.input_base``) and holds only its new ones."""

    response_id: str
    records: int

    @staticmethod
    def of(known: KnownHistory | KnownItems, owner: str | None) -> StoredInput | None:
        """What was noted on ``known`` for ``owner``, if anything."""
        noted: StoredInput | None = known.derived.get((StoredInput, owner))
        return noted

    def note(self, known: KnownHistory | KnownItems, owner: str | None) -> None:
        """Note this on ``known`` for ``owner`` (in place of what was noted before)."""
        known.derived[(StoredInput, owner)] = self


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
        self.caught_up = 0
        """Continuations that found their conversation kept as it was a few responses before,
        and read only those responses."""

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

    def kept_before(self, chain: tuple[str, ...], owner: str | None) -> Conversation | None:
        """The longest of ``owner``'s kept conversations that the responses ``chain``
        continue (its chain a shorter start of ``chain``), if it lacks at most
        ``CATCH_UP_RESPONSES`` of them; else None."""
        with self._lock:
            for length in range(len(chain) - 1, max(0, len(chain) - 1 - CATCH_UP_RESPONSES), -1):
                entry = self._entries.get(chain[length - 1])
                if entry is not None and entry[0] == owner and entry[1].chain == chain[:length]:
                    self._entries.move_to_end(chain[length - 1])
                    return entry[1]
        return None

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

    def builds_on_inputs(self) -> bool:
        """Whether a kept response may build on the input of one kept before
        (``StoredResponse.input_base``), holding only its items after it."""
        ...

    def keeps_conversation(self, *, resent: bool) -> bool:
        """Whether the conversation a kept response makes is kept parsed too, ready for its
        continuation; ``resent``: its request resent a history the gateway knew, without
        naming a previous response (a client that continues by resending)."""
        ...

    async def conversation(self, previous_response_id: str, owner: str | None) -> Conversation:
        """Every item up to and including ``previous_response_id``'s output, oldest first.

        Raises ``PreviousResponseNotFound`` when the response is unknown, or not ``owner``'s;
        ``RequestError`` when a kept item does not parse.
        """
        ...

    async def keep(
        self, record: StoredResponse, *, before: Conversation, after: Conversation | None, store_requested: bool
    ) -> bool:
        """Keep a finished response; ``before`` is the conversation its request continued,
        ``after`` the one it makes (None: not at hand, read from the store when continued).
        False, with nothing kept, when it builds on an input no longer stored whole."""
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

    def builds_on_inputs(self) -> bool:
        return self.store is not None

    def keeps_conversation(self, *, resent: bool) -> bool:
        # A client that resends its history has no use for it: parsing its stored form
        # again would cost every turn as much as the history is long. Continued by id
        # after all, the conversation is read from the store then.
        return not resent

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
        chain = await self.store.chain_ids(previous_response_id)
        caught_up = await self._caught_up(chain, owner, previous)
        if caught_up is not None:
            self.known.caught_up += 1
            return caught_up
        self.known.read += 1
        return Conversation.parse(chain, await self.store.chain_input(previous_response_id))

    async def _caught_up(self, chain: tuple[str, ...], owner: str | None, last: StoredResponse) -> Conversation | None:
        """The conversation of ``chain``, from one kept as it was a few responses before
        (``last`` is the chain's newest record, read already) and those responses read one
        by one; it is kept in place of the one it grew from. None when none is kept, or a
        record is gone (then reading the chain says where), does not parse, or builds on an
        input (a client that resent its history, continuing by id after all)."""
        assert self.store is not None
        kept = self.known.kept_before(chain, owner)
        if kept is None:
            return None
        records: list[StoredResponse] = []
        for response_id in chain[len(kept.chain) : -1]:
            record = await self.store.get(response_id)
            if record is None:
                return None
            records.append(record)
        if any(record.input_base is not None for record in (*records, last)):
            return None  # built on an input, not on a conversation: read whole
        caught_up = kept.caught_up([*records, last])
        if caught_up is not None:
            self.known.keep(owner, caught_up, replacing=kept)
        return caught_up

    async def keep(
        self, record: StoredResponse, *, before: Conversation, after: Conversation | None, store_requested: bool
    ) -> bool:
        if self.store is None or not store_requested:
            return True
        if not await self.store.put(record):
            return False
        if after is not None:
            self.known.keep(record.owner, after, replacing=before)
        return True

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

    def builds_on_inputs(self) -> bool:
        return False  # its conversations are made from each record's whole input

    def keeps_conversation(self, *, resent: bool) -> bool:
        return True  # without a store, the connection is the only place a response is

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
    ) -> bool:
        # ``after`` is None only for an output that is not an item (the gateway's bug):
        # held nowhere, a continuation finds the store's copy, or that it is not there.
        if after is not None:
            self._conversations[record.id] = after
            self._conversations.move_to_end(record.id)
            while len(self._conversations) > self._limit:
                self._conversations.popitem(last=False)
        return await self._store.keep(record, before=before, after=after, store_requested=store_requested)

    def forget(self, response_id: str) -> None:
        self._conversations.pop(response_id, None)
