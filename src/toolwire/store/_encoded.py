"""``EncodedStore``: what the memory, SQLite and Redis stores share, written once.

Each keeps a record as the bytes ``encode_record`` makes, gives it back through
``decode_record``, and walks a chain newest first, from the response named back to
its first ancestor; the conversation is then assembled oldest first (``conversation_of``).
A store says only how it keeps and finds those bytes: ``_put_encoded``,
``_get_encoded`` and ``_chain_encoded`` (which also refreshes every response of the
chain and raises ``PreviousResponseNotFound`` or the too-long error itself, and gives
the records or only their ids: ``chain_ids``). A chain is walked by each record's
``link``: its previous response, or the record its input builds on.

When a record building on another's input is written, a store checks that the input it
builds on is whole, and refreshes those records *after* writing it, so that they are
evicted after it; its ``delete`` splices a record's items into the records building on
it first.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from ._base import (
    InputNotWhole,
    ItemDict,
    PreviousResponseNotFound,
    StoredResponse,
    conversation_of,
    decode_record,
    encode_record,
)


class EncodedStore(ABC):
    """A ``ResponseStore`` over a store of encoded records."""

    _bytes_seen: int | None = None
    """What ``bytes_seen`` answers: a store that learns its byte total from its writes and
    deletes keeps it here."""

    @property
    def bytes_seen(self) -> int | None:
        """The store's byte total as this process last saw it (``ResponseStore.bytes_seen``)."""
        return self._bytes_seen

    async def put(self, record: StoredResponse) -> bool:
        """Store ``record`` (it counts as just used, and so do the records it builds on);
        False, with nothing written, when its input builds on records no longer whole here."""
        builds_on = record.input_base is not None
        return await self._put_encoded(record.id, record.link, encode_record(record), builds_on=builds_on)

    async def get(self, response_id: str) -> StoredResponse | None:
        """The record, or None if it never existed, expired, was evicted or deleted."""
        data = await self._get_encoded(response_id)
        return None if data is None else decode_record(data)

    async def chain_input(self, previous_response_id: str) -> list[ItemDict]:
        """The whole conversation up to and including ``previous_response_id``."""
        newest_first = await self._chain_encoded(previous_response_id)
        return conversation_of([decode_record(data) for data in reversed(newest_first)])

    async def input_of(self, record: StoredResponse) -> list[ItemDict]:
        """The whole input of ``record``: the records its input builds on walked back (and
        refreshed, as a chain is), then its own items."""
        if record.input_base is None:
            return list(record.input_items)
        try:
            newest_first = await self._chain_encoded(record.input_base)
        except PreviousResponseNotFound as gone:
            raise InputNotWhole(record.id, gone.missing_id) from None
        chain = [*(decode_record(data) for data in reversed(newest_first)), record]
        return conversation_of(chain, last_output=False)

    async def chain_ids(self, previous_response_id: str) -> tuple[str, ...]:
        """The ids of the chain's responses, oldest first, walked as ``chain_input`` walks it."""
        return tuple(reversed(await self._chain_encoded(previous_response_id, records=False)))

    @abstractmethod
    async def _put_encoded(self, response_id: str, link: str | None, data: bytes, *, builds_on: bool) -> bool:
        """Keep ``data`` under ``response_id``, as just used; ``link``: the record it follows
        on from. ``builds_on``: its input builds on ``link``'s, whose chain must then be whole
        (else nothing is written, and False returned), and is refreshed after it; trimming
        the store to its bounds then leaves alone the record and what was used after it."""

    @abstractmethod
    async def _get_encoded(self, response_id: str) -> bytes | str | None:
        """The bytes kept under ``response_id``, if it is live."""

    @abstractmethod
    async def _chain_encoded(self, previous_response_id: str, *, records: bool = True) -> Sequence[Any]:
        """The chain's records (bytes), newest first, each refreshed as just used; with
        ``records`` false, their ids (str) instead."""
