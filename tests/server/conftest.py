"""Fixtures of the server's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.redis_server import MISSING_REASON, REDIS_SERVER, RedisServer


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A ``redis-server`` of the test's own, free to stop, restart or pause."""
    if REDIS_SERVER is None:
        pytest.skip(MISSING_REASON)
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()
