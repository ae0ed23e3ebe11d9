"""``RedisResponseStore``: responses in Redis, shared by every gateway behind a load balancer.

Layout, under a key prefix (``toolwire:`` by default)::

    {prefix}response:{id}     hash {record: JSON, prev: previous response id or ""}, PEXPIRE ttl
    {prefix}responses         sorted set of ids, scored by last use (microseconds, strictly rising)
    {prefix}response-sizes    hash {id: the record's length in bytes}, for every id of the set
    {prefix}response-bytes    the sum of those lengths

The sorted set is the eviction order: every write drops the ids whose time to live has
passed, then trims it to ``max_entries`` and to ``max_bytes`` of records (deleting the
least recently used; never the record just written, whatever its size). An id leaves the
set, the sizes and the sum together, so the sum stays right even when Redis itself drops
a record (its time to live, its own eviction). Writing a response, deleting one and walking
a chain are one Lua script each, so they are atomic and a chain of any length costs one
round trip; walking a chain refreshes the time to live and the place in the eviction order
of every response in it. (The scripts touch keys they compute, so this works on a single
Redis server, not on Redis Cluster.)

Redis going away is an expected event: commands have bounded socket timeouts, each is
retried once on a fresh connection (which also heals connections a restart broke),
and a failure becomes ``StoreUnavailable`` naming the store, never its password. The
client reconnects by itself on the next command once Redis is back.
"""

from __future__ import annotations

from typing import Any

from ._base import MAX_CHAIN_LENGTH, PreviousResponseNotFound, check_chain_length
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

# Forgets the ids given (and their sizes) from the index, the sizes and the sum; deletes
# their records.
_FORGET = """
local function forget(keys, ids, record_prefix)
    local freed = 0
    for _, id in ipairs(ids) do
        freed = freed + (tonumber(redis.call('HGET', keys.sizes, id)) or 0)
        redis.call('HDEL', keys.sizes, id)
        redis.call('ZREM', keys.index, id)
        redis.call('DEL', record_prefix .. id)
    end
    if freed > 0 then redis.call('DECRBY', keys.bytes, freed) end
end
"""

# KEYS: index, record key, sizes, bytes.  ARGV: id, previous id or "", record, ttl ms
# (0: none), max entries (0: none), record key prefix, max bytes (0: none).
# Returns the bytes of the records kept, once trimmed.
_PUT = (
    _NOW
    + _FORGET
    + """
local keys = {index = KEYS[1], sizes = KEYS[3], bytes = KEYS[4]}
local now = used_now(KEYS[1])
local ttl_ms = tonumber(ARGV[4])
local max_entries = tonumber(ARGV[5])
local max_bytes = tonumber(ARGV[7])
local replaced = tonumber(redis.call('HGET', KEYS[3], ARGV[1])) or 0
-- The record first: a Redis out of memory refuses the script's first write, before any
-- other (it lets the writes after it through, to keep a script whole).
redis.call('HSET', KEYS[2], 'record', ARGV[3], 'prev', ARGV[2])
redis.call('HSET', KEYS[3], ARGV[1], #ARGV[3])
redis.call('INCRBY', KEYS[4], #ARGV[3] - replaced)
if ttl_ms > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl_ms)
    local expired = {}
    for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - ttl_ms * 1000)) do
        if id ~= ARGV[1] then expired[#expired + 1] = id end  -- (written again just now)
    end
    forget(keys, expired, ARGV[6])
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
if max_entries > 0 then
    local excess = redis.call('ZCARD', KEYS[1]) - max_entries
    if excess > 0 then
        forget(keys, redis.call('ZRANGE', KEYS[1], 0, excess - 1), ARGV[6])
    end
end
local total = tonumber(redis.call('GET', KEYS[4]))
if max_bytes > 0 then
    while total > max_bytes and redis.call('ZCARD', KEYS[1]) > 1 do
        local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)
        forget(keys, oldest, ARGV[6])
        total = tonumber(redis.call('GET', KEYS[4]))
    end
end
return total
"""
)

