"""``Redactor``: secrets out of what the gateway writes down (captures, the inspector, logs).

Three things are taken out, wherever they appear in a JSON value:

* the value of any field whose name says it holds a credential (``authorization``,
  ``api_key``, ``x-api-key``, ``client_secret``, ``password``, ``cookie``, ...), matched
  on the name lowercased with ``-`` and ``_`` removed;
* every occurrence of a secret the gateway holds (``_known_secrets``: the upstream and
  client keys, proxy and upstream URL credentials), whatever its shape;
* text shaped like a credential: the token after ``Bearer``, ``sk-...`` keys, GitHub
  tokens, and toolwire's own client keys (``twk_<id>_<secret>``, ``toolwire.keys``),
  which no process but their holder's ever knows whole.

The work is done on serialized JSON, at memory speed, so that a record of a long Codex
session (half a megabyte) costs about 2 ms and not the 50 ms of a regular expression
alternation or the 20 ms of a walk over the decoded value (measured by
``python -m bench.redaction``): secrets and credential shapes
are replaced in the bytes themselves, each searched by its own precompiled pattern that
starts with a literal (one alternation of them all is ten times slower), and the value is
decoded and walked only when a credential *field* name occurs, which is rare. Field names
are found by searching the reversed bytes for ``:"<reversed name>``, which anchors the
search on the literal ``:`` instead of trying every position.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from toolwire.keys import KEY_PATTERN
from toolwire.protocol._tool_cache import LeastRecentlyUsed

REDACTED = "[redacted]"
_REDACTED_BYTES = REDACTED.encode()

# A field name, lowercased without "-" and "_", that ends in one of these holds a secret.
_SECRET_FIELD_SUFFIXES = (
    "authorization",
    "apikey",
    "password",
    "passwd",
    "secret",
    "accesstoken",
    "refreshtoken",
    "authtoken",
    "sessiontoken",
    "idtoken",
    "cookie",
    "privatekey",
)
# ``"<name>":`` with such a name, in reversed JSON bytes: separators allowed anywhere.
_SECRET_FIELD_REVERSED = re.compile(
    rb':\s*"[-_]*(?i:'
    + b"|".join(b"[-_]*".join(re.escape(bytes([c])) for c in s.encode()[::-1]) for s in _SECRET_FIELD_SUFFIXES)
    + rb")"
)

# Credential shapes in serialized JSON. Each match is checked by its guard (what comes
# just before it) and the part after ``keep`` bytes of it is replaced.
_BEARER = re.compile(rb"earer(?: |\\[nrt])+([A-Za-z0-9._~+/=-]{8,})")  # guard: a "B" or "b" before
_OPENAI_KEY = re.compile(rb"sk-[A-Za-z0-9_-]{20,}")
_GITHUB_TOKEN = re.compile(rb"gh[pousr]_[A-Za-z0-9]{30,}")
# ``Redactor.text`` keeps the redactions of this many short texts: the gateway's own
# warnings and errors repeat on every request (a Codex request has two warnings; their
# redaction was 12 of the 46 us a log line took in a loaded gateway).
KEPT_TEXTS = 512
KEPT_TEXT_LENGTH = 1024
_ALNUM = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_ESCAPE_LETTERS = frozenset(b"nrtbf")


def is_secret_field(name: str) -> bool:
    """True for ``Authorization``, ``x-api-key``, ``OPENAI_API_KEY``, ``client_secret``..."""
    # Field names repeat endlessly; only short ones are remembered, so the cache stays small.
    return _is_secret_field_cached(name) if len(name) <= 64 else _is_secret_field(name)


def _is_secret_field(name: str) -> bool:
    return name.lower().replace("-", "").replace("_", "").endswith(_SECRET_FIELD_SUFFIXES)


_is_secret_field_cached = functools.lru_cache(maxsize=4096)(_is_secret_field)


class Redactor:
    """Replaces secrets with ``"[redacted]"``; ``secrets`` are exact strings to hide."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a key that contains another key is hidden whole; each as it
        # looks inside serialized JSON (escapes included).
        ordered = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._secrets = tuple(re.compile(re.escape(orjson.dumps(s)[1:-1])) for s in ordered)
        self._texts: LeastRecentlyUsed[str, str] = LeastRecentlyUsed(KEPT_TEXTS)

    def redact_json(self, raw: bytes) -> bytes:
        """The serialized JSON ``raw`` with every secret replaced (``raw`` itself if none)."""
        if _SECRET_FIELD_REVERSED.search(raw[::-1]) is not None:
            raw = orjson.dumps(_without_secret_fields(orjson.loads(raw)))
        for secret in self._secrets:
            raw = secret.sub(_replacer(raw, _outside_escape, 0), raw)
        raw = _BEARER.sub(_replacer(raw, _after_b, 1), raw)
        raw = _OPENAI_KEY.sub(_replacer(raw, _word_start, 0), raw)
        raw = KEY_PATTERN.sub(_replacer(raw, _word_start, 0), raw)
        return _GITHUB_TOKEN.sub(_replacer(raw, _word_start, 0), raw)

    def value(self, value: Any) -> Any:
        """A copy of the JSON ``value`` with every secret replaced."""
        return orjson.loads(self.redact_json(orjson.dumps(value)))

    def text(self, value: str) -> str:
        """``value`` with every secret replaced. A redaction depends on the text alone, so
        those of the ``KEPT_TEXTS`` short texts used last are kept and reused."""
        if len(value) > KEPT_TEXT_LENGTH:
            return self._redact_text(value)
        redacted = self._texts.get(value)
        if redacted is None:
            redacted = self._redact_text(value)
            self._texts.put(value, redacted)
        return redacted

    def _redact_text(self, value: str) -> str:
        redacted = self.value(value)
        assert isinstance(redacted, str)
        return redacted


def _without_secret_fields(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: REDACTED if item is not None and is_secret_field(key) else _without_secret_fields(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_without_secret_fields(item) for item in value]
    return value


def _replacer(data: bytes, guard: Callable[[bytes, int], bool], group: int) -> Callable[[re.Match[bytes]], bytes]:
    """For ``sub``: replace group ``group`` of a match whose start passes ``guard``."""

    def replace(match: re.Match[bytes]) -> bytes:
        if not guard(data, match.start()):
            return match.group(0)
        return data[match.start() : match.start(group)] + _REDACTED_BYTES

    return replace


def _backslashes_before(data: bytes, index: int) -> int:
    count = 0
    while index - count > 0 and data[index - count - 1] == 0x5C:
        count += 1
    return count


def _outside_escape(data: bytes, index: int) -> bool:
    """A match at ``index`` does not start inside an escape such as ``\\n``."""
    return _backslashes_before(data, index) % 2 == 0


def _word_start(data: bytes, index: int) -> bool:
    """Nothing alphanumeric just before ``index`` (an escaped ``\\n`` is whitespace)."""
    if index == 0 or data[index - 1] not in _ALNUM:
        return True
    return data[index - 1] in _ESCAPE_LETTERS and _backslashes_before(data, index - 1) % 2 == 1


def _after_b(data: bytes, index: int) -> bool:
    """``earer`` at ``index`` is the end of a word ``Bearer`` or ``bearer``."""
    return index > 0 and data[index - 1] in b"Bb" and _word_start(data, index - 1)
