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


def sealed_of(raw: bytes | bytearray) -> str:
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


# Sealed by this version of toolwire under KEY: a client keeps these in its history, and
# a gateway restarted (or another one sharing the store) must still open them.
SEALED_BEFORE = [
    (
        "toolwire.c1.r1RmzSTLzouNjd2eQTGyKYZ1-e-Pro9QXizr3jxA8DRB6APl1x7JU4GiD9ebFAZoaXRt1fkYtfYgboZG8-JC5P9PMdFP221P8fhkwhrTq5SuM0jSCtI",
        "key:abc12345",
        "The user wants a CSV parser.",
    ),
    (
        "toolwire.c1.r1RmzSTLzovwXOvdXEN6f3giIQrLnt3DSfm9YtUTk8ytJzO8YSmye73dyjfA3F9KIAeW7-Hgh5Y6dKA-KRi2jjEkNacJkMdacjznVej1SUgUvGwr2hiT",
        None,
        "The user wants a CSV parser!!",
    ),
    (
        "toolwire.c1.r1RmzSTLzotMxnIqUMS0ZuCpJ9U_Ie0c_gLm9okIqxmaxF9mcQNNYb9mDXovASHP24nyBvbUTqdjIjLNiV_HWWdJz3HpHQOs9XJrID9gYxZrNbHYC-zFPg",
        "alice",
        "The user wants a CSV parser!!!",
    ),
]


@pytest.mark.parametrize(("sealed", "owner", "summary"), SEALED_BEFORE, ids=["key-owner", "no-owner", "named-owner"])
def test_a_compaction_sealed_before_still_opens(sealed: str, owner: str | None, summary: str) -> None:
    assert SEAL.open(sealed, owner) == summary
    assert refusal(sealed, owner="someone else") is Unreadable.OTHER_OWNER
    altered = raw_of(sealed)
    altered[30] ^= 0x01
    assert refusal(sealed_of(altered), owner=owner) is Unreadable.ALTERED  # its owner's, but altered


@pytest.mark.parametrize("owner", [None, "alice"])
def test_the_sealed_form_is_unpadded_base64url(owner: str | None) -> None:
    for summary in ("a", "ab", "abc"):  # every length of the last base64 group
        body = SEAL.seal(summary, owner)[len(SEALED_PREFIX) :]
        assert body and set(body) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@pytest.mark.parametrize("body", ["A", "AAAAA", "A=A"])
def test_a_blob_that_is_no_base64_is_refused_as_altered(body: str) -> None:
    assert refusal(SEALED_PREFIX + body) is Unreadable.ALTERED


def test_the_shortest_blob_is_judged_like_any_other() -> None:
    # key id, owner tag, nonce and an authentication tag: the least a sealed value holds.
    shortest = 8 + 8 + 12 + 16
    alices = raw_of(SEAL.seal("a", "alice"))
    assert refusal(sealed_of(alices[:shortest]), owner="bob") is Unreadable.OTHER_OWNER
    assert refusal(sealed_of(alices[:shortest])) is Unreadable.ALTERED
    assert refusal(sealed_of(bytes(shortest))) is Unreadable.OTHER_KEY
    assert refusal(sealed_of(alices[: shortest - 1])) is Unreadable.ALTERED


def test_the_refusal_says_where_what_and_what_to_do() -> None:
    with pytest.raises(UnreadableCompaction) as caught:
        SEAL.open("gAAAA-foreign", "alice", param="input[3].encrypted_content")
    assert caught.value.message == (
        "'input[3].encrypted_content' cannot be opened: it was not made by toolwire (another provider's "
        "compaction cannot be opened here). Send the conversation without it, or compact it again through "
        "this gateway."
    )
    assert caught.value.to_body()["error"]["code"] == "invalid_encrypted_content"
    with pytest.raises(UnreadableCompaction) as caught:
        SEAL.open(SEALED_PREFIX, "alice")
    assert caught.value.message.startswith("A compaction item cannot be opened: it was altered after toolwire sealed it.")
    assert caught.value.param is None


def test_a_sealed_value_opens_whatever_character_it_ends_with() -> None:
    # The nonce is random, so the last base64 character is too (any of 64 when the sealed
    # bytes fill the last group, fewer otherwise): seal until each has been seen, about
    # 300 sealings; 5000 a length leave no chance of missing one.
    seen: set[str] = set()
    for summary in ("s", "ss", "sss"):  # one of them fills the last group
        for _ in range(5000):
            sealed = SEAL.seal(summary, "alice")
            if sealed[-1] not in seen:
                seen.add(sealed[-1])
                assert SEAL.open(sealed, "alice") == summary
            if len(seen) == 64:
                break
    assert len(seen) == 64
