"""Making, listing and revoking keys, and reporting their usage: what ``toolwire keys``
and the admin HTTP API both do, over any ``KeyStore``.

``KeySpec`` is a new key's request, validated the same way from flags and from JSON;
``create_key`` returns the record and the key, which is shown once and kept nowhere.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ._base import KeyIdTaken, KeyStore
from ._errors import KeyNotFound
from ._format import digest_of, new_key
from ._limits import Limits, parse_duration
from ._model import ClientKey, check_name

_CREATE_ATTEMPTS = 5


class KeySpec(BaseModel):
    """A key to create: its name, the models it may use (None: all) and its limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    models: list[str] | None = None
    rpm: int | None = Field(default=None, ge=1)
    tpm: int | None = Field(default=None, ge=1)
    max_concurrent: int | None = Field(default=None, ge=1)
    budget_tokens: int | None = Field(default=None, ge=1)
    expires: str | None = None
    """A duration from now: ``30d``, ``12h``, ``90m``, ``3600s``, ``1w``."""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        return check_name(name)

    @field_validator("models")
    @classmethod
    def _valid_models(cls, models: list[str] | None) -> list[str] | None:
        if models is None:
            return None
        cleaned = [model.strip() for model in models]
        if not cleaned or any(not model for model in cleaned):
            raise ValueError("models must name at least one model, and no empty one")
        return list(dict.fromkeys(cleaned))

    @field_validator("expires")
    @classmethod
    def _valid_duration(cls, expires: str | None) -> str | None:
        if expires is not None:
            parse_duration(expires)
        return expires

    @property
    def limits(self) -> Limits:
        return Limits(self.rpm, self.tpm, self.max_concurrent, self.budget_tokens)


async def create_key(store: KeyStore, spec: KeySpec, *, now: float | None = None) -> tuple[ClientKey, str]:
    """Make and keep a new key for ``spec``: ``(its record, the key itself)``.

    ``KeyNameTaken`` if an active key has the name."""
    now = time.time() if now is None else now
    expires_at = now + parse_duration(spec.expires) if spec.expires is not None else None
    for _ in range(_CREATE_ATTEMPTS):
        key_id, key = new_key()
        record = ClientKey(
            id=key_id,
            name=spec.name,
            digest=digest_of(key),
            limits=spec.limits,
            models=tuple(spec.models) if spec.models is not None else None,
            created_at=now,
            expires_at=expires_at,
        )
        try:
            await store.create(record)
        except KeyIdTaken:
            continue
        return record, key
    raise RuntimeError(f"no free key id after {_CREATE_ATTEMPTS} attempts")


async def revoke_key(store: KeyStore, name: str) -> ClientKey:
    """Revoke the active key named ``name``; ``KeyNotFound`` if there is none."""
    revoked = await store.revoke(name)
    if revoked is None:
        raise KeyNotFound(name)
    return revoked


async def list_keys(store: KeyStore, *, now: float | None = None) -> list[dict[str, Any]]:
    """Every key, as ``ClientKey.describe`` shows it, oldest first."""
    now = time.time() if now is None else now
    return [key.describe(now) for key in await store.keys()]


async def usage_report(store: KeyStore, name: str | None = None, *, now: float | None = None) -> list[dict[str, Any]]:
    """One row per key and model used: the key's name, prefix and status, the model,
    ``requests``, ``input_tokens``, ``output_tokens``, ``cached_tokens``, ``last_used_at``.

    With ``name``, only the keys of that name (revoked ones too); ``KeyNotFound`` if no
    key ever had it."""
    now = time.time() if now is None else now
    keys = {key.id: key for key in await store.keys() if name is None or key.name == name}
    if name is not None and not keys:
        raise KeyNotFound(name, active=False)
    rows = []
    for row in await store.usage():
        key = keys.get(row.key_id)
        if key is None:
            continue
        rows.append(
            {
                "name": key.name,
                "prefix": key.prefix,
                "status": key.status(now),
                "model": row.model,
                "requests": row.requests,
                "input_tokens": row.input_tokens,
                "output_tokens": row.output_tokens,
                "cached_tokens": row.cached_tokens,
                "last_used_at": row.last_used_at,
            }
        )
    return sorted(rows, key=lambda row: (row["name"], row["prefix"], row["model"]))
