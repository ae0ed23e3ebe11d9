"""``RedisKeyStore``: keys, limits and usage in Redis, shared by every gateway using it.

Layout, under the stored responses' key prefix (``toolwire:``)::

    {prefix}client-key:{id}          hash: the key (name, salt, digest, models, limits, times)
    {prefix}client-key-names         hash: name -> id of the active key of that name
    {prefix}client-key-ids           set of every key id ever created
    {prefix}client-key-limits:{id}   hash: requests_level/_at, tokens_level/_at, used_tokens
    {prefix}client-key-leases:{id}   sorted set: lease id scored by when it expires
    {prefix}client-key-usage:{id}    hash: "<counter>\\x1f<model>" -> count (and last use)

Creating, revoking, admitting and settling are one Lua script each, so every gateway
sees one key's limits, and two gateways cannot both take a key's last request or
concurrency slot. The admission script is ``_limits.decide`` in Lua, on Redis's own
clock (``TIME``), so gateways on different hosts agree on it; tests may pass a clock.

Failures become ``StoreUnavailable`` naming the store (never its password), as in the
response store; commands have bounded timeouts and are retried once on a new connection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast, get_args

import orjson

from toolwire.store import (
    DEFAULT_REDIS_KEY_PREFIX,
    DEFAULT_REDIS_SOCKET_TIMEOUT_SECONDS,
    RedisServer,
    StoreUnavailable,
)

from ._base import KeyIdTaken
from ._errors import KeyNameTaken
from ._format import KeyDigest
from ._limits import LEASE_SECONDS, Admitted, LimitName, Limits, Refused, TokenUsage
from ._model import ClientKey, UsageRow

T = TypeVar("T")

_SEPARATOR = "\x1f"
_LIMIT_NAMES = get_args(LimitName)

# Shared by the scripts: the clock (ARGV[1], or Redis's TIME when empty), a number as
# exact text, and a bucket's level refilled since it was measured (_limits.level).
_COMMON = """
local function clock(given)
    if given ~= '' then return tonumber(given) end
    local t = redis.call('TIME')
    return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local function exact(x) return string.format('%.17g', x) end
local function level(stored_level, stored_at, per_minute, now)
    if not stored_level then return per_minute end
    local elapsed = now - stored_at
    if elapsed < 0 then elapsed = 0 end
    local refilled = stored_level + elapsed * per_minute / 60
    if refilled > per_minute then return per_minute end
    return refilled
end
"""

# KEYS: names, ids, record.  ARGV: name, id, field, value, ...
_CREATE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 'name_taken' end
if redis.call('EXISTS', KEYS[3]) == 1 then return 'id_taken' end
redis.call('HSET', KEYS[3], unpack(ARGV, 3))
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[2])
return 'ok'
"""

# KEYS: names.  ARGV: now or '', name, record key prefix.  Returns the revoked id, or false.
_REVOKE = (
    _COMMON
    + """
local id = redis.call('HGET', KEYS[1], ARGV[2])
if not id then return false end
redis.call('HSET', ARGV[3] .. id, 'revoked_at', exact(clock(ARGV[1])))
redis.call('HDEL', KEYS[1], ARGV[2])
return id
"""
)

# KEYS: limits, leases.  ARGV: now or '', rpm, tpm, max_concurrent, budget ('' = none),
# lease id ('' = none), lease seconds.  Returns {outcome, retry after}: 'ok' or the limit.
_ADMIT = (
    _COMMON
    + """
local now = clock(ARGV[1])
local rpm, tpm, max_concurrent, budget = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local state = redis.call('HMGET', KEYS[1], 'requests_level', 'requests_at', 'tokens_level', 'tokens_at', 'used_tokens')
if budget and (tonumber(state[5]) or 0) >= budget then return {'budget_tokens', ''} end
if max_concurrent then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', exact(now))
    if redis.call('ZCARD', KEYS[2]) >= max_concurrent then return {'max_concurrent', '1'} end
end
if tpm then
    local tokens = level(tonumber(state[3]), tonumber(state[4]), tpm, now)
    if tokens < 1 then return {'tokens_per_minute', exact((1 - tokens) * 60 / tpm)} end
end
if rpm then
    local requests = level(tonumber(state[1]), tonumber(state[2]), rpm, now)
    if requests < 1 then return {'requests_per_minute', exact((1 - requests) * 60 / rpm)} end
    redis.call('HSET', KEYS[1], 'requests_level', exact(requests - 1), 'requests_at', exact(now))
end
if max_concurrent and ARGV[6] ~= '' then
    redis.call('ZADD', KEYS[2], exact(now + tonumber(ARGV[7])), ARGV[6])
end
return {'ok', ''}
"""
)

