"""``LogObserver``: one JSON line per request, in the documented format, keys redacted."""

from __future__ import annotations

import logging

import orjson
import pytest

from tests.support.observed import exchange
from toolwire.keys import KeyGate, KeySpec, MemoryKeyStore, create_key
from toolwire.server.observe._key_usage import KeyUsageObserver
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


def test_a_stream_that_failed_is_a_warning_too(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="toolwire.exchange"):
        LogObserver().finished(exchange(outcome="failed", error="upstream cut", error_kind="server_error"))
    [(level, line)] = logged(caplog)
    assert (level, line["outcome"]) == (logging.WARNING, "failed")


def test_the_line_carries_the_key_the_continued_response_and_times_to_the_hundredth(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "plain0secret0of0no0shape"
    finished = exchange(key_name="alice", previous_response_id="resp_before", warnings=[f"echoed {secret}"])
    finished.started_at, finished.first_token_at, finished.finished_at = 100.0, 100.0045678, 100.0123456
    with caplog.at_level(logging.INFO, logger="toolwire.exchange"):
        LogObserver(Redactor([secret])).finished(finished)
    [(_, line)] = logged(caplog)
    assert (line["key"], line["previous_response_id"]) == ("alice", "resp_before")
    assert (line["latency_ms"], line["ttft_ms"]) == (12.35, 4.57)
    assert line["warnings"] == ["echoed [redacted]"]


async def test_a_finished_exchange_of_a_stored_key_is_charged_what_it_used() -> None:
    store = MemoryKeyStore()
    gate = KeyGate(store)
    alice, key = await create_key(store, KeySpec(name="alice"))
    lease = await gate.admit(await gate.authenticate(b"Bearer " + key.encode()), "m")
    assert lease is not None
    finished = exchange(key_name="alice", usage={"input_tokens": 7, "output_tokens": 3})
    finished.lease = lease
    KeyUsageObserver(gate).finished(finished)
    await gate.aclose()  # the usage is recorded in the background; closing waits for it
    [row] = await store.usage()
    assert (row.key_id, row.model, row.requests, row.input_tokens, row.output_tokens) == (alice.id, "m", 1, 7, 3)


def test_a_log_observer_made_without_a_redactor_still_hides_keys_by_their_shape(
    caplog: pytest.LogCaptureFixture,
) -> None:
    finished = exchange(outcome="error", status=401, error="bad key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx", error_kind="UpstreamError")
    with caplog.at_level(logging.INFO, logger="toolwire.exchange"):
        LogObserver().finished(finished)
    [(_, line)] = logged(caplog)
    assert line["error"] == "bad key [redacted]"
