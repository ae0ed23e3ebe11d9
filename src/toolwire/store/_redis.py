"""``RedisResponseStore``: responses in Redis, shared by every gateway behind a load balancer.

Layout, under a key prefix (``toolwire:`` by default)::

    {prefix}response:{id}           hash {record: JSON, prev: its link or "", base: the
                                    record its input builds on or ""}, PEXPIRE ttl
    {prefix}response-builders:{id}  set of the ids building on its input (no time to live:
                                    it goes when its id leaves the index)
    {prefix}responses               sorted set of ids, scored by last use (microseconds,
                                    strictly rising)
    {prefix}response-sizes          hash {id: the record's length in bytes}, for every id of the set
    {prefix}response-bytes          the sum of those lengths

The sorted set is the eviction order: every write drops the ids whose time to live has
passed, then trims it to ``max_entries`` and to ``max_bytes`` of records (deleting the
least recently used; never the record just written, whatever its size, nor the records
its input builds on, refreshed after it). An id leaves the set, the sizes and the sum
together, so the sum stays right even when Redis itself drops a record (its time to live,
its own eviction). Writing a response, deleting one and walking a chain are one Lua script
each, so they are atomic and a chain of any length costs one round trip; walking a chain
refreshes the time to live and the place in the eviction order of every response in it.
(The scripts touch keys they compute, so this works on a single Redis server, not on Redis
Cluster.) Deleting a record that others build on takes two calls: the script answers
with their records, which are spliced here (JSON is not for Lua to rewrite: its encoder
would change numbers and empty arrays), then called again with them, and applies them
only if those records are still exactly what was read (else it answers afresh).

Redis going away is an expected event: commands have bounded socket timeouts, each is
retried once on a fresh connection (which also heals connections a restart broke),
and a failure becomes ``StoreUnavailable`` naming the store, never its password. The
client reconnects by itself on the next command once Redis is back.
"""

from __future__ import annotations

import functools
from typing import Any

from ._base import (
    MAX_CHAIN_LENGTH,
    PreviousResponseNotFound,
    StoreUnavailable,
    check_chain_length,
    decode_record,
    spliced_encoded,
)
from ._encoded import EncodedStore
from ._redis_server import DEFAULT_KEY_PREFIX, DEFAULT_SOCKET_TIMEOUT_SECONDS, RedisServer

# A score for "used now": the server's clock in microseconds, but never at or below
# the highest score already given, so the eviction order is strict.
_NOW = """
local function used_now(index)
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local top = redis.call('ZREVRANGE', index, 0, 0, 'WITHSCORES')
    if top[2] and tonumber(top[2]) >= now then now = tonumber(top[2]) + 1 end
    return now
end
"""

# The keys every script computes from the prefixes it is given: a record's hash, and the
# set of the records building on its input.
_KEYS = """
local function record_key(keys, id) return keys.records .. id end
local function builders_key(keys, id) return keys.builders .. id end
"""

# Forgets the ids given (and their sizes) from the index, the sizes and the sum; deletes
# their records, and their place among the builders of the input they built on.
_FORGET = """
local function forget(keys, ids)
    local freed = 0
    for _, id in ipairs(ids) do
        freed = freed + (tonumber(redis.call('HGET', keys.sizes, id)) or 0)
        local base = redis.call('HGET', record_key(keys, id), 'base')
        if base and base ~= '' then redis.call('SREM', builders_key(keys, base), id) end
        redis.call('HDEL', keys.sizes, id)
        redis.call('ZREM', keys.index, id)
        redis.call('DEL', record_key(keys, id), builders_key(keys, id))
    end
    if freed > 0 then redis.call('DECRBY', keys.bytes, freed) end
end
"""

