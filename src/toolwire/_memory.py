"""Giving memory freed after a cut-short read back to the system.

A line, event or stream cut at its limit leaves megabytes of small strings freed at
once, in the middle of the C allocator's heap, which glibc keeps for later instead of
returning (measured: a 16 MiB SSE event made of 1 KiB lines left the gateway's RSS
16.8 MiB higher for good). ``malloc_trim`` hands every free page back; it costs about a
millisecond on a heap of a few hundred MiB. ``return_freed_memory_soon`` runs it a
moment after a bound tripped, when the exchange it cut is over and has let go of what it
held, and at most once a second however many trip; and a moment after the last client
connection of the process closes (``ConnectionTable``), since the connections of a burst
free what they held as they close, after the trims of the bounds they tripped. Elsewhere
than on glibc it does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
from collections.abc import Callable

DELAY_SECONDS = 1.0

_trim: Callable[[int], int] | None = None
_looked_up = False
_pending: asyncio.TimerHandle | None = None
_pending_on: asyncio.AbstractEventLoop | None = None


def return_freed_memory() -> None:
    """Return the allocator's free pages to the system now (glibc), or nothing."""
    global _trim, _looked_up, _pending
    _pending = None
    if not _looked_up:
        _looked_up = True
        name = ctypes.util.find_library("c")
        try:
            _trim = ctypes.CDLL(name).malloc_trim if name else None
        except (OSError, AttributeError):
            _trim = None
    if _trim is not None:
        _trim(0)


def return_freed_memory_soon() -> None:
    """``return_freed_memory`` in a moment, once for all the calls until then (on this
    event loop: one that closed with the trim still pending never runs it)."""
    global _pending, _pending_on
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return_freed_memory()
        return
    if _pending is not None and _pending_on is loop:
        return
    _pending, _pending_on = loop.call_later(DELAY_SECONDS, return_freed_memory), loop
