"""``UpstreamLimits``: what the client is told when an upstream answer passes a bound, each
trip counted under its setting's name (the reading itself is tested against real
servers in test_http_answers.py and test_http_streams.py)."""

from __future__ import annotations

import pytest

from toolwire.protocol import SSELimitExceeded
from toolwire.upstream import (
    DEFAULT_UPSTREAM_MAX_BODY_BYTES,
    DEFAULT_UPSTREAM_MAX_EVENT_BYTES,
    DEFAULT_UPSTREAM_MAX_LINE_BYTES,
    DEFAULT_UPSTREAM_MAX_STREAM_BYTES,
    UpstreamLimits,
)


@pytest.mark.parametrize(
    ("limit", "shown"),
    [
        (16 * 2**20, "16 MiB"),
        (2**20, "1 MiB"),
        (2**20 + 1024, "1025 KiB"),
        (1024, "1 KiB"),
        (1025, "1025 bytes"),
        (1000, "1000 bytes"),
    ],
)
def test_sizes_are_shown_in_the_largest_whole_unit(limit: int, shown: str) -> None:
    error = UpstreamLimits(max_body_bytes=limit).body_error()
    assert error.message == (
        f"The upstream's answer is larger than the gateway's limit of {shown} (upstream_max_body_bytes); "
        "it was not read to the end."
    )


def test_each_error_names_its_setting_and_counts_the_trip() -> None:
    tripped: list[str] = []
    limits = UpstreamLimits(max_stream_bytes=3 * 2**20, tripped=tripped.append)
    line = limits.stream_error(SSELimitExceeded("line", 4096))
    event = limits.stream_error(SSELimitExceeded("event", 2**20))
    stream = limits.stream_too_long_error()
    assert [e.limit for e in (line, event, stream)] == tripped == [
        "upstream_max_line_bytes",
        "upstream_max_event_bytes",
        "upstream_max_stream_bytes",
    ]
    assert event.message == (
        "The upstream sent an SSE event longer than the gateway's limit of 1 MiB (upstream_max_event_bytes); "
        "the stream was cut."
    )
    assert stream.message.startswith("The upstream's stream is longer than the gateway's limit of 3 MiB")
    assert {e.status for e in (line, event, stream)} == {502}


def test_the_defaults() -> None:
    limits = UpstreamLimits()
    assert (limits.max_line_bytes, limits.max_event_bytes, limits.max_body_bytes, limits.max_stream_bytes) == (
        16 * 2**20, 16 * 2**20, 32 * 2**20, 128 * 2**20,
    )  # fmt: skip
    assert (
        DEFAULT_UPSTREAM_MAX_LINE_BYTES,
        DEFAULT_UPSTREAM_MAX_EVENT_BYTES,
        DEFAULT_UPSTREAM_MAX_BODY_BYTES,
        DEFAULT_UPSTREAM_MAX_STREAM_BYTES,
    ) == (16 * 2**20, 16 * 2**20, 32 * 2**20, 128 * 2**20)
    limits.body_error()  # counting nowhere by default is fine
    assert UpstreamLimits() == UpstreamLimits(tripped=print)  # how trips are counted is not a bound
