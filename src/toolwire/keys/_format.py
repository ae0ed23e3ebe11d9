"""The client key itself: its format, how it is made, and how it is kept and checked.

A key reads ``twk_<id>_<secret>``::

    twk_k3v9x2ma_Qx7...(40 letters and digits)

``twk_<id>`` is the key's *visible prefix*: ``id`` (8 lowercase letters and digits) is
random, names the key in the store and is shown by ``toolwire keys list`` so that people
can tell keys apart. The secret (40 letters and digits, about 238 bits) is never kept:
the store holds a random 16-byte salt and ``HMAC-SHA256(salt, key)``, and a presented key
is checked by recomputing that digest and comparing it in constant time. A salted fast
hash is the right one for keys this long and random (a slow password hash buys nothing
against guessing 238 bits, and would cost every request); the salt keeps one database's
digests useless against another's.

The shape is also what lets the gateway's redactor find a key it has never seen
(``KEY_PATTERN``): the full key is known to nobody but its holder.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
from dataclasses import dataclass

KEY_SCHEME = "twk"
ID_LENGTH = 8
SECRET_LENGTH = 40
SALT_BYTES = 16
_ID_ALPHABET = string.ascii_lowercase + string.digits
_SECRET_ALPHABET = string.ascii_letters + string.digits

KEY_PATTERN = re.compile(
    rb"twk_[a-z0-9]{%d}_[A-Za-z0-9]{%d}(?![A-Za-z0-9])" % (ID_LENGTH, SECRET_LENGTH)
)
"""A whole key in bytes (serialized JSON, log text): what the redactor replaces."""
_WHOLE_KEY = re.compile(rf"twk_([a-z0-9]{{{ID_LENGTH}}})_[A-Za-z0-9]{{{SECRET_LENGTH}}}")


@dataclass(frozen=True, slots=True)
class KeyDigest:
    """What the store keeps of a key: its salt and its salted digest."""

    salt: bytes
    digest: bytes


def new_key() -> tuple[str, str]:
    """A fresh ``(key id, key)``."""
    key_id = "".join(secrets.choice(_ID_ALPHABET) for _ in range(ID_LENGTH))
    secret = "".join(secrets.choice(_SECRET_ALPHABET) for _ in range(SECRET_LENGTH))
    return key_id, f"{KEY_SCHEME}_{key_id}_{secret}"


def visible_prefix(key_id: str) -> str:
    """``twk_<id>``: the part of a key that may be shown."""
    return f"{KEY_SCHEME}_{key_id}"


def key_id_of(presented: str) -> str | None:
    """The id of a string shaped like a key, or None if it is not shaped like one."""
    match = _WHOLE_KEY.fullmatch(presented)
    return match.group(1) if match else None


def digest_of(key: str, salt: bytes | None = None) -> KeyDigest:
    """The salted digest of ``key``, with a fresh salt unless one is given."""
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    return KeyDigest(salt, hmac.new(salt, key.encode(), hashlib.sha256).digest())


def matches(presented: str, kept: KeyDigest) -> bool:
    """Whether ``presented`` is the key ``kept`` was made from (constant time)."""
    return hmac.compare_digest(digest_of(presented, kept.salt).digest, kept.digest)
