"""Memory freed after a cut-short read goes back to the system: at once outside an event
loop, a moment later inside one, and again after every later trip, even one on a new
event loop after the last closed with a trim still pending (glibc only)."""

from __future__ import annotations

import asyncio
import ctypes.util
import os
import platform
from collections.abc import Iterator

import pytest

import toolwire._memory
from toolwire._memory import return_freed_memory, return_freed_memory_soon

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")

MiB = 2**20
FREED = 20 * MiB


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def hole_in_the_heap() -> Iterator[bytes]:
    """20 MiB of 1 KiB blocks (malloc's, not Python's small-object arenas) freed below a
    block still in use: glibc keeps such a hole mapped until it is trimmed."""
    blocks = [bytes(1000) + index.to_bytes(4, "little") for index in range(FREED // 1000)]
    pinned = blocks.pop()  # the last one made, at the top of the heap
    del blocks
    yield pinned


def given_back(before: int) -> bool:
    return before - resident_bytes() >= FREED // 2


@glibc_only
def test_outside_an_event_loop_the_memory_goes_back_at_once() -> None:
    for _ in hole_in_the_heap():
        before = resident_bytes()
        return_freed_memory_soon()
        assert given_back(before)


@glibc_only
def test_return_freed_memory_gives_the_hole_back() -> None:
    for _ in hole_in_the_heap():
        before = resident_bytes()
        return_freed_memory()
        assert given_back(before)


@glibc_only
async def test_in_an_event_loop_the_memory_goes_back_a_moment_later_each_time() -> None:
    for trip in range(2):  # the second trip is served too: the first one's turn is over
        for _ in hole_in_the_heap():
            before = resident_bytes()
            return_freed_memory_soon()
            return_freed_memory_soon()  # once for both
            assert not given_back(before), f"trip {trip}: trimmed at once, not a moment later"
            async with asyncio.timeout(30):
                while not given_back(before):
                    await asyncio.sleep(0.05)


def test_the_c_library_is_looked_up_once_and_one_that_cannot_be_loaded_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As in a fresh process on a system whose C library cannot be loaded: nothing is
    # trimmed, nothing fails, and the lookup (find_library runs ldconfig) is not repeated.
    looked_up: list[str] = []

    def find_library(name: str) -> str:
        looked_up.append(name)
        return "libtoolwire-no-such-library.so.0"

    monkeypatch.setattr(ctypes.util, "find_library", find_library)
    monkeypatch.setattr(toolwire._memory, "_looked_up", False)
    monkeypatch.setattr(toolwire._memory, "_trim", None)
    return_freed_memory()
    return_freed_memory_soon()  # no event loop: at once
    assert looked_up == ["c"]


async def _trip_and_leave() -> None:
    return_freed_memory_soon()  # the loop closes before the trim is due


@glibc_only
def test_a_trim_left_pending_by_a_closed_event_loop_does_not_stop_the_next_ones() -> None:
    # asyncio.run once per command, as a program using toolwire as a library may do.
    asyncio.run(_trip_and_leave())

    async def trip() -> None:
        for _ in hole_in_the_heap():
            before = resident_bytes()
            return_freed_memory_soon()
            async with asyncio.timeout(30):
                while not given_back(before):
                    await asyncio.sleep(0.05)

    asyncio.run(trip())