# Walks the chain ending at an id, newest first, by each record's link ('prev'): returns
# the ids found and, if the walk stopped at a gap or the length limit, the id missing
# ('' for the limit), else nil. With records, each entry is {id, record}.
_WALK = """
local function walk(keys, id, limit, records)
    local found = {}
    while id ~= '' do
        if #found >= limit then return found, '' end
        local key = record_key(keys, id)
        local answer, prev
        if records then
            local fields = redis.call('HMGET', key, 'record', 'prev')
            answer, prev = fields[1], fields[2]
        else
            prev = redis.call('HGET', key, 'prev')
            answer = id
        end
        if not (answer and prev) then return found, id end
        found[#found + 1] = {id, answer}
        id = prev
    end
    return found, nil
end

-- Scores the ids of a walk as used from ``now``, newest first, each a microsecond later
-- (the oldest is evicted last), in ZADDs of up to 500 members; refreshes their time to
-- live.
local function refresh(keys, found, now, ttl_ms)
    local scores = {}
    for i, entry in ipairs(found) do
        scores[#scores + 1] = now + i - 1
        scores[#scores + 1] = entry[1]
        if #scores == 1000 then
            redis.call('ZADD', keys.index, unpack(scores))
            scores = {}
        end
        if ttl_ms > 0 then redis.call('PEXPIRE', record_key(keys, entry[1]), ttl_ms) end
    end
    if #scores > 0 then redis.call('ZADD', keys.index, unpack(scores)) end
end
"""

# KEYS: index, sizes, bytes.  ARGV: id, link or "", record, ttl ms (0: none), max entries
# (0: none), record key prefix, max bytes (0: none), "1" if its input builds on the link's,
# builders key prefix, max chain length.
# Returns {1, the bytes of the records kept, once trimmed}; or {0, ...} when the input it
# builds on is not whole (nothing written).
_PUT = (
    _NOW
    + _KEYS
    + _FORGET
    + _WALK
    + """
local keys = {index = KEYS[1], sizes = KEYS[2], bytes = KEYS[3], records = ARGV[6], builders = ARGV[9]}
local id, link, record = ARGV[1], ARGV[2], ARGV[3]
local ttl_ms = tonumber(ARGV[4])
local max_entries = tonumber(ARGV[5])
local max_bytes = tonumber(ARGV[7])
local base = ''
local base_chain = {}
if ARGV[8] == '1' then
    local missing
    base_chain, missing = walk(keys, link, tonumber(ARGV[10]), false)
    if missing then return {0, tonumber(redis.call('GET', keys.bytes)) or 0} end
    base = link
end
local now = used_now(keys.index)
local replaced = tonumber(redis.call('HGET', keys.sizes, id)) or 0
-- The record first: a Redis out of memory refuses the script's first write, before any
-- other (it lets the writes after it through, to keep a script whole).
redis.call('HSET', record_key(keys, id), 'record', record, 'prev', link, 'base', base)
redis.call('HSET', keys.sizes, id, #record)
redis.call('INCRBY', keys.bytes, #record - replaced)
if ttl_ms > 0 then
    redis.call('PEXPIRE', record_key(keys, id), ttl_ms)
    local expired = {}
    for _, old in ipairs(redis.call('ZRANGEBYSCORE', keys.index, '-inf', now - ttl_ms * 1000)) do
        if old ~= id then expired[#expired + 1] = old end  -- (written again just now)
    end
    forget(keys, expired)
end
redis.call('ZADD', keys.index, now, id)
if base ~= '' then
    redis.call('SADD', builders_key(keys, base), id)
    refresh(keys, base_chain, now + 1, ttl_ms)  -- after the record: evicted after it
end
-- Trimmed from the least recently used, but never the record nor what it builds on.
local before_it = string.format('(%.0f', now)  -- (a number joined to a string keeps 14 digits)
if max_entries > 0 then
    local excess = redis.call('ZCARD', keys.index) - max_entries
    if excess > 0 then
        forget(keys, redis.call('ZRANGEBYSCORE', keys.index, '-inf', before_it, 'LIMIT', 0, excess))
    end
end
local total = tonumber(redis.call('GET', keys.bytes))
if max_bytes > 0 then
    while total > max_bytes do
        local oldest = redis.call('ZRANGEBYSCORE', keys.index, '-inf', before_it, 'LIMIT', 0, 1)
        if #oldest == 0 then break end
        forget(keys, oldest)
        total = tonumber(redis.call('GET', keys.bytes))
    end
end
return {1, total}
"""
)

