"""A real ``redis-server`` for the compaction tests (the store tests' fixtures)."""

from tests.store.conftest import fresh_redis, redis_server

__all__ = ["fresh_redis", "redis_server"]