# KEYS: limits, leases, usage.  ARGV: now or '', tpm ('' = none), lease id ('' = none),
# model, input, output, cached tokens.
_SETTLE = (
    _COMMON
    + """
local now = clock(ARGV[1])
if ARGV[3] ~= '' then redis.call('ZREM', KEYS[2], ARGV[3]) end
local input, output, cached = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local tpm = tonumber(ARGV[2])
if tpm then
    local state = redis.call('HMGET', KEYS[1], 'tokens_level', 'tokens_at')
    local tokens = level(tonumber(state[1]), tonumber(state[2]), tpm, now)
    redis.call('HSET', KEYS[1], 'tokens_level', exact(tokens - input - output), 'tokens_at', exact(now))
end
redis.call('HINCRBY', KEYS[1], 'used_tokens', input + output)
local model = ARGV[4]
redis.call('HINCRBY', KEYS[3], 'requests\\31' .. model, 1)
redis.call('HINCRBY', KEYS[3], 'input_tokens\\31' .. model, input)
redis.call('HINCRBY', KEYS[3], 'output_tokens\\31' .. model, output)
redis.call('HINCRBY', KEYS[3], 'cached_tokens\\31' .. model, cached)
redis.call('HSET', KEYS[3], 'last_used_at\\31' .. model, exact(now))
return 1
"""
)

# KEYS: the leases sets.  ARGV: now or '', lease seconds, a lease id per key.
_RENEW = (
    _COMMON
    + """
local expires_at = exact(clock(ARGV[1]) + tonumber(ARGV[2]))
for i, leases in ipairs(KEYS) do
    redis.call('ZADD', leases, 'XX', expires_at, ARGV[i + 2])
end
return 1
"""
)


