"""``LogObserver``: one JSON line per request, in the documented format, keys redacted."""

from __future__ import annotations

import logging

import orjson
import pytest

from tests.support.observed import exchange
from toolwire.server.observe._log import LogObserver
from toolwire.server.observe._redact import Redactor

LINE_KEYS = [
    "request_id", "model", "upstream", "upstream_model", "stream", "status", "outcome", "latency_ms", "ttft_ms",
    "input_tokens", "output_tokens", "tool_calls", "conversions",
]


def logged(caplog: pytest.LogCaptureFixture) -> list[tuple[int, dict[str, object]]]:
    return [(r.levelno, orjson.loads(r.getMessage())) for r in caplog.records if r.name == "toolwire.exchange"]


def test_a_completed_request_is_one_info_line(caplog: pytest.LogCaptureFixture) -> None:
    finished = exchange(
        upstream_model="qwen3",
        usage={"input_tokens": 12, "output_tokens": 3},
        tool_calls=[("custom_tool_call", "apply_patch", None)],
        conversions=["custom tool apply_patch wrapped as function", "custom apply_patch restored"],
    )
    with caplog.at_level(logging.INFO, logger="toolwire.exchange"):
        LogObserver().finished(finished)
    [(level, line)] = logged(caplog)
    assert level == logging.INFO
    assert list(line) == LINE_KEYS
    assert (line["input_tokens"], line["output_tokens"], line["outcome"]) == (12, 3, "completed")
    assert line["tool_calls"] == [{"name": "apply_patch", "namespace": None, "type": "custom_tool_call"}]
    assert line["conversions"] == ["custom tool apply_patch wrapped as function", "custom apply_patch restored"]


def test_a_failed_request_is_a_warning_with_its_error_redacted(caplog: pytest.LogCaptureFixture) -> None:
    finished = exchange(outcome="error", status=401, error="bad key sk-upstream-secret-0123456789",
                        error_kind="UpstreamError", warnings=["reasoning dropped: input[2]"])
    with caplog.at_level(logging.INFO, logger="toolwire.exchange"):
        LogObserver(Redactor(["sk-upstream-secret-0123456789"])).finished(finished)
    [(level, line)] = logged(caplog)
    assert level == logging.WARNING
    assert list(line) == [*LINE_KEYS, "error", "error_kind", "warnings"]
    assert (line["error"], line["error_kind"]) == ("bad key [redacted]", "UpstreamError")
    assert line["warnings"] == ["reasoning dropped: input[2]"]