# KEYS: index, sizes, bytes.  ARGV: id, record key prefix.  Returns {1 if its record was
# live else 0, the bytes of the records kept}.
_DELETE = (
    _FORGET
    + """
local live = redis.call('EXISTS', ARGV[2] .. ARGV[1])
forget({index = KEYS[1], sizes = KEYS[2], bytes = KEYS[3]}, {ARGV[1]}, ARGV[2])
return {live, tonumber(redis.call('GET', KEYS[3])) or 0}
"""
)

# KEYS: index.  ARGV: id, record key prefix, ttl ms (0: none), max chain length,
# "1" for the records or "0" for their ids.
# Returns {status, missing id, record or id...} newest first; status is "ok",
# "missing" (missing id is the response that is gone) or "too_long".
# The walk reads a response's record only when the records are asked for (a record is
# its whole turn; the ids alone are what a gateway that holds the conversation asks).
# The chain is scored as used from one reading of the clock, newest first, each a
# microsecond later (the oldest is evicted last), in ZADDs of up to 500 members.
_CHAIN = (
    _NOW
    + """
local ttl_ms = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local records = ARGV[5] == '1'
local found = {}
local id = ARGV[1]
while id ~= '' do
    if #found >= limit then return {'too_long', ''} end
    local key = ARGV[2] .. id
    local answer, prev
    if records then
        local fields = redis.call('HMGET', key, 'record', 'prev')
        answer, prev = fields[1], fields[2]
    else
        prev = redis.call('HGET', key, 'prev')
        answer = id
    end
    if not (answer and prev) then return {'missing', id} end
    found[#found + 1] = {id, answer}
    id = prev
end
local now = used_now(KEYS[1])
local result = {'ok', ''}
local scores = {}
for i, entry in ipairs(found) do
    scores[#scores + 1] = now + i - 1
    scores[#scores + 1] = entry[1]
    if #scores == 1000 then
        redis.call('ZADD', KEYS[1], unpack(scores))
        scores = {}
    end
    if ttl_ms > 0 then redis.call('PEXPIRE', ARGV[2] .. entry[1], ttl_ms) end
    result[#result + 1] = entry[2]
end
if #scores > 0 then redis.call('ZADD', KEYS[1], unpack(scores)) end
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
        self._index = f"{key_prefix}responses"
        self._sizes = f"{key_prefix}response-sizes"
        self._bytes = f"{key_prefix}response-bytes"
        self._put_script = self._server.script(_PUT)
        self._delete_script = self._server.script(_DELETE)
        self._chain_script = self._server.script(_CHAIN)

    def __repr__(self) -> str:
        return f"RedisResponseStore({self.display_url!r})"

    async def _put_encoded(self, response_id: str, previous_response_id: str | None, data: bytes) -> None:
        self._bytes_seen = await self._server.call(
            lambda: self._put_script(
                keys=[self._index, self._record_prefix + response_id, self._sizes, self._bytes],
                args=[
                    response_id,
                    previous_response_id or "",
                    data,
                    self._ttl_ms(),
                    self.max_entries or 0,
                    self._record_prefix,
                    self.max_bytes or 0,
                ],
            )
        )

    async def _get_encoded(self, response_id: str) -> bytes | str | None:
        return await self._server.call(lambda: self._client.hget(self._record_prefix + response_id, "record"))

    async def delete(self, response_id: str) -> bool:
        deleted, self._bytes_seen = await self._server.call(
            lambda: self._delete_script(
                keys=[self._index, self._sizes, self._bytes], args=[response_id, self._record_prefix]
            )
        )
        return bool(deleted)

    async def stored_bytes(self) -> int:
        """The bytes of the records the store counts (those of every id in its index)."""
        total = await self._server.call(lambda: self._client.get(self._bytes))
        return int(total or 0)

    async def _chain_encoded(self, previous_response_id: str, *, records: bool = True) -> list[Any]:
        newest_first: list[bytes]
        status, missing, *newest_first = await self._server.call(
            lambda: self._chain_script(
                keys=[self._index],
                args=[previous_response_id, self._record_prefix, self._ttl_ms(), MAX_CHAIN_LENGTH, int(records)],
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
