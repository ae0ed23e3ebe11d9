"""``CompactionSeal``: a conversation summary sealed into a ``compaction`` item's
``encrypted_content``, and opened again.

A summary the gateway wrote travels with the client (Codex keeps the ``compaction`` item
and sends it back), so it is sealed: encrypted and authenticated with AES-256-GCM
(``cryptography``) under the gateway's compaction key (``_keys``: every gateway sharing
a store shares it), and bound to the client key that made it. The sealed form::

    toolwire.c1.<base64url( key id (8) | owner tag (8) | nonce (12) | ciphertext + tag )>

The key id (a digest of the key, not the key) tells a blob sealed under another key
(another gateway, another store) from one that was altered; the owner tag (an HMAC of
the owner under the key) tells a blob of another client key. Both are authenticated
with the ciphertext, so neither can be swapped. Opening a value that is not ours, not
under our key, not the caller's, or altered raises ``UnreadableCompaction`` (400) that
says which; nothing is ever passed on half-read.

Pure: the key is given; no I/O, no clock (the nonce is random).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from enum import Enum

import orjson

from toolwire.errors import RequestError

__all__ = ["SEALED_PREFIX", "CompactionSeal", "Unreadable", "UnreadableCompaction"]

SEALED_PREFIX = "toolwire.c1."
KEY_BYTES = 32
_KEY_ID_BYTES = 8
_OWNER_TAG_BYTES = 8
_NONCE_BYTES = 12
_HEADER_BYTES = _KEY_ID_BYTES + _OWNER_TAG_BYTES
_TAG_BYTES = 16
_SMALLEST = _HEADER_BYTES + _NONCE_BYTES + _TAG_BYTES  # an empty plaintext still has its tag


class Unreadable(Enum):
    """Why a ``compaction`` item cannot be opened."""

    FOREIGN = "it was not made by toolwire (another provider's compaction cannot be opened here)"
    OTHER_KEY = (
        "it was sealed by a toolwire gateway with another compaction key (gateways open each "
        "other's compactions only when they share a store)"
    )
    OTHER_OWNER = "it belongs to another client key"
    ALTERED = "it was altered after toolwire sealed it"


class UnreadableCompaction(RequestError):
    """A ``compaction`` item whose summary toolwire cannot open: the client's to fix (400)."""

    def __init__(self, reason: Unreadable, *, param: str | None = None) -> None:
        where = f"'{param}'" if param else "A compaction item"
        super().__init__(
            f"{where} cannot be opened: {reason.value}. Send the conversation without it, "
            "or compact it again through this gateway.",
            param=param,
            code="invalid_encrypted_content",
        )
        self.reason = reason


class CompactionSeal:
    """Seals and opens summaries under one 32-byte ``key``."""

    __slots__ = ("_aead", "_key", "key_id")

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"a compaction key is {KEY_BYTES} bytes, not {len(key)}")
        # Imported here: a gateway that never compacts never loads cryptography (~7 MB).
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._key = key
        self._aead = AESGCM(key)
        self.key_id = hashlib.sha256(b"toolwire compaction key id\x00" + key).digest()[:_KEY_ID_BYTES]
        """Names the key without revealing it."""

    @staticmethod
    def is_ours(encrypted_content: object) -> bool:
        """Whether ``encrypted_content`` is in toolwire's sealed form (opened or not)."""
        return isinstance(encrypted_content, str) and encrypted_content.startswith(SEALED_PREFIX)

    def seal(self, summary: str, owner: str | None) -> str:
        """``summary`` sealed for ``owner`` (the client key's owner; None without keys)."""
        header = self.key_id + self._owner_tag(owner)
        nonce = os.urandom(_NONCE_BYTES)
        plaintext = orjson.dumps({"summary": summary})
        sealed = self._aead.encrypt(nonce, plaintext, _aad(header, owner))
        return SEALED_PREFIX + base64.urlsafe_b64encode(header + nonce + sealed).decode("ascii").rstrip("=")

    def open(self, encrypted_content: str, owner: str | None, *, param: str | None = None) -> str:
        """The summary sealed in ``encrypted_content`` for ``owner``; ``UnreadableCompaction``
        (naming ``param``) if it is not ours, not under this key, not ``owner``'s, or altered."""
        if not self.is_ours(encrypted_content):
            raise UnreadableCompaction(Unreadable.FOREIGN, param=param)
        body = encrypted_content[len(SEALED_PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (ValueError, binascii.Error) as exc:
            raise UnreadableCompaction(Unreadable.ALTERED, param=param) from exc
        if len(raw) < _SMALLEST:
            raise UnreadableCompaction(Unreadable.ALTERED, param=param)
        header = raw[:_HEADER_BYTES]
        nonce = raw[_HEADER_BYTES : _HEADER_BYTES + _NONCE_BYTES]
        sealed = raw[_HEADER_BYTES + _NONCE_BYTES :]
        if not hmac.compare_digest(header[:_KEY_ID_BYTES], self.key_id):
            raise UnreadableCompaction(Unreadable.OTHER_KEY, param=param)
        from cryptography.exceptions import InvalidTag

        try:
            plaintext = self._aead.decrypt(nonce, sealed, _aad(header, owner))
        except InvalidTag as exc:
            # The owner is authenticated with the summary, so a wrong owner fails here too;
            # the tag in the clear says which it was. (A blob altered in just its owner tag
            # is reported as another key's: refused either way.)
            other_owner = not hmac.compare_digest(header[_KEY_ID_BYTES:], self._owner_tag(owner))
            raise UnreadableCompaction(
                Unreadable.OTHER_OWNER if other_owner else Unreadable.ALTERED, param=param
            ) from exc
        summary = orjson.loads(plaintext).get("summary")
        if not isinstance(summary, str):  # pragma: no cover - we sealed it, authenticated
            raise UnreadableCompaction(Unreadable.ALTERED, param=param)
        return summary

    def _owner_tag(self, owner: str | None) -> bytes:
        digest = hmac.new(self._key, b"owner\x00" + (owner or "").encode(), hashlib.sha256).digest()
        return digest[:_OWNER_TAG_BYTES]


def _aad(header: bytes, owner: str | None) -> bytes:
    return SEALED_PREFIX.encode() + header + b"\x00" + (owner or "").encode()
