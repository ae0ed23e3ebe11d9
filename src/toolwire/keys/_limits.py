"""The limits arithmetic, pure: data and a clock reading in, a decision out.

A key may have four limits:

``requests_per_minute`` and ``tokens_per_minute``
    token buckets holding at most one minute's worth, refilled continuously (a key with
    60 requests/min may send 60 at once, then one a second). A request takes one request
    token when it is admitted. Tokens are known only once the upstream reports them, so
    the token bucket is charged afterwards and may go below zero: a request is admitted
    while at least one token is left, and one that used more than was left makes the
    next ones wait until the bucket has refilled past it.
``max_concurrent``
    requests admitted and not yet finished, each holding a *lease* that expires if its
    gateway dies without giving it back (live gateways renew theirs).
``budget_tokens``
    input plus output tokens over the key's whole life; once spent, requests are refused
    with ``insufficient_quota`` until a new key is issued.

``decide`` checks them in that order of finality (budget, concurrency, tokens,
requests) and only charges the request bucket when every limit lets the request in.
The Redis store runs the same arithmetic as a Lua script (``_redis.py``); the contract
tests hold the two to the same tables.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from toolwire.protocol import token_count

WINDOW_SECONDS = 60.0
LEASE_SECONDS = 60.0
"""How long a concurrency lease lasts unless renewed (its gateway renews it every third of this)."""
CONCURRENCY_RETRY_SECONDS = 1.0
"""What ``retry-after`` says when the key's concurrent requests are all taken."""

LimitName = Literal["budget_tokens", "max_concurrent", "tokens_per_minute", "requests_per_minute"]


@dataclass(frozen=True, slots=True)
class Limits:
    """A key's limits; None is no limit."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    max_concurrent: int | None = None
    budget_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute", "max_concurrent", "budget_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")

    @property
    def any(self) -> bool:
        """Whether admitting a request needs the store at all."""
        return any(
            value is not None
            for value in (self.requests_per_minute, self.tokens_per_minute, self.max_concurrent, self.budget_tokens)
        )


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """What one request used, as the upstream reported it (zeros when it reported nothing)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total(self) -> int:
        """What limits and budgets count: input plus output."""
        return self.input_tokens + self.output_tokens

    @classmethod
    def from_response_usage(cls, usage: object) -> TokenUsage:
        """From a Responses ``usage`` object (``input_tokens``, ``output_tokens``,
        ``input_tokens_details.cached_tokens``); anything missing or malformed is 0."""
        if not isinstance(usage, dict):
            return cls()
        details = usage.get("input_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else 0
        return cls(token_count(usage.get("input_tokens")), token_count(usage.get("output_tokens")), token_count(cached))


@dataclass(frozen=True, slots=True)
class Bucket:
    """A token bucket's ``level`` as measured at ``at`` (seconds since the epoch)."""

    level: float
    at: float


@dataclass(frozen=True, slots=True)
class LimitState:
    """Everything the limits of one key depend on, as a store holds it."""

    requests: Bucket | None = None
    tokens: Bucket | None = None
    used_tokens: int = 0
    active_leases: int = 0


@dataclass(frozen=True, slots=True)
class Admitted:
    """The request may go; ``requests`` is the request bucket to store (None: no such limit)."""

    requests: Bucket | None


@dataclass(frozen=True, slots=True)
class Refused:
    """The request may not go: ``limit`` says which, ``retry_after`` in how many seconds
    it might (None: not by waiting)."""

    limit: LimitName
    retry_after: float | None


def level(bucket: Bucket | None, per_minute: int, now: float) -> float:
    """The bucket's level at ``now``: full when never used, refilled since, never over full."""
    if bucket is None:
        return float(per_minute)
    refilled = bucket.level + max(0.0, now - bucket.at) * per_minute / WINDOW_SECONDS
    return min(float(per_minute), refilled)


def seconds_until_one(current: float, per_minute: int) -> float:
    """Seconds until a bucket at ``current`` holds one token."""
    return max(0.0, (1.0 - current) * WINDOW_SECONDS / per_minute)


def decide(limits: Limits, state: LimitState, now: float) -> Admitted | Refused:
    """Whether a request of a key with ``limits`` in ``state`` may go at ``now``."""
    if limits.budget_tokens is not None and state.used_tokens >= limits.budget_tokens:
        return Refused("budget_tokens", None)
    if limits.max_concurrent is not None and state.active_leases >= limits.max_concurrent:
        return Refused("max_concurrent", CONCURRENCY_RETRY_SECONDS)
    if limits.tokens_per_minute is not None:
        tokens = level(state.tokens, limits.tokens_per_minute, now)
        if tokens < 1:
            return Refused("tokens_per_minute", seconds_until_one(tokens, limits.tokens_per_minute))
    if limits.requests_per_minute is None:
        return Admitted(None)
    requests = level(state.requests, limits.requests_per_minute, now)
    if requests < 1:
        return Refused("requests_per_minute", seconds_until_one(requests, limits.requests_per_minute))
    return Admitted(Bucket(requests - 1, now))


def charge_tokens(limits: Limits, bucket: Bucket | None, used: int, now: float) -> Bucket | None:
    """The token bucket after a request used ``used`` tokens (None: no such limit)."""
    if limits.tokens_per_minute is None:
        return None
    return Bucket(level(bucket, limits.tokens_per_minute, now) - used, now)


def retry_after_header(seconds: float) -> str:
    """``retry-after``'s value: whole seconds, rounded up, at least 1."""
    return str(max(1, math.ceil(seconds - 1e-9)))


_DURATION = re.compile(r"(\d+)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_duration(text: str) -> float:
    """``"30d"``, ``"12h"``, ``"90m"``, ``"1w2d"``, ``"3600s"`` -> seconds (``ValueError`` otherwise)."""
    compact = re.sub(r"\s+", "", text).lower()
    position, seconds = 0, 0
    for match in _DURATION.finditer(compact):
        if match.start() != position:
            break
        seconds += int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not compact or position != len(compact) or seconds <= 0:
        raise ValueError(f"{text!r} is not a duration: write a number and a unit, e.g. 30d, 12h, 90m or 3600s")
    return float(seconds)

