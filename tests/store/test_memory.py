"""The memory store: the exact edges of its time to live and of the chain guard."""

from __future__ import annotations

import pytest

from toolwire.errors import RequestError
from toolwire.store import MAX_CHAIN_LENGTH, MemoryResponseStore

from .records import exchange


async def test_a_record_is_gone_at_the_very_moment_it_expires() -> None:
    now = [1000.0]
    store = MemoryResponseStore(ttl_seconds=10, max_entries=None, clock=lambda: now[0])
    await store.put(exchange("resp_1", "hello"))
    now[0] = 1009.999
    assert await store.get("resp_1") is not None  # reading does not refresh it
    now[0] = 1010.0
    assert await store.get("resp_1") is None


async def test_a_chain_as_long_as_the_guard_allows_is_walked_and_one_more_is_refused() -> None:
    store = MemoryResponseStore(ttl_seconds=None, max_entries=MAX_CHAIN_LENGTH + 1)
    previous = None
    for number in range(MAX_CHAIN_LENGTH + 1):
        await store.put(exchange(f"resp_{number}", "q", previous=previous))
        previous = f"resp_{number}"
    longest = await store.chain_input(f"resp_{MAX_CHAIN_LENGTH - 1}")
    assert len(longest) == 2 * MAX_CHAIN_LENGTH
    with pytest.raises(RequestError) as caught:
        await store.chain_input(f"resp_{MAX_CHAIN_LENGTH}")
    assert caught.value.code == "previous_response_chain_too_long"
