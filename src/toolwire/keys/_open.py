"""``open_key_store``: a store URL (``--store``, as for stored responses) -> its ``KeyStore``.

``sqlite://`` and ``sqlite:///path`` keep keys in the same file as stored responses,
``redis://`` and ``rediss://`` in the same Redis, and ``memory://`` in this process
only. Opening does no I/O. ``for_cli=True`` refuses ``memory://``: a key made by a
command that exits at once would be gone before anyone could use it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from toolwire.store import sqlite_path

from ._base import KeyStore
from ._memory import MemoryKeyStore
from ._sqlite import SQLiteKeyStore


def open_key_store(url: str, *, for_cli: bool = False) -> KeyStore:
    """The key store ``url`` names; ``ValueError`` for one that cannot hold keys."""
    scheme, colon, _ = url.partition(":")
    scheme = scheme.lower()
    if not colon:
        raise ValueError(f"{url!r} is not a store URL: use sqlite://[/path] or redis://host:port/db")
    if scheme == "memory":
        if for_cli:
            raise ValueError(
                "a memory:// store lives inside one gateway process: create keys there over the admin API "
                "(--admin-key-env), or use sqlite:// or redis://"
            )
        return MemoryKeyStore()
    if scheme == "sqlite":
        return SQLiteKeyStore(sqlite_path(url))
    if scheme in ("redis", "rediss"):
        if not urlsplit(url).hostname:
            raise ValueError(f"{scheme}:// store URL needs a host, e.g. {scheme}://localhost:6379/0")
        from ._redis import RedisKeyStore

        return RedisKeyStore(url)
    raise ValueError(f"unknown store {scheme!r}: use sqlite://[/path], memory:// or redis://host:port/db")
