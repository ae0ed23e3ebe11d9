"""``open_store``: a store URL (``--store``) -> the ``ResponseStore`` it names.

::

    sqlite://                 the default file, $XDG_STATE_HOME/toolwire/responses.sqlite3
                              (or ~/.local/state/toolwire/responses.sqlite3)
    sqlite:///abs/path.db     that file (~ is expanded: sqlite://~/responses.db;
                              sqlite:rel/path.db is relative to the working directory)
    memory://                 this process only, gone when it exits
    redis://[[user]:password@]host[:port][/db]   shared by every gateway using it
    rediss://...              the same over TLS

Opening a store does no I/O: the SQLite file is created, and Redis connected, on first use.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ._base import ResponseStore
from ._memory import MemoryResponseStore
from ._redis_server import redact_url
from ._sqlite import SQLiteResponseStore

DEFAULT_STORE_URL = "sqlite://"
DEFAULT_TTL_SECONDS = 30 * 24 * 3600.0
"""Thirty days, as long as the OpenAI API keeps a stored response."""
DEFAULT_MAX_ENTRIES = 10_000
DEFAULT_MAX_BYTES = 1 << 30
"""One GiB of records: a client resending an 800-turn history with ``store`` true writes
1.4 MB a turn, so ``DEFAULT_MAX_ENTRIES`` of those would be 14 GB."""


def open_store(
    url: str = DEFAULT_STORE_URL,
    *,
    ttl_seconds: float | None = DEFAULT_TTL_SECONDS,
    max_entries: int | None = DEFAULT_MAX_ENTRIES,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
) -> ResponseStore:
    """The store ``url`` names, keeping each response ``ttl_seconds`` after its last use,
    and at most ``max_entries`` of them, of at most ``max_bytes`` of records in all (least
    recently used out first; the newest is kept whatever its size).

    ``None`` lifts one limit; lifting all of them is refused, since the store would grow
    without bound. Raises ``ValueError`` for a URL or limit that makes no sense.
    """
    if ttl_seconds is not None and not ttl_seconds > 0:
        raise ValueError(f"the store's time to live must be positive, not {ttl_seconds}")
    if max_entries is not None and max_entries < 1:
        raise ValueError(f"the store's maximum number of entries must be at least 1, not {max_entries}")
    if max_bytes is not None and max_bytes < 1:
        raise ValueError(f"the store's maximum bytes must be at least 1, not {max_bytes}")
    if ttl_seconds is None and max_entries is None and max_bytes is None:
        raise ValueError("a response store needs a time to live, a maximum number of entries or of bytes")
    scheme, colon, _ = url.partition(":")
    scheme = scheme.lower()
    if not colon:
        raise ValueError(f"{url!r} is not a store URL: use sqlite://[/path], memory:// or redis://host:port/db")
    if scheme == "memory":
        if url.lower() not in ("memory:", "memory://"):
            raise ValueError(f"{redact_url(url)}: a memory store takes no host or path; use memory://")
        return MemoryResponseStore(ttl_seconds=ttl_seconds, max_entries=max_entries, max_bytes=max_bytes)
    if scheme == "sqlite":
        return SQLiteResponseStore(sqlite_path(url), ttl_seconds=ttl_seconds, max_entries=max_entries, max_bytes=max_bytes)
    if scheme in ("redis", "rediss"):
        try:
            from ._redis import RedisResponseStore
        except ImportError as exc:  # pragma: no cover - redis is a dependency
            raise ValueError(f"a {scheme}:// store needs the 'redis' package installed") from exc
        if not urlsplit(url).hostname:
            raise ValueError(f"{scheme}:// store URL needs a host, e.g. {scheme}://localhost:6379/0")
        return RedisResponseStore(url, ttl_seconds=ttl_seconds, max_entries=max_entries, max_bytes=max_bytes)
    raise ValueError(f"unknown store {scheme!r}: use sqlite://[/path], memory:// or redis://host:port/db")


def sqlite_path(url: str) -> Path:
    """The file a ``sqlite:`` URL names: its path, or ``default_sqlite_path()`` if it has none."""
    parts = urlsplit(url)
    if parts.query or parts.fragment:
        raise ValueError(f"{redact_url(url)}: a sqlite store URL takes no query or fragment")
    if parts.netloc not in ("", "~"):
        raise ValueError(f"{redact_url(url)}: write a sqlite file path as sqlite:///absolute/path or sqlite://~/path")
    path = unquote(parts.netloc + parts.path)
    return Path(path).expanduser() if path else default_sqlite_path()


def default_sqlite_path() -> Path:
    """``$XDG_STATE_HOME/toolwire/responses.sqlite3``, else under ``~/.local/state``.

    A relative ``XDG_STATE_HOME`` is ignored, as the XDG spec asks.
    """
    state_home = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state_home) if os.path.isabs(state_home) else Path.home() / ".local" / "state"
    return base / "toolwire" / "responses.sqlite3"
