"""How many calls run at once, and which ones must run alone.

A ``CallGate`` admits at most ``limit`` calls together. Calls of parallel tools share
the gate; a call of a tool that is not parallel (one that edits files) waits until
nothing else runs and keeps everything else out while it runs, as Codex's read/write
lock does. A waiting exclusive call goes first: calls that arrive after it wait for it,
so a command the model wrote after a patch sees the patched files.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class CallGate:
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the concurrency limit must be at least 1")
        self._slots = asyncio.Semaphore(limit)
        self._changed = asyncio.Condition()
        self._running = 0
        self._exclusive = False
        self._exclusive_waiting = 0

    @contextlib.asynccontextmanager
    async def enter(self, *, alone: bool) -> AsyncIterator[None]:
        async with self._slots:
            async with self._changed:
                if alone:
                    self._exclusive_waiting += 1
                    try:
                        await self._changed.wait_for(
                            lambda: not self._exclusive and self._running == 0
                        )
                    finally:
                        self._exclusive_waiting -= 1
                        self._changed.notify_all()
                    self._exclusive = True
                else:
                    await self._changed.wait_for(
                        lambda: not self._exclusive and not self._exclusive_waiting
                    )
                self._running += 1
            try:
                yield
            finally:
                async with self._changed:
                    self._running -= 1
                    if alone:
                        self._exclusive = False
                    self._changed.notify_all()
