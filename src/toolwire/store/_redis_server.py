"""``RedisServer``: the connection every Redis-backed store uses, and its failures mapped.

A client with short socket timeouts and one quick retry (a gateway should answer 503
rather than hang when Redis is gone), scripts registered on it, and ``call`` running one
command with Redis's failures mapped to ``StoreUnavailable`` naming the store and the
server (its password never shown: ``redact_url``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit

from toolwire._addresses import url_host

from ._base import StoreUnavailable

if TYPE_CHECKING:  # redis is imported when a server is first made: ~7 MB a gateway without one never loads
    import redis.asyncio as redis
    from redis.commands.core import AsyncScript

T = TypeVar("T")

DEFAULT_KEY_PREFIX = "toolwire:"
DEFAULT_SOCKET_TIMEOUT_SECONDS = 2.0


class RedisServer:
    """The Redis server at ``url`` (``redis://`` or ``rediss://``); ``what`` names its store."""

    def __init__(self, url: str, *, what: str, socket_timeout: float = DEFAULT_SOCKET_TIMEOUT_SECONDS) -> None:
        import redis.asyncio as redis
        from redis.asyncio.retry import Retry
        from redis.backoff import ExponentialBackoff

        self.display_url = redact_url(url)
        self._what = what
        self.client: redis.Redis = redis.Redis.from_url(
            url,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_timeout,
            retry=Retry(ExponentialBackoff(cap=0.2, base=0.05), retries=1),
            decode_responses=False,
        )

    def script(self, source: str) -> AsyncScript:
        return self.client.register_script(source)

    async def call(self, command: Callable[[], Awaitable[T]]) -> T:
        """Run one command, mapping Redis's failures to ``StoreUnavailable``."""
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import RedisError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        try:
            return await command()
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise StoreUnavailable(
                f"The {self._what} {self.display_url} is unreachable "
                f"({type(exc).__name__}: {str(exc).rstrip('.')})."
            ) from exc
        except RedisError as exc:
            raise StoreUnavailable(f"The {self._what} {self.display_url} failed: {str(exc).rstrip('.')}.") from exc

    async def aclose(self) -> None:
        await self.client.aclose()


def redact_url(url: str) -> str:
    """``url`` without its password or query string, fit for messages and logs."""
    parts = urlsplit(url)
    host = url_host(parts.hostname or "")
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host + (f":{port}" if port is not None else "")
    if parts.username:
        netloc = f"{parts.username}:***@{netloc}" if parts.password else f"{parts.username}@{netloc}"
    elif parts.password:
        netloc = f":***@{netloc}"
    return f"{parts.scheme}://{netloc}{parts.path}"