# KEYS: index, sizes, bytes.  ARGV: id, record key prefix, builders key prefix, then for
# each record building on its input: its id, its record as read, and what it becomes
# (``spliced``) with its new link ("" for none).
# Returns {"deleted", 1 if its record was live else 0, the bytes of the records kept}; or,
# when the records building on it are not exactly those given as read (the first call, or
# a write in between), nothing changed and {"builders", its record, then each builder's id
# and record} for the caller to splice and call again.
_DELETE = (
    _KEYS
    + _FORGET
    + """
local keys = {index = KEYS[1], sizes = KEYS[2], bytes = KEYS[3], records = ARGV[2], builders = ARGV[3]}
local id = ARGV[1]
local builders = {}
for _, builder in ipairs(redis.call('SMEMBERS', builders_key(keys, id))) do
    local fields = redis.call('HMGET', record_key(keys, builder), 'record', 'base')
    if fields[1] and fields[2] == id then builders[builder] = fields[1] end
end
local given = {}
local same = true
for i = 4, #ARGV, 4 do
    given[ARGV[i]] = true
    if builders[ARGV[i]] ~= ARGV[i + 1] then same = false end
end
for builder, _ in pairs(builders) do
    if not given[builder] then same = false end
end
if not same then
    local answer = {'builders', redis.call('HGET', record_key(keys, id), 'record') or ''}
    for builder, record in pairs(builders) do
        answer[#answer + 1] = builder
        answer[#answer + 1] = record
    end
    return answer
end
for i = 4, #ARGV, 4 do
    local builder, record, link = ARGV[i], ARGV[i + 2], ARGV[i + 3]
    redis.call('HSET', record_key(keys, builder), 'record', record, 'prev', link, 'base', link)
    redis.call('INCRBY', keys.bytes, #record - (tonumber(redis.call('HGET', keys.sizes, builder)) or 0))
    redis.call('HSET', keys.sizes, builder, #record)
    if link ~= '' then redis.call('SADD', builders_key(keys, link), builder) end
end
local live = redis.call('EXISTS', record_key(keys, id))
forget(keys, {id})
return {'deleted', live, tonumber(redis.call('GET', keys.bytes)) or 0}
"""
)

# KEYS: index.  ARGV: id, record key prefix, ttl ms (0: none), max chain length, "1" for
# the records or "0" for their ids, builders key prefix.
# Returns {status, missing id, record or id...} newest first; status is "ok",
# "missing" (missing id is the response that is gone) or "too_long".
# The walk reads a response's record only when the records are asked for (a record is
# its whole turn; the ids alone are what a gateway that holds the conversation asks).
_CHAIN = (
    _NOW
    + _KEYS
    + _WALK
    + """
local keys = {index = KEYS[1], records = ARGV[2], builders = ARGV[6]}
local found, missing = walk(keys, ARGV[1], tonumber(ARGV[4]), ARGV[5] == '1')
if missing == '' then return {'too_long', ''} end
if missing then return {'missing', missing} end
refresh(keys, found, used_now(keys.index), tonumber(ARGV[3]))
local result = {'ok', ''}
for _, entry in ipairs(found) do result[#result + 1] = entry[2] end
return result
"""
)