class RedisKeyStore:
    """A ``KeyStore`` in the Redis server at ``url``; ``clock`` replaces Redis's ``TIME``
    (for tests only: gateways on several hosts must share one clock, Redis's)."""

    def __init__(
        self,
        url: str,
        *,
        key_prefix: str = DEFAULT_REDIS_KEY_PREFIX,
        socket_timeout: float = DEFAULT_REDIS_SOCKET_TIMEOUT_SECONDS,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._server = RedisServer(url, what="key store", socket_timeout=socket_timeout)
        self.display_url = self._server.display_url
        self._client = self._server.client
        self._clock = clock
        self._prefix = f"{key_prefix}client-key"
        self._names = f"{self._prefix}-names"
        self._ids = f"{self._prefix}-ids"
        self._create = self._server.script(_CREATE)
        self._revoke = self._server.script(_REVOKE)
        self._admit = self._server.script(_ADMIT)
        self._settle = self._server.script(_SETTLE)
        self._renew = self._server.script(_RENEW)

    def __repr__(self) -> str:
        return f"RedisKeyStore({self.display_url!r})"

    async def create(self, key: ClientKey) -> None:
        fields = [part for pair in _fields_of(key).items() for part in pair]
        outcome = await self._server.call(
            lambda: self._create(keys=[self._names, self._ids, self._record(key.id)], args=[key.name, key.id, *fields])
        )
        if outcome == b"name_taken":
            raise KeyNameTaken(key.name)
        if outcome == b"id_taken":
            raise KeyIdTaken(key.id)

    async def find(self, key_id: str) -> ClientKey | None:
        fields = cast("dict[bytes, bytes]", await self._server.call(lambda: self._client.hgetall(self._record(key_id))))
        return _key_of(fields) if fields else None

    async def keys(self) -> list[ClientKey]:
        async def everything() -> list[dict[bytes, bytes]]:
            ids = sorted(cast("set[bytes]", await self._client.smembers(self._ids)))
            async with self._client.pipeline(transaction=False) as pipe:
                for key_id in ids:
                    pipe.hgetall(self._record(key_id.decode()))
                found: list[dict[bytes, bytes]] = await pipe.execute()
                return found

        found = await self._server.call(everything)
        return sorted((_key_of(fields) for fields in found if fields), key=lambda key: (key.created_at, key.id))

    async def revoke(self, name: str) -> ClientKey | None:
        revoked = await self._server.call(
            lambda: self._revoke(keys=[self._names], args=[self._now(), name, f"{self._prefix}:"])
        )
        return None if not revoked else await self.find(revoked.decode())

    async def has_keys(self) -> bool:
        return bool(await self._server.call(lambda: self._client.exists(self._ids)))

    async def admit(self, key: ClientKey, lease_id: str | None) -> Admitted | Refused:
        limits = key.limits
        outcome, retry_after = await self._server.call(
            lambda: self._admit(
                keys=[self._limits(key.id), self._leases(key.id)],
                args=[
                    self._now(),
                    _optional(limits.requests_per_minute),
                    _optional(limits.tokens_per_minute),
                    _optional(limits.max_concurrent),
                    _optional(limits.budget_tokens),
                    lease_id or "",
                    LEASE_SECONDS,
                ],
            )
        )
        if outcome == b"ok":
            return Admitted(None)  # the script stored the request bucket itself
        limit = outcome.decode()
        if limit not in _LIMIT_NAMES:
            raise StoreUnavailable(f"The key store {self.display_url} answered an admission with {limit!r}.")
        return Refused(cast("LimitName", limit), float(retry_after) if retry_after else None)

    async def settle(self, key: ClientKey, lease_id: str | None, model: str, usage: TokenUsage) -> None:
        await self._server.call(
            lambda: self._settle(
                keys=[self._limits(key.id), self._leases(key.id), self._usage(key.id)],
                args=[
                    self._now(),
                    _optional(key.limits.tokens_per_minute),
                    lease_id or "",
                    model,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cached_tokens,
                ],
            )
        )

    async def renew(self, leases: Sequence[tuple[str, str]]) -> None:
        if not leases:
            return
        await self._server.call(
            lambda: self._renew(
                keys=[self._leases(key_id) for key_id, _ in leases],
                args=[self._now(), LEASE_SECONDS, *(lease_id for _, lease_id in leases)],
            )
        )

    async def usage(self) -> list[UsageRow]:
        async def everything() -> list[tuple[str, dict[bytes, bytes]]]:
            ids = sorted(key_id.decode() for key_id in cast("set[bytes]", await self._client.smembers(self._ids)))
            async with self._client.pipeline(transaction=False) as pipe:
                for key_id in ids:
                    pipe.hgetall(self._usage(key_id))
                return list(zip(ids, await pipe.execute(), strict=True))

        rows: list[UsageRow] = []
        for key_id, fields in await self._server.call(everything):
            rows.extend(_usage_rows(key_id, fields))
        return rows

    async def aclose(self) -> None:
        await self._server.aclose()

    def _record(self, key_id: str) -> str:
        return f"{self._prefix}:{key_id}"

    def _limits(self, key_id: str) -> str:
        return f"{self._prefix}-limits:{key_id}"

    def _leases(self, key_id: str) -> str:
        return f"{self._prefix}-leases:{key_id}"

    def _usage(self, key_id: str) -> str:
        return f"{self._prefix}-usage:{key_id}"

    def _now(self) -> str:
        return "" if self._clock is None else repr(self._clock())


def _optional(value: int | None) -> str:
    return "" if value is None else str(value)


def _fields_of(key: ClientKey) -> dict[str, str]:
    limits = key.limits
    return {
        "name": key.name,
        "salt": key.digest.salt.hex(),
        "digest": key.digest.digest.hex(),
        "models": "" if key.models is None else orjson.dumps(list(key.models)).decode(),
        "rpm": _optional(limits.requests_per_minute),
        "tpm": _optional(limits.tokens_per_minute),
        "max_concurrent": _optional(limits.max_concurrent),
        "budget_tokens": _optional(limits.budget_tokens),
        "created_at": repr(key.created_at),
        "expires_at": "" if key.expires_at is None else repr(key.expires_at),
        "revoked_at": "" if key.revoked_at is None else repr(key.revoked_at),
        "id": key.id,
    }


def _key_of(raw: dict[bytes, bytes]) -> ClientKey:
    fields = {name.decode(): value.decode() for name, value in raw.items()}

    def number(name: str) -> int | None:
        return int(fields[name]) if fields.get(name) else None

    def moment(name: str) -> float | None:
        return float(fields[name]) if fields.get(name) else None

    models = fields.get("models")
    return ClientKey(
        id=fields["id"],
        name=fields["name"],
        digest=KeyDigest(bytes.fromhex(fields["salt"]), bytes.fromhex(fields["digest"])),
        limits=Limits(number("rpm"), number("tpm"), number("max_concurrent"), number("budget_tokens")),
        models=tuple(orjson.loads(models)) if models else None,
        created_at=float(fields["created_at"]),
        expires_at=moment("expires_at"),
        revoked_at=moment("revoked_at"),
    )


def _usage_rows(key_id: str, raw: dict[bytes, bytes]) -> list[UsageRow]:
    by_model: dict[str, dict[str, Any]] = {}
    for field, value in raw.items():
        counter, _, model = field.decode().partition(_SEPARATOR)
        by_model.setdefault(model, {})[counter] = value.decode()
    rows = []
    for model in sorted(by_model):
        values = by_model[model]
        last_used = values.get("last_used_at")
        rows.append(
            UsageRow(
                key_id,
                model,
                requests=int(values.get("requests", 0)),
                input_tokens=int(values.get("input_tokens", 0)),
                output_tokens=int(values.get("output_tokens", 0)),
                cached_tokens=int(values.get("cached_tokens", 0)),
                last_used_at=float(last_used) if last_used else None,
            )
        )
    return rows
