"""Token counts as peers report them, made safe to add up, store and send on."""

from __future__ import annotations

from typing import Any

MAX_TOKEN_COUNT = 10**12
"""The most one count may say: far beyond any real response, and far enough below
``2**63`` that the counts of millions of requests still add up within the 64-bit integers
of orjson, SQLite and Redis (a hostile upstream's ``1.8e19`` would otherwise stop the
event that carries it from being written, or a key's usage from being recorded)."""


_NUMBERS = (int, float)  # (``int | float`` would be made again at every call)


def token_count(value: Any) -> int:
    """A reported count as a whole number from 0 to ``MAX_TOKEN_COUNT``: numbers are
    truncated and clamped, anything else (a string, a boolean, NaN, missing) is 0."""
    if isinstance(value, bool) or not isinstance(value, _NUMBERS):
        return 0
    if value != value:  # NaN
        return 0
    return int(min(max(value, 0), MAX_TOKEN_COUNT))  # infinities are clamped before int()
