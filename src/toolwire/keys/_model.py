"""The records a key store keeps: ``ClientKey`` (one key, without its secret) and
``UsageRow`` (what one key used of one model)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from ._format import KeyDigest, visible_prefix
from ._limits import Limits

KeyStatus = Literal["active", "revoked", "expired"]

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")
"""A key's name: what people and ``/metrics`` call it (a Prometheus label value)."""


def check_name(name: str) -> str:
    """``name`` if it is a valid key name, else ``ValueError`` saying what one looks like."""
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a key name: use 1 to 64 letters, digits and . _ @ + -, starting with a letter or digit"
        )
    return name


@dataclass(frozen=True, slots=True)
class ClientKey:
    """One client key as the store keeps it: its id, name, digest, rules and life.

    ``models`` is None when the key may use every model. Times are seconds since the
    epoch; ``expires_at`` and ``revoked_at`` are None until they apply.
    """

    id: str
    name: str
    digest: KeyDigest
    limits: Limits = field(default_factory=Limits)
    models: tuple[str, ...] | None = None
    created_at: float = 0.0
    expires_at: float | None = None
    revoked_at: float | None = None

    @property
    def prefix(self) -> str:
        """``twk_<id>``, the part of the key that may be shown."""
        return visible_prefix(self.id)

    def status(self, now: float) -> KeyStatus:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and now >= self.expires_at:
            return "expired"
        return "active"

    def may_use(self, model: str) -> bool:
        return self.models is None or model in self.models

    def describe(self, now: float) -> dict[str, Any]:
        """The key as ``keys list`` and the admin API show it: no salt, no digest."""
        limits = self.limits
        return {
            "name": self.name,
            "prefix": self.prefix,
            "status": self.status(now),
            "models": list(self.models) if self.models is not None else None,
            "rpm": limits.requests_per_minute,
            "tpm": limits.tokens_per_minute,
            "max_concurrent": limits.max_concurrent,
            "budget_tokens": limits.budget_tokens,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "revoked_at": self.revoked_at,
        }


@dataclass(frozen=True, slots=True)
class UsageRow:
    """What one key used of one model, over its life."""

    key_id: str
    model: str
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    last_used_at: float | None = None
