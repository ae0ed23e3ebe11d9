"""Client keys for a gateway shared by a team: who may call, which models, how much.

``KeyGate`` is the server's one door (``authenticate``, ``admit``, ``record_soon``);
behind it one seam, ``KeyStore``, with a store per ``--store`` URL
(``open_key_store``): memory (the fake), SQLite (the default; the same file as stored
responses) and Redis (shared by several gateways, limits counted atomically in it).
The rules are pure: the key format and its salted digest (``_format``), the limits
arithmetic (``_limits``). ``create_key`` and friends are what ``toolwire keys`` and the
admin HTTP API do. Errors and their statuses are drawn
in ``_errors``.
"""

from ._admin import KeySpec, create_key, list_keys, revoke_key, usage_report
from ._base import KeyIdTaken, KeyStore
from ._errors import (
    InvalidKey,
    KeyNameTaken,
    KeyNotFound,
    ModelNotAllowed,
    QuotaExceeded,
    RateLimited,
)
from ._format import KEY_PATTERN, KeyDigest, digest_of, key_id_of, matches, new_key, visible_prefix
from ._gate import STATIC_KEY_NAME, KeyGate, Lease, Principal, bearer_token
from ._limits import (
    LEASE_SECONDS,
    Admitted,
    Bucket,
    LimitName,
    Limits,
    LimitState,
    Refused,
    TokenUsage,
    charge_tokens,
    decide,
    parse_duration,
)
from ._memory import MemoryKeyStore
from ._model import ClientKey, KeyStatus, UsageRow, check_name
from ._open import open_key_store
from ._sqlite import SQLiteKeyStore

__all__ = [
    "KEY_PATTERN",
    "LEASE_SECONDS",
    "STATIC_KEY_NAME",
    "Admitted",
    "Bucket",
    "ClientKey",
    "InvalidKey",
    "KeyDigest",
    "KeyGate",
    "KeyIdTaken",
    "KeyNameTaken",
    "KeyNotFound",
    "KeySpec",
    "KeyStatus",
    "KeyStore",
    "Lease",
    "LimitName",
    "LimitState",
    "Limits",
    "MemoryKeyStore",
    "ModelNotAllowed",
    "Principal",
    "QuotaExceeded",
    "RateLimited",
    "Refused",
    "SQLiteKeyStore",
    "TokenUsage",
    "UsageRow",
    "bearer_token",
    "charge_tokens",
    "check_name",
    "create_key",
    "decide",
    "digest_of",
    "key_id_of",
    "list_keys",
    "matches",
    "new_key",
    "open_key_store",
    "parse_duration",
    "revoke_key",
    "usage_report",
    "visible_prefix",
]
