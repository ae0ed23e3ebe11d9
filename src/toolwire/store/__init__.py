"""Stored responses: ``store: true`` and ``previous_response_id`` for the Responses API.

The server talks to one seam, ``ResponseStore`` (``put``, ``get``, ``delete``,
``input_of``, ``chain_input``, ``chain_ids``, ``aclose``), and ``open_store(url)`` picks the store behind it:
memory (the fake, and single-process use), SQLite (the default, one host) or Redis
(several gateways behind a load balancer). Every store is bounded by a time to live,
a maximum number of entries and of bytes (each store also says how many bytes it holds:
``stored_bytes``); failures to reach a store are ``StoreUnavailable``
(503). Records are immutable, so concurrent continuations of one response cannot
corrupt a chain. A record may build on the input of an earlier one (``input_base``), for
clients that resend their history with ``store`` true.
"""

from ._base import (
    MAX_CHAIN_LENGTH,
    MAX_INPUT_BASES,
    InputNotWhole,
    ItemDict,
    PreviousResponseNotFound,
    ResponseStore,
    StoredResponse,
    StoreUnavailable,
    stored_items,
)
from ._memory import MemoryResponseStore
from ._open import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_ENTRIES,
    DEFAULT_STORE_URL,
    DEFAULT_TTL_SECONDS,
    default_sqlite_path,
    open_store,
    sqlite_path,
)
from ._redis_server import DEFAULT_KEY_PREFIX as DEFAULT_REDIS_KEY_PREFIX
from ._redis_server import DEFAULT_SOCKET_TIMEOUT_SECONDS as DEFAULT_REDIS_SOCKET_TIMEOUT_SECONDS
from ._redis_server import RedisServer, redact_url
from ._sqlite import SQLiteResponseStore
from ._sqlite_file import SQLiteFile, connect_sqlite, write_transaction

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_REDIS_KEY_PREFIX",
    "DEFAULT_REDIS_SOCKET_TIMEOUT_SECONDS",
    "DEFAULT_STORE_URL",
    "DEFAULT_TTL_SECONDS",
    "MAX_CHAIN_LENGTH",
    "MAX_INPUT_BASES",
    "InputNotWhole",
    "ItemDict",
    "MemoryResponseStore",
    "PreviousResponseNotFound",
    "RedisServer",
    "ResponseStore",
    "SQLiteFile",
    "SQLiteResponseStore",
    "StoreUnavailable",
    "StoredResponse",
    "connect_sqlite",
    "default_sqlite_path",
    "open_store",
    "redact_url",
    "sqlite_path",
    "stored_items",
    "write_transaction",
]
