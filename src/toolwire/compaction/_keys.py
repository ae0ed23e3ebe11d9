"""Where the compaction key lives: the seam ``CompactionKeySource``, one per kind of store.

Every gateway that shares a store must seal and open compactions under one key, so the
key is kept in the store's place (``compaction_key_for(store_url)``)::

    sqlite:///path/responses.sqlite3   the file /path/responses.sqlite3.compaction-key, beside it
    redis://host:port/db               the Redis key toolwire:compaction-key, in that Redis
    memory://, none                    a key of this process only (its compactions die with it)

The first gateway to need the key makes it (32 random bytes) and every other one reads
that one: the file is published with a hard link, which fails when another process was
first, and Redis is written with ``SET NX``. The file is readable by its owner only, like
the store beside it. The key is read once per process and kept. A store that cannot be
reached, or a key file that is damaged, is ``StoreUnavailable`` (503) naming it, never
the key.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import os
import secrets
from pathlib import Path
from typing import Protocol

from toolwire.store import (
    DEFAULT_REDIS_KEY_PREFIX,
    DEFAULT_REDIS_SOCKET_TIMEOUT_SECONDS,
    RedisServer,
    StoreUnavailable,
    sqlite_path,
)

from ._seal import KEY_BYTES

__all__ = [
    "KEY_FILE_SUFFIX",
    "CompactionKeySource",
    "FileCompactionKey",
    "ProcessCompactionKey",
    "RedisCompactionKey",
    "compaction_key_for",
]

KEY_FILE_SUFFIX = ".compaction-key"
REDIS_KEY_NAME = "compaction-key"


class CompactionKeySource(Protocol):
    """Where one gateway's compaction key comes from."""

    async def key(self) -> bytes:
        """The 32-byte key (made on first use, then the same one every time)."""
        ...

    async def aclose(self) -> None: ...


class ProcessCompactionKey:
    """A key of this process alone: for a gateway without a shared store."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(KEY_BYTES)

    async def key(self) -> bytes:
        return self._key

    async def aclose(self) -> None:
        return None


class _SharedKey:
    """A key kept where every gateway of a store finds it: read (or made) once, when this
    process first needs it, then kept."""

    def __init__(self) -> None:
        self._key: bytes | None = None
        self._lock = asyncio.Lock()

    async def key(self) -> bytes:
        if self._key is None:
            async with self._lock:
                if self._key is None:
                    self._key = await self._read_or_create()
        return self._key

    async def _read_or_create(self) -> bytes:
        raise NotImplementedError


class FileCompactionKey(_SharedKey):
    """The key in a file (base64, one line), created beside a SQLite store."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def __repr__(self) -> str:
        return f"FileCompactionKey({str(self.path)!r})"

    async def aclose(self) -> None:
        return None

    async def _read_or_create(self) -> bytes:
        return await asyncio.to_thread(self._read_or_create_file)

    def _read_or_create_file(self) -> bytes:
        try:
            return self._read()
        except FileNotFoundError:
            pass
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            staged = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}")
            descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as file:
                file.write(base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode("ascii") + "\n")
                file.flush()
                os.fsync(file.fileno())
            try:
                os.link(staged, self.path)  # whole or not at all; fails if another was first
            except FileExistsError:
                pass
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(staged)
            return self._read()
        except OSError as exc:
            raise StoreUnavailable(f"The compaction key file {self.path} cannot be created: {exc.strerror}.") from exc

    def _read(self) -> bytes:
        try:
            text = self.path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            raise
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreUnavailable(f"The compaction key file {self.path} cannot be read: {exc}.") from exc
        try:
            key = base64.b64decode(text, validate=True)
        except (ValueError, binascii.Error):
            key = b""
        if len(key) != KEY_BYTES:
            raise StoreUnavailable(
                f"The compaction key file {self.path} is damaged (not {KEY_BYTES} bytes in base64). "
                "Remove it and a new key is made; compactions sealed under the old one can then no "
                "longer be opened."
            )
        return key


class RedisCompactionKey(_SharedKey):
    """The key in Redis, beside the stored responses (``toolwire:compaction-key``)."""

    def __init__(
        self,
        url: str,
        *,
        key_prefix: str = DEFAULT_REDIS_KEY_PREFIX,
        socket_timeout: float = DEFAULT_REDIS_SOCKET_TIMEOUT_SECONDS,
    ) -> None:
        super().__init__()
        self._server = RedisServer(url, what="compaction key store", socket_timeout=socket_timeout)
        self.display_url = self._server.display_url
        self._name = key_prefix + REDIS_KEY_NAME

    def __repr__(self) -> str:
        return f"RedisCompactionKey({self.display_url!r})"

    async def aclose(self) -> None:
        await self._server.aclose()

    async def _read_or_create(self) -> bytes:
        client = self._server.client
        await self._server.call(lambda: client.set(self._name, secrets.token_bytes(KEY_BYTES), nx=True))
        key = await self._server.call(lambda: client.get(self._name))
        if not isinstance(key, bytes) or len(key) != KEY_BYTES:
            raise StoreUnavailable(
                f"The compaction key in Redis at {self.display_url} ({self._name}) is damaged: delete it "
                "and a new one is made (compactions sealed under the old one can then no longer be opened)."
            )
        return key


def compaction_key_for(store_url: str) -> CompactionKeySource:
    """The key source beside the store ``store_url`` names (``"none"``: no store)."""
    scheme = store_url.partition(":")[0].lower()
    if scheme == "sqlite":
        database = sqlite_path(store_url)
        return FileCompactionKey(database.with_name(database.name + KEY_FILE_SUFFIX))
    if scheme in ("redis", "rediss"):
        return RedisCompactionKey(store_url)
    return ProcessCompactionKey()
