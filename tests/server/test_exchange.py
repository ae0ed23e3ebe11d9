"""``Exchange``, the record observers read, and ``as_toolwire_error``, the one place a failure
gets its status: pure, without a server."""

from __future__ import annotations

import logging

import orjson
import pytest

from toolwire.errors import InternalError, NotFoundError, RequestError, UpstreamError
from toolwire.protocol import PlainChunks, WholeAnswer
from toolwire.server import Exchange
from toolwire.server._errors import as_toolwire_error, send_error
from toolwire.tools import ConfigurationError


def test_a_finished_exchange_sums_up_its_response() -> None:
    exchange = Exchange("resp_1", b"{}")
    response = {
        "status": "completed",
        "usage": {"input_tokens": 3},
        "output": [
            {"type": "function_call", "name": "ls", "namespace": "fs"},
            {"type": "custom_tool_call", "name": "apply_patch"},
            {"type": "tool_search_call"},
            {"type": "message"},
        ],
    }
    exchange.finish("completed", response=response, status=201)
    assert (exchange.outcome, exchange.status, exchange.response, exchange.usage) == ("completed", 201, response, {"input_tokens": 3})
    assert [(c.type, c.name, c.namespace) for c in exchange.tool_calls] == [
        ("function_call", "ls", "fs"), ("custom_tool_call", "apply_patch", None), ("tool_search_call", "tool_search", None),
    ]  # fmt: skip
    assert exchange.latency is not None and exchange.latency >= 0
    exchange.finish("failed", status=500)  # only the first ending counts
    assert (exchange.outcome, exchange.status) == ("completed", 201)


def test_a_failed_response_gives_its_error_unless_one_was_given() -> None:
    failed = Exchange("resp_1", b"{}")
    failed.finish("failed", response={"status": "failed", "error": {"message": "cut", "code": "server_error"}, "output": None})
    assert (failed.error, failed.error_kind, failed.tool_calls, failed.status) == ("cut", "server_error", [], 200)
    told = Exchange("resp_2", b"{}")
    told.finish("failed", response={"status": "failed", "error": {"message": "cut"}}, error="given", error_kind="Kind")
    assert (told.error, told.error_kind) == ("given", "Kind")
    bare = Exchange("resp_3", b"{}")
    bare.finish("failed", response={"status": "failed"})
    assert (bare.error, bare.error_kind) == (None, None)


def test_traffic_is_kept_only_when_an_observer_wants_it() -> None:
    quiet = Exchange("resp_1", b"{}")
    quiet.note_upstream_request({"model": "m"})
    quiet.note_chunk({"a": 1})
    quiet.note_events([{"type": "x"}])
    assert (quiet.upstream_request, quiet.upstream_chunks, quiet.events, quiet.upstream_request_json()) == (None, [], [], None)
    assert quiet.first_token_at is not None and quiet.time_to_first_token is not None
    recorded = Exchange("resp_2", b"{}", record_traffic=True)
    recorded.note_upstream_request({"model": "m"})
    recorded.note_chunk({"a": 1})
    first = recorded.first_token_at
    recorded.note_chunk({"a": 2})
    recorded.note_events([{"type": "x"}])
    assert recorded.first_token_at == first, "the first token is the first chunk's"
    assert recorded.upstream_request_json() == {"model": "m"}
    assert orjson.dumps({"sent": recorded.upstream_request}) == b'{"sent":{"model":"m"}}'
    assert (recorded.upstream_chunks, recorded.events) == ([{"a": 1}, {"a": 2}], [{"type": "x"}])
    assert Exchange("resp_3", b"").latency is None and Exchange("resp_4", b"").time_to_first_token is None


def test_plain_chunks_are_recorded_as_the_chunks_they_were() -> None:
    recorded = Exchange("resp_1", b"{}", record_traffic=True)
    recorded.note_chunk({"a": 1})
    recorded.note_chunk(PlainChunks("xy", b'data: {"b":"x"}\n\ndata: {"b":"y"}\n\n'))
    assert recorded.upstream_chunks == [{"a": 1}, {"b": "x"}, {"b": "y"}]


def test_an_answer_that_came_whole_is_recorded_as_the_answer_it_was() -> None:
    """An upstream that ignored ``stream``: its one JSON object, not the wrapper around it."""
    recorded = Exchange("resp_1", b"{}", record_traffic=True)
    recorded.note_chunk(WholeAnswer({"choices": [{"message": {"content": "hi"}}]}))
    assert recorded.upstream_chunks == [{"choices": [{"message": {"content": "hi"}}]}]


def test_conversions_are_each_noted_once_in_the_order_first_noted() -> None:
    exchange = Exchange("resp_1", b"{}")
    exchange.conversions = ["namespace tools flattened", "custom tool calls sent as function calls"]
    exchange.note_conversions([])
    exchange.note_conversions(["custom apply_patch restored", "namespace tools flattened", "custom apply_patch restored"])
    assert exchange.conversions == [
        "namespace tools flattened", "custom tool calls sent as function calls", "custom apply_patch restored",
    ]  # fmt: skip


def test_every_failure_gets_a_status(caplog: pytest.LogCaptureFixture) -> None:
    ours = NotFoundError("gone")
    assert as_toolwire_error(ours) is ours
    tools = as_toolwire_error(ConfigurationError("The tool x is registered twice."))
    assert (type(tools), tools.status, tools.param, tools.code, tools.message) == (
        RequestError, 400, "tools", "invalid_tools", "The tool x is registered twice.",
    )  # fmt: skip
    with caplog.at_level(logging.ERROR, logger="toolwire.server"):
        bug = as_toolwire_error(KeyError("secret detail"))
    assert type(bug) is InternalError and bug.status == 500
    assert bug.message == "The gateway failed to handle this request (an internal error; see its log)."
    assert "secret detail" not in bug.message
    [record] = caplog.records
    assert record.getMessage() == "internal error" and record.exc_info is not None


async def test_an_error_sent_with_its_status_and_retry_after() -> None:
    sent: list[dict[str, object]] = []

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    await send_error(send, UpstreamError("slow down", status=429, retry_after="7"))
    await send_error(send, NotFoundError("gone"))
    limited, limited_body, gone, _ = sent
    assert limited["status"] == 429 and (b"retry-after", b"7") in limited["headers"]  # type: ignore[operator]
    assert orjson.loads(limited_body["body"])["error"]["message"] == "slow down"  # type: ignore[arg-type]
    assert gone["status"] == 404 and not any(name == b"retry-after" for name, _ in gone["headers"])  # type: ignore[attr-defined]
