"""``token_count``: a count an upstream reported, whatever it was, as a whole number that can
be added up, stored and sent on."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest

from toolwire.protocol import MAX_TOKEN_COUNT, token_count


@pytest.mark.parametrize(
    ("reported", "count"),
    [
        (12, 12),
        (0, 0),
        (12.9, 12),
        (-3, 0),
        (-0.5, 0),
        (MAX_TOKEN_COUNT, MAX_TOKEN_COUNT),
        (MAX_TOKEN_COUNT + 1, MAX_TOKEN_COUNT),
        (2**64 - 1, MAX_TOKEN_COUNT),  # the largest integer orjson reads
        (1.8446744073709552e19, MAX_TOKEN_COUNT),  # orjson reads 2**64 as this float
        (math.inf, MAX_TOKEN_COUNT),
        (-math.inf, 0),
        (math.nan, 0),
        (True, 0),
        ("5", 0),
        (None, 0),
        ([5], 0),
    ],
)
def test_a_reported_count_becomes_a_bounded_whole_number(reported: Any, count: int) -> None:
    assert token_count(reported) == count
    assert type(token_count(reported)) is int


def test_sums_of_the_largest_counts_stay_within_64_bits() -> None:
    """Every Responses ``usage`` adds at most three counts; a key's record adds those of its
    requests: a million requests at the limit still fit a signed 64-bit integer."""
    assert 3 * MAX_TOKEN_COUNT * 1_000_000 < 2**63
    orjson.dumps(3 * MAX_TOKEN_COUNT)
