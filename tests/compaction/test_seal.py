"""``CompactionSeal``: a summary sealed is opened again only under the same key, for the
same owner, unaltered; everything else is refused, saying why."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolwire.compaction import SEALED_PREFIX, CompactionSeal, Unreadable, UnreadableCompaction

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
SEAL = CompactionSeal(KEY)


def raw_of(sealed: str) -> bytearray:
    body = sealed[len(SEALED_PREFIX) :]
    return bytearray(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def sealed_of(raw: bytes) -> str:
    return SEALED_PREFIX + base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")


def refusal(encrypted_content: str, owner: str | None = "alice", seal: CompactionSeal = SEAL) -> Unreadable:
    with pytest.raises(UnreadableCompaction) as caught:
        seal.open(encrypted_content, owner, param="input[2].encrypted_content")
    assert caught.value.status == 400 and caught.value.param == "input[2].encrypted_content"
    assert caught.value.reason.value in caught.value.message
    return caught.value.reason


@given(summary=st.text(max_size=2000), owner=st.one_of(st.none(), st.text(max_size=40)))
def test_what_is_sealed_is_opened(summary: str, owner: str | None) -> None:
    sealed = SEAL.seal(summary, owner)
    assert sealed.startswith(SEALED_PREFIX) and CompactionSeal.is_ours(sealed)
    plaintext = summary.encode()
    assert len(plaintext) < 8 or plaintext not in raw_of(sealed)  # encrypted, not merely encoded
    assert SEAL.open(sealed, owner) == summary
    assert CompactionSeal(KEY).open(sealed, owner) == summary  # another process with the same key


def test_each_sealing_is_fresh() -> None:
    assert SEAL.seal("same", "alice") != SEAL.seal("same", "alice")


def test_a_foreign_blob_is_refused_as_foreign() -> None:
    openai_like = "gAAAAABpM0Yj-" + "x" * 80
    assert not CompactionSeal.is_ours(openai_like)
    assert refusal(openai_like) is Unreadable.FOREIGN
    assert "another provider" in Unreadable.FOREIGN.value


def test_a_blob_of_another_key_is_refused_as_such() -> None:
    sealed = CompactionSeal(OTHER_KEY).seal("elsewhere", "alice")
    assert refusal(sealed) is Unreadable.OTHER_KEY


def test_a_blob_of_another_owner_is_refused_as_such() -> None:
    sealed = SEAL.seal("alice's work", "alice")
    assert refusal(sealed, owner="bob") is Unreadable.OTHER_OWNER
    assert refusal(sealed, owner=None) is Unreadable.OTHER_OWNER


@pytest.mark.parametrize("where", ["nonce", "ciphertext", "tag"])
def test_an_altered_blob_is_refused_as_altered(where: str) -> None:
    raw = raw_of(SEAL.seal("the summary of a long session", "alice"))
    offset = {"nonce": 16, "ciphertext": 30, "tag": len(raw) - 1}[where]
    raw[offset] ^= 0x01
    assert refusal(sealed_of(raw)) is Unreadable.ALTERED


def test_an_owner_tag_swapped_in_is_refused() -> None:
    """The owner tag is authenticated: a blob made for bob does not open for alice by
    copying alice's tag into it."""
    alices = raw_of(SEAL.seal("a", "alice"))
    bobs = raw_of(SEAL.seal("b", "bob"))
    bobs[8:16] = alices[8:16]
    assert refusal(sealed_of(bobs)) is Unreadable.ALTERED


@pytest.mark.parametrize("body", ["", "AAAA", "not base64 at all!", "A" * 30])
def test_a_truncated_or_garbled_blob_is_refused_as_altered(body: str) -> None:
    assert refusal(SEALED_PREFIX + body) is Unreadable.ALTERED


def test_the_key_must_be_32_bytes() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        CompactionSeal(b"short")