class RedisResponseStore(EncodedStore):
    """A ``ResponseStore`` in the Redis server at ``url`` (``redis://`` or ``rediss://``)."""

    def __init__(
        self,
        url: str,
        *,
        ttl_seconds: float | None,
        max_entries: int | None,
        max_bytes: int | None = None,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT_SECONDS,
    ) -> None:
        self._server = RedisServer(url, what="response store", socket_timeout=socket_timeout)
        self.display_url = self._server.display_url
        self._client = self._server.client
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._record_prefix = f"{key_prefix}response:"
        self._builders_prefix = f"{key_prefix}response-builders:"
        self._index = f"{key_prefix}responses"
        self._sizes = f"{key_prefix}response-sizes"
        self._bytes = f"{key_prefix}response-bytes"
        self._put_script = self._server.script(_PUT)
        self._delete_script = self._server.script(_DELETE)
        self._chain_script = self._server.script(_CHAIN)

    def __repr__(self) -> str:
        return f"RedisResponseStore({self.display_url!r})"

    async def _put_encoded(self, response_id: str, link: str | None, data: bytes, *, builds_on: bool) -> bool:
        written, self._bytes_seen = await self._server.call(
            lambda: self._put_script(
                keys=[self._index, self._sizes, self._bytes],
                args=[
                    response_id,
                    link or "",
                    data,
                    self._ttl_ms(),
                    self.max_entries or 0,
                    self._record_prefix,
                    self.max_bytes or 0,
                    int(builds_on),
                    self._builders_prefix,
                    MAX_CHAIN_LENGTH,
                ],
            )
        )
        return bool(written)

    async def _get_encoded(self, response_id: str) -> bytes | str | None:
        return await self._server.call(lambda: self._client.hget(self._record_prefix + response_id, "record"))

    async def delete(self, response_id: str) -> bool:
        """Forget the record, its items first given to the records building on its input:
        the script answers which those are, and is called again with them spliced, until
        no write came in between."""
        splices: list[bytes | str] = []
        for _ in range(_DELETE_ATTEMPTS):
            status, *answer = await self._server.call(
                functools.partial(
                    self._delete_script,
                    keys=[self._index, self._sizes, self._bytes],
                    args=[response_id, self._record_prefix, self._builders_prefix, *splices],
                )
            )
            if status == b"deleted":
                live, self._bytes_seen = answer
                return bool(live)
            splices = _splices(answer[0], answer[1:])
        raise StoreUnavailable(
            f"The response store {self.display_url} kept changing the responses built on "
            f"'{response_id}' while it was being deleted."
        )

    async def stored_bytes(self) -> int:
        """The bytes of the records the store counts (those of every id in its index)."""
        total = await self._server.call(lambda: self._client.get(self._bytes))
        return int(total or 0)

    async def _chain_encoded(self, previous_response_id: str, *, records: bool = True) -> list[Any]:
        newest_first: list[bytes]
        status, missing, *newest_first = await self._server.call(
            lambda: self._chain_script(
                keys=[self._index],
                args=[
                    previous_response_id,
                    self._record_prefix,
                    self._ttl_ms(),
                    MAX_CHAIN_LENGTH,
                    int(records),
                    self._builders_prefix,
                ],
            )
        )
        if status == b"missing":
            raise PreviousResponseNotFound(previous_response_id, missing.decode())
        if status == b"too_long":
            check_chain_length(previous_response_id, MAX_CHAIN_LENGTH + 1)
        return newest_first if records else [response_id.decode() for response_id in newest_first]

    async def aclose(self) -> None:
        await self._server.aclose()

    def _ttl_ms(self) -> int:
        return max(1, round(self.ttl_seconds * 1000)) if self.ttl_seconds is not None else 0


_DELETE_ATTEMPTS = 5
"""Rounds of a deletion whose builders another writer keeps changing, before it gives up."""


def _splices(base_data: bytes, builders: list[bytes]) -> list[bytes | str]:
    """The arguments that splice the record ``base_data`` into each of ``builders`` (their
    ids and records, in turn): each one's id, record as read, record spliced and new link.
    A base already gone leaves them as they are (there is nothing left to give them)."""
    base = decode_record(base_data) if base_data else None
    splices: list[bytes | str] = []
    for builder_id, data in zip(builders[::2], builders[1::2], strict=True):
        built = spliced_encoded(data, base) if base is not None else None
        whole, new = built if built is not None else (decode_record(data), data)
        splices += [builder_id, data, new, whole.link or ""]
    return splices
