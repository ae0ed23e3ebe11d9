"""The key format: shape, visible prefix, salted digest, and the pattern the redactor uses."""

from __future__ import annotations

import orjson

from toolwire.keys import KEY_PATTERN, digest_of, key_id_of, matches, new_key, visible_prefix


def test_a_new_key_has_its_id_in_its_visible_prefix() -> None:
    key_id, key = new_key()
    assert key.startswith(visible_prefix(key_id) + "_")
    assert key_id_of(key) == key_id
    assert len(key) == len("twk_") + 8 + 1 + 40


def test_keys_are_random() -> None:
    assert len({new_key()[1] for _ in range(200)}) == 200


def test_only_the_key_matches_its_digest() -> None:
    _, key = new_key()
    kept = digest_of(key)
    assert matches(key, kept)
    assert not matches(key[:-1] + ("A" if key[-1] != "A" else "B"), kept)
    assert not matches(new_key()[1], kept)


def test_the_digest_is_salted() -> None:
    _, key = new_key()
    first, second = digest_of(key), digest_of(key)
    assert first.salt != second.salt and first.digest != second.digest
    assert len(first.salt) == len(second.salt) == 16
    assert key.encode() not in first.digest + first.salt


def test_strings_not_shaped_like_a_key_have_no_id() -> None:
    _, key = new_key()
    for presented in ("", "sk-abc", key + "x", key[:-1], key.replace("twk_", "twx_"), " " + key):
        assert key_id_of(presented) is None


def test_the_pattern_finds_a_key_anywhere_in_serialized_json() -> None:
    _, key = new_key()
    raw = orjson.dumps({"input": f"my key is {key}, keep it", "nested": [{"k": key}]})
    assert len(KEY_PATTERN.findall(raw)) == 2
    assert KEY_PATTERN.search(raw.replace(key.encode(), key[:20].encode())) is None
