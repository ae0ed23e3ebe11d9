"""``until``: wait, bounded, for something the server does in its own time (a connection
let go, a count settled), instead of sleeping for a guessed while. It awaits between checks,
so the gateway served in the same event loop goes on; ``tests/reliability/helpers.wait_until``
is its blocking twin, for servers in other processes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(condition: Callable[[], bool], *, seconds: float = 10.0, step: float = 0.05) -> bool:
    """Check ``condition`` every ``step`` seconds until it holds or ``seconds`` have passed;
    what it says last (the caller asserts it, or reads on knowing it may not hold)."""
    for _ in range(max(1, round(seconds / step))):
        if condition():
            return True
        await asyncio.sleep(step)
    return condition()
