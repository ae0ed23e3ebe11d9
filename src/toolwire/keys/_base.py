"""The key store seam: what the gate asks of wherever keys live.

One protocol, three stores: memory (the fake, and single-process use), SQLite (the
default, one host) and Redis (several gateways). Each write that limits depend on is
atomic in the store itself (a SQLite write transaction, a Redis Lua script), so gateway
processes sharing a store give a key its limit once, not once each. Every method may
raise ``StoreUnavailable`` (503): the gate fails closed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ._limits import Admitted, Refused, TokenUsage
from ._model import ClientKey, UsageRow


class KeyIdTaken(Exception):
    """A new key's random id is already in use: make another key (about one in 10^12)."""


class KeyStore(Protocol):
    async def create(self, key: ClientKey) -> None:
        """Keep ``key``. ``KeyNameTaken`` if an active key has its name, ``KeyIdTaken`` its id."""
        ...

    async def find(self, key_id: str) -> ClientKey | None:
        """The key with this id, whatever its status; None if there is none."""
        ...

    async def keys(self) -> list[ClientKey]:
        """Every key, revoked and expired ones too, oldest first."""
        ...

    async def revoke(self, name: str) -> ClientKey | None:
        """Revoke the active key named ``name`` (it stays, for its usage); None if none is."""
        ...

    async def has_keys(self) -> bool:
        """Whether any key was ever created here (revoked ones count: a gateway whose
        keys are all revoked must not open up)."""
        ...

    async def admit(self, key: ClientKey, lease_id: str | None) -> Admitted | Refused:
        """Decide (``_limits.decide``) and, if admitted, charge one request and take the
        concurrency lease ``lease_id`` (given when the key has ``max_concurrent``)."""
        ...

    async def settle(self, key: ClientKey, lease_id: str | None, model: str, usage: TokenUsage) -> None:
        """An admitted request is over: give back its lease, charge its tokens, count its use."""
        ...

    async def renew(self, leases: Sequence[tuple[str, str]]) -> None:
        """Extend the ``(key id, lease id)`` leases still held by ``LEASE_SECONDS`` from now."""
        ...

    async def usage(self) -> list[UsageRow]:
        """What every key used of every model."""
        ...

    async def aclose(self) -> None: ...
