"""The limits arithmetic, table by table: buckets, the order of the checks, durations."""

from __future__ import annotations

import pytest

from toolwire.keys import (
    Admitted,
    Bucket,
    Limits,
    LimitState,
    Refused,
    TokenUsage,
    charge_tokens,
    decide,
    parse_duration,
)

NOW = 1_000_000.0

DECISIONS = [
    # limits, state, expected
    (Limits(), LimitState(), Admitted(None)),
    (Limits(requests_per_minute=2), LimitState(), Admitted(Bucket(1.0, NOW))),
    (Limits(requests_per_minute=2), LimitState(requests=Bucket(1.0, NOW)), Admitted(Bucket(0.0, NOW))),
    # empty: one request comes back every 30 s
    (Limits(requests_per_minute=2), LimitState(requests=Bucket(0.0, NOW)), Refused("requests_per_minute", 30.0)),
    (Limits(requests_per_minute=2), LimitState(requests=Bucket(0.0, NOW - 15)), Refused("requests_per_minute", 15.0)),
    (Limits(requests_per_minute=2), LimitState(requests=Bucket(0.0, NOW - 30)), Admitted(Bucket(0.0, NOW))),
    # refilled, but never past one minute's worth
    (Limits(requests_per_minute=2), LimitState(requests=Bucket(0.0, NOW - 3600)), Admitted(Bucket(1.0, NOW))),
    # tokens: admitted while one is left; in debt, until the debt is paid back
    (Limits(tokens_per_minute=60), LimitState(tokens=Bucket(1.0, NOW)), Admitted(None)),
    (Limits(tokens_per_minute=60), LimitState(tokens=Bucket(0.5, NOW)), Refused("tokens_per_minute", 0.5)),
    (Limits(tokens_per_minute=60), LimitState(tokens=Bucket(-29.0, NOW)), Refused("tokens_per_minute", 30.0)),
    (Limits(max_concurrent=2), LimitState(active_leases=1), Admitted(None)),
    (Limits(max_concurrent=2), LimitState(active_leases=2), Refused("max_concurrent", 1.0)),
    (Limits(budget_tokens=100), LimitState(used_tokens=99), Admitted(None)),
    (Limits(budget_tokens=100), LimitState(used_tokens=100), Refused("budget_tokens", None)),
    # the most final refusal wins, and a refused request is not charged
    (
        Limits(requests_per_minute=1, tokens_per_minute=10, max_concurrent=1, budget_tokens=5),
        LimitState(requests=Bucket(0, NOW), tokens=Bucket(0, NOW), used_tokens=5, active_leases=1),
        Refused("budget_tokens", None),
    ),
    (
        Limits(requests_per_minute=1, tokens_per_minute=10, max_concurrent=1),
        LimitState(requests=Bucket(0, NOW), tokens=Bucket(0, NOW), active_leases=1),
        Refused("max_concurrent", 1.0),
    ),
    (
        Limits(requests_per_minute=1, tokens_per_minute=10),
        LimitState(requests=Bucket(0, NOW), tokens=Bucket(0, NOW)),
        Refused("tokens_per_minute", 6.0),
    ),
]


@pytest.mark.parametrize(("limits", "state", "expected"), DECISIONS)
def test_decide(limits: Limits, state: LimitState, expected: Admitted | Refused) -> None:
    assert decide(limits, state, NOW) == expected


def test_a_bucket_measured_in_the_future_is_not_refilled_backwards() -> None:
    state = LimitState(requests=Bucket(0.5, NOW + 10))
    assert decide(Limits(requests_per_minute=60), state, NOW) == Refused("requests_per_minute", 0.5)


CHARGES = [
    (Limits(), None, 100, None),
    (Limits(tokens_per_minute=60), None, 100, Bucket(-40.0, NOW)),
    (Limits(tokens_per_minute=60), Bucket(-40.0, NOW - 10), 5, Bucket(-35.0, NOW)),
    (Limits(tokens_per_minute=60), Bucket(0.0, NOW - 3600), 0, Bucket(60.0, NOW)),
]


@pytest.mark.parametrize(("limits", "bucket", "used", "expected"), CHARGES)
def test_charge_tokens(limits: Limits, bucket: Bucket | None, used: int, expected: Bucket | None) -> None:
    assert charge_tokens(limits, bucket, used, NOW) == expected


@pytest.mark.parametrize("bad", [0, -1])
def test_limits_below_one_are_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="requests_per_minute must be at least 1"):
        Limits(requests_per_minute=bad)


USAGES = [
    (None, TokenUsage()),
    ({"input_tokens": 10, "output_tokens": 4}, TokenUsage(10, 4, 0)),
    ({"input_tokens": 10, "output_tokens": 4, "input_tokens_details": {"cached_tokens": 6}}, TokenUsage(10, 4, 6)),
    ({"input_tokens": "10", "output_tokens": -3, "input_tokens_details": None}, TokenUsage()),
    ({"input_tokens": True, "output_tokens": 2}, TokenUsage(0, 2, 0)),
    ({"input_tokens": 1, "output_tokens": 0, "input_tokens_details": {"cached_tokens": 1}}, TokenUsage(1, 0, 1)),
]


@pytest.mark.parametrize(("usage", "expected"), USAGES)
def test_token_usage_from_a_response(usage: object, expected: TokenUsage) -> None:
    assert TokenUsage.from_response_usage(usage) == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30d", 30 * 86_400), ("12h", 43_200), ("90m", 5_400), ("3600s", 3_600), ("1w", 604_800), ("1w 2d", 777_600), ("1H", 3_600),
     ("1s", 1)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "30", "d", "3x", "0d", "30d junk", "-1d", "1.5h"])
def test_parse_duration_refuses_what_is_not_a_duration(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)
