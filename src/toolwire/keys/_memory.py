"""``MemoryKeyStore``: keys in this process's memory. The fake beside SQLite and Redis,
and the store of a gateway run with ``--store memory://`` (keys made over the admin API)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from ._base import KeyIdTaken
from ._errors import KeyNameTaken
from ._limits import (
    LEASE_SECONDS,
    Admitted,
    Bucket,
    LimitState,
    Refused,
    TokenUsage,
    charge_tokens,
    decide,
)
from ._model import ClientKey, UsageRow


class MemoryKeyStore:
    """A ``KeyStore`` in a few dicts; ``clock`` (seconds since the epoch) is injectable."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._keys: dict[str, ClientKey] = {}
        self._active: dict[str, str] = {}  # name -> id
        self._requests: dict[str, Bucket] = {}
        self._tokens: dict[str, Bucket] = {}
        self._used: dict[str, int] = {}
        self._leases: dict[str, dict[str, float]] = {}  # id -> lease id -> expires at
        self._usage: dict[tuple[str, str], UsageRow] = {}

    def __repr__(self) -> str:
        return "MemoryKeyStore()"

    async def create(self, key: ClientKey) -> None:
        if key.name in self._active:
            raise KeyNameTaken(key.name)
        if key.id in self._keys:
            raise KeyIdTaken(key.id)
        self._keys[key.id] = key
        self._active[key.name] = key.id

    async def find(self, key_id: str) -> ClientKey | None:
        return self._keys.get(key_id)

    async def keys(self) -> list[ClientKey]:
        return sorted(self._keys.values(), key=lambda key: key.created_at)

    async def revoke(self, name: str) -> ClientKey | None:
        key_id = self._active.pop(name, None)
        if key_id is None:
            return None
        revoked = replace(self._keys[key_id], revoked_at=self._clock())
        self._keys[key_id] = revoked
        return revoked

    async def has_keys(self) -> bool:
        return bool(self._keys)

    async def admit(self, key: ClientKey, lease_id: str | None) -> Admitted | Refused:
        now = self._clock()
        leases = self._leases.setdefault(key.id, {})
        for expired in [lease for lease, expires_at in leases.items() if expires_at <= now]:
            del leases[expired]
        state = LimitState(self._requests.get(key.id), self._tokens.get(key.id), self._used.get(key.id, 0), len(leases))
        decision = decide(key.limits, state, now)
        if isinstance(decision, Admitted):
            if decision.requests is not None:
                self._requests[key.id] = decision.requests
            if lease_id is not None:
                leases[lease_id] = now + LEASE_SECONDS
        return decision

    async def settle(self, key: ClientKey, lease_id: str | None, model: str, usage: TokenUsage) -> None:
        now = self._clock()
        if lease_id is not None:
            self._leases.get(key.id, {}).pop(lease_id, None)
        tokens = charge_tokens(key.limits, self._tokens.get(key.id), usage.total, now)
        if tokens is not None:
            self._tokens[key.id] = tokens
        self._used[key.id] = self._used.get(key.id, 0) + usage.total
        row = self._usage.get((key.id, model), UsageRow(key.id, model))
        self._usage[(key.id, model)] = UsageRow(
            key.id,
            model,
            row.requests + 1,
            row.input_tokens + usage.input_tokens,
            row.output_tokens + usage.output_tokens,
            row.cached_tokens + usage.cached_tokens,
            now,
        )

    async def renew(self, leases: Sequence[tuple[str, str]]) -> None:
        expires_at = self._clock() + LEASE_SECONDS
        for key_id, lease_id in leases:
            held = self._leases.get(key_id, {})
            if lease_id in held:
                held[lease_id] = expires_at

    async def usage(self) -> list[UsageRow]:
        return list(self._usage.values())

    async def aclose(self) -> None:
        return None
