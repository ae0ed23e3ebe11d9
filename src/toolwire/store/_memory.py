"""``MemoryResponseStore``: responses in this process's memory, least recently used first out.

The fake beside SQLite and Redis, and the store for a single short-lived gateway.
Records are kept encoded, exactly as the persistent stores keep them, so a caller
that mutates what it read cannot change what is stored. Their bytes count towards
``max_bytes``, as the persistent stores count theirs.

Because writing and continuing a response both refresh its time to live *and* move it
to the end of the eviction order, that order is also the expiry order: expired
records are always at the front, and purging them never scans live ones.

Deleting a record that others build on (``input_base``) finds them by looking through
every entry: deletions are rare, and no index then costs every write.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._base import PreviousResponseNotFound, check_chain_length, decode_record, spliced_encoded
from ._encoded import EncodedStore


@dataclass(slots=True)
class _Entry:
    data: bytes
    link: str | None
    expires_at: float


class MemoryResponseStore(EncodedStore):
    """A bounded in-memory ``ResponseStore``: at most ``max_entries`` records of at most
    ``max_bytes`` in all (the newest is kept whatever its size), each for ``ttl_seconds``.

    ``clock`` (seconds, monotonic) is injectable for tests.
    """

    def __init__(
        self,
        *,
        ttl_seconds: float | None,
        max_entries: int | None,
        max_bytes: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0

    def __repr__(self) -> str:
        return (
            f"MemoryResponseStore(ttl_seconds={self.ttl_seconds}, max_entries={self.max_entries}, "
            f"max_bytes={self.max_bytes})"
        )

    async def _put_encoded(self, response_id: str, link: str | None, data: bytes, *, builds_on: bool) -> bool:
        now = self._clock()
        self._purge_expired(now)
        base_chain: list[str] = []
        if builds_on and link is not None:
            try:
                base_chain = self._walk(link, now)
            except PreviousResponseNotFound:
                return False
        self._remove(response_id)
        self._entries[response_id] = _Entry(data, link, self._expiry(now))
        self._bytes += len(data)
        self._refresh(base_chain, now)  # after the record: evicted after it
        max_entries, max_bytes = self.max_entries, self.max_bytes
        while (oldest := next(iter(self._entries))) != response_id and (
            (max_entries is not None and len(self._entries) > max_entries)
            or (max_bytes is not None and self._bytes > max_bytes)
        ):
            self._remove(oldest)
        return True

    async def _get_encoded(self, response_id: str) -> bytes | None:
        entry = self._live(response_id, self._clock())
        return entry.data if entry else None

    async def delete(self, response_id: str) -> bool:
        entry = self._live(response_id, self._clock())
        if entry is None:
            return False
        base = decode_record(entry.data)
        for later in self._entries.values():
            if later.link == response_id and (built := spliced_encoded(later.data, base)) is not None:
                whole, data = built
                self._bytes += len(data) - len(later.data)
                later.data, later.link = data, whole.link
        self._remove(response_id)
        return True

    async def stored_bytes(self) -> int:
        """The bytes of the records kept."""
        return self._bytes

    @property
    def bytes_seen(self) -> int:
        return self._bytes

    async def _chain_encoded(self, previous_response_id: str, *, records: bool = True) -> list[Any]:
        now = self._clock()
        newest_first = self._walk(previous_response_id, now)
        self._refresh(newest_first, now)
        return [self._entries[response_id].data for response_id in newest_first] if records else newest_first

    def _walk(self, response_id: str, now: float) -> list[str]:
        """The ids of the chain ending at ``response_id``, newest first."""
        newest_first: list[str] = []
        next_id: str | None = response_id
        while next_id is not None:
            check_chain_length(response_id, len(newest_first) + 1)
            entry = self._live(next_id, now)
            if entry is None:
                raise PreviousResponseNotFound(response_id, next_id)
            newest_first.append(next_id)
            next_id = entry.link
        return newest_first

    def _refresh(self, newest_first: list[str], now: float) -> None:
        """Mark a chain used, newest first: the oldest ends up evicted last."""
        for response_id in newest_first:
            entry = self._entries[response_id]
            entry.expires_at = self._expiry(now)
            self._entries.move_to_end(response_id)

    async def aclose(self) -> None:
        self._entries.clear()
        self._bytes = 0

    def _live(self, response_id: str, now: float) -> _Entry | None:
        entry = self._entries.get(response_id)
        if entry is not None and entry.expires_at <= now:
            self._remove(response_id)
            return None
        return entry

    def _remove(self, response_id: str) -> None:
        entry = self._entries.pop(response_id, None)
        if entry is not None:
            self._bytes -= len(entry.data)

    def _expiry(self, now: float) -> float:
        return now + self.ttl_seconds if self.ttl_seconds is not None else float("inf")

    def _purge_expired(self, now: float) -> None:
        while self._entries:
            oldest_id, oldest = next(iter(self._entries.items()))
            if oldest.expires_at > now:
                return
            self._remove(oldest_id)
