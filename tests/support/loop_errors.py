"""What was raised into the running event loop (its exception handler's reports), for a
test to assert there was nothing: uvloop logs such an error and closes the connection
without a word, so a client sees only a silent close."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def loop_errors() -> Iterator[list[dict[str, Any]]]:
    """The contexts the running loop's exception handler is given within the block."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    try:
        yield errors
    finally:
        loop.set_exception_handler(None)
