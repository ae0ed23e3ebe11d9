"""``EncodedStore``: what the memory, SQLite and Redis stores share, written once.

Each keeps a record as the bytes ``encode_record`` makes, gives it back through
``decode_record``, and walks a chain newest first, from the response named back to
its first ancestor; the conversation is then assembled oldest first (``conversation_of``).
A store says only how it keeps and finds those bytes: ``_put_encoded``,
``_get_encoded`` and ``_chain_encoded`` (which also refreshes every response of the
chain and raises ``PreviousResponseNotFound`` or the too-long error itself, and gives
the records or only their ids: ``chain_ids``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from ._base import ItemDict, StoredResponse, conversation_of, decode_record, encode_record


class EncodedStore(ABC):
    """A ``ResponseStore`` over a store of encoded records."""

    _bytes_seen: int | None = None
    """What ``bytes_seen`` answers: a store that learns its byte total from its writes and
    deletes keeps it here."""

    @property
    def bytes_seen(self) -> int | None:
        """The store's byte total as this process last saw it (``ResponseStore.bytes_seen``)."""
        return self._bytes_seen

    async def put(self, record: StoredResponse) -> None:
        """Store ``record`` (it counts as just used)."""
        await self._put_encoded(record.id, record.previous_response_id, encode_record(record))

    async def get(self, response_id: str) -> StoredResponse | None:
        """The record, or None if it never existed, expired, was evicted or deleted."""
        data = await self._get_encoded(response_id)
        return None if data is None else decode_record(data)

    async def chain_input(self, previous_response_id: str) -> list[ItemDict]:
        """The whole conversation up to and including ``previous_response_id``."""
        newest_first = await self._chain_encoded(previous_response_id)
        return conversation_of([decode_record(data) for data in reversed(newest_first)])

    async def chain_ids(self, previous_response_id: str) -> tuple[str, ...]:
        """The ids of the chain's responses, oldest first, walked as ``chain_input`` walks it."""
        return tuple(reversed(await self._chain_encoded(previous_response_id, records=False)))

    @abstractmethod
    async def _put_encoded(self, response_id: str, previous_response_id: str | None, data: bytes) -> None:
        """Keep ``data`` under ``response_id``, as just used."""

    @abstractmethod
    async def _get_encoded(self, response_id: str) -> bytes | str | None:
        """The bytes kept under ``response_id``, if it is live."""

    @abstractmethod
    async def _chain_encoded(self, previous_response_id: str, *, records: bool = True) -> Sequence[Any]:
        """The chain's records (bytes), newest first, each refreshed as just used; with
        ``records`` false, their ids (str) instead."""
