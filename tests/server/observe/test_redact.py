"""``Redactor``: credentials out of JSON values and serialized records."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from toolwire.server.observe._redact import (
    KEPT_TEXT_LENGTH,
    KEPT_TEXTS,
    REDACTED,
    Redactor,
    is_secret_field,
)

SECRET = "sk-upstream-secret-0123456789"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("authorization", True),
        ("Authorization", True),
        ("Proxy-Authorization", True),
        ("api_key", True),
        ("x-api-key", True),
        ("OPENAI_API_KEY", True),
        ("apiKey", True),
        ("client_secret", True),
        ("password", True),
        ("access_token", True),
        ("Cookie", True),
        ("input_tokens", False),
        ("max_output_tokens", False),
        ("reasoning_tokens", False),
        ("key", False),
        ("name", False),
        ("arguments", False),
    ],
)
def test_secret_fields(name: str, secret: bool) -> None:
    assert is_secret_field(name) is secret


def test_long_field_names_are_read_too() -> None:
    """Names longer than 64 characters are not remembered, but read all the same."""
    assert is_secret_field("x" * 70 + "_api_key") is True
    assert is_secret_field("x" * 70 + "_tokens") is False
    assert Redactor().value({"x" * 70 + "_password": "hunter2"}) == {"x" * 70 + "_password": REDACTED}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"headers": {"Authorization": "Bearer abc", "accept": "*/*"}},
         {"headers": {"Authorization": REDACTED, "accept": "*/*"}}),
        ({"api_key": None, "model": "m"}, {"api_key": None, "model": "m"}),
        ({"x-api-key": {"nested": 1}}, {"x-api-key": REDACTED}),
        (["my key is " + SECRET, 3, None], ["my key is " + REDACTED, 3, None]),
        ({SECRET: "x"}, {REDACTED: "x"}),
        ("curl -H 'Authorization: Bearer abcdefgh12345678'", "curl -H 'Authorization: Bearer [redacted]'"),
        ("export KEY=sk-proj-AbCdEfGhIjKlMnOpQrStUvWx", "export KEY=[redacted]"),
        ("token ghp_0123456789abcdefghijABCDEFGHIJ012345", "token [redacted]"),
        ("task-runner and desk-lamp are fine", "task-runner and desk-lamp are fine"),
        ({"input_tokens": 5, "text": "plain"}, {"input_tokens": 5, "text": "plain"}),
    ],
)
def test_values(value: Any, expected: Any) -> None:
    assert Redactor([SECRET]).value(value) == expected


def test_longer_secrets_are_hidden_whole() -> None:
    assert Redactor(["abcdefgh", "abcdefgh-longer"]).text("x abcdefgh-longer y") == f"x {REDACTED} y"


def test_a_text_redacted_again_is_redacted_the_same_from_what_was_kept() -> None:
    redactor = Redactor([SECRET])
    texts = [f"upstream said {SECRET}", "custom tool calls sent as function calls", "Bearer abcdefgh12345678"]
    first = [redactor.text(t) for t in texts]
    assert first == [f"upstream said {REDACTED}", "custom tool calls sent as function calls", f"Bearer {REDACTED}"]
    assert [redactor.text(t) for t in texts] == first


def test_the_kept_redactions_are_bounded_and_the_least_recently_used_go_first(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor([SECRET])
    redactions: list[str] = []
    redact = redactor._redact_text
    monkeypatch.setattr(redactor, "_redact_text", lambda text: redactions.append(text) or redact(text))
    for n in range(KEPT_TEXTS + 1):
        assert redactor.text(f"warning {n} {SECRET}") == f"warning {n} {REDACTED}"
    assert len(redactor._texts) == KEPT_TEXTS
    redactions.clear()
    redactor.text(f"warning {KEPT_TEXTS} {SECRET}")  # the newest is kept
    redactor.text(f"warning 1 {SECRET}")
    assert redactions == []
    assert redactor.text(f"warning 0 {SECRET}") == f"warning 0 {REDACTED}"  # the oldest was let go
    assert redactions == [f"warning 0 {SECRET}"]
    redactor.text(f"warning 1 {SECRET}")  # used again just before: still kept
    redactor.text(f"warning 2 {SECRET}")  # the least recently used: let go for warning 0
    assert redactions == [f"warning 0 {SECRET}", f"warning 2 {SECRET}"]


def test_a_long_text_is_redacted_every_time_and_not_kept() -> None:
    redactor = Redactor([SECRET])
    text = SECRET + " " + "x" * KEPT_TEXT_LENGTH
    assert redactor.text(text) == REDACTED + " " + "x" * KEPT_TEXT_LENGTH
    assert len(redactor._texts) == 0


def test_a_text_of_the_longest_kept_length_is_kept() -> None:
    redactor = Redactor([SECRET])
    text = SECRET + " " + "x" * (KEPT_TEXT_LENGTH - len(SECRET) - 1)
    assert len(text) == KEPT_TEXT_LENGTH
    assert redactor.text(text) == REDACTED + text[len(SECRET) :]
    assert len(redactor._texts) == 1


def test_clean_json_is_returned_as_it_is() -> None:
    raw = orjson.dumps({"model": "m", "prompt_cache_key": "k", "input": [{"content": "a task-runner", "max_output_tokens": 5}]})
    assert Redactor([SECRET]).redact_json(raw) is raw


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # Field names however they are spelt and spaced.
        (b'{"Authorization" : "Bearer abc"}', {"Authorization": REDACTED}),
        (b'{"a": {"b": [{"X_API_KEY": "k"}]}}', {"a": {"b": [{"X_API_KEY": REDACTED}]}}),
        # JSON escapes next to secrets and shapes.
        (b'{"t": "key:\\nsk-AbCdEfGhIjKlMnOpQrStUv"}', {"t": f"key:\n{REDACTED}"}),
        (b'{"t": "Bearer\\tabcdefghijk"}', {"t": f"Bearer\t{REDACTED}"}),
        (b'{"t": "Unbearer abcdefghijk"}', {"t": "Unbearer abcdefghijk"}),
        (b'{"t": "xBearer abcdefghijk"}', {"t": "xBearer abcdefghijk"}),
        (b'{"t": "Xearer abcdefghijk"}', {"t": "Xearer abcdefghijk"}),
        (b'{"t": "bearer abcdefghijk"}', {"t": f"bearer {REDACTED}"}),
        # A backslash, then a newline: the key after the escaped "n" starts a word.
        (b'{"t": "\\\\\\nsk-AbCdEfGhIjKlMnOpQrStUv"}', {"t": f"\\\n{REDACTED}"}),
        (b'{"t": "q\\"' + SECRET.encode() + b'\\""}', {"t": f'q"{REDACTED}"'}),
        (b'{"t": "\\u0041' + SECRET.encode() + b'"}', {"t": f"A{REDACTED}"}),
    ],
)
def test_serialized_json(raw: bytes, expected: Any) -> None:
    assert orjson.loads(Redactor([SECRET]).redact_json(raw)) == expected


def test_a_secret_is_not_matched_inside_an_escape() -> None:
    # "\nabcdefgh-key" is a newline then "abcdefgh-key": the secret "nabcdefgh-key" is not there.
    raw = b'{"t": "x\\nabcdefgh-key"}'
    assert Redactor(["nabcdefgh-key"]).redact_json(raw) == raw


def test_a_clean_record_comes_back_as_the_same_bytes() -> None:
    """A clean 500 KB record (a long Codex session) is not copied; its cost is measured in
    bench/redaction.py."""
    items = [{"type": "function_call_output", "call_id": f"call_{n}", "output": "def task_runner():\n    return 42\n" * 40}
             for n in range(400)]
    raw = orjson.dumps({"model": "m", "prompt_cache_key": "k", "input": items})
    assert len(raw) > 500_000
    assert Redactor([SECRET, "client-key-alpha"]).redact_json(raw) is raw


def test_a_secret_with_json_escapes_is_found_in_serialized_json() -> None:
    secret = 'pa"ss\\word-123'
    redactor = Redactor([secret])
    redacted = redactor.redact_json(orjson.dumps({"text": f"the secret {secret}!"}))
    assert orjson.loads(redacted) == {"text": f"the secret {REDACTED}!"}


def test_a_toolwire_client_key_is_hidden_by_its_shape() -> None:
    key = "twk_a1b2c3d4_" + "Z9y8X7w6V5" * 4  # an 8-character id, a 40-character secret
    assert Redactor().text(f"my key {key} leaked") == f"my key {REDACTED} leaked"


@pytest.mark.parametrize("backslashes", [1, 2, 3])
def test_a_configured_secret_after_literal_backslashes_is_hidden(backslashes: int) -> None:
    """A Windows path or a regex ending in backslashes, then a key of no known shape: each
    backslash is ``\\\\`` in the JSON, so the key starts outside any escape and is found."""
    secret = "plain0secret0of0no0shape"
    text = "C:" + "\\" * backslashes + secret
    raw = orjson.dumps({"t": text})
    assert orjson.loads(Redactor([secret]).redact_json(raw)) == {"t": "C:" + "\\" * backslashes + REDACTED}


def test_a_configured_secret_that_would_start_inside_an_escape_is_left_after_literal_backslashes() -> None:
    """``\\\\\\n`` in the JSON is a backslash, then a newline: "nsecret" is not in the text."""
    secret = "nsecret0of0no0shape"
    raw = orjson.dumps({"t": "C:\\\n" + secret[1:]})
    assert Redactor([secret]).redact_json(raw) == raw


def test_a_secret_inside_a_longer_one_does_not_cut_the_longer_one_short() -> None:
    """Longer secrets are replaced first, whatever their order by letters."""
    assert Redactor(["b1234567", "a1234567b1234567"]).text("x a1234567b1234567 y") == f"x {REDACTED} y"
