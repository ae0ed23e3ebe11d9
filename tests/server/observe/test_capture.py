"""``CaptureObserver`` (``--capture DIR``): one redacted JSON record per exchange, rotated."""

from __future__ import annotations

import datetime
import fcntl
import logging
import os
import re
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.chat_upstream import Call, ChatUpstream, Raw, ToolCalls
from tests.support.gateway import UPSTREAM_KEY
from tests.support.observed import (
    CUSTOM_PATCH_TOOL,
    PATCH,
    exchange,
    observed_client,
    observed_config,
    same_size,
)
from toolwire.server.observe._capture import CaptureObserver
from toolwire.server.observe._record import RecordEncoder
from toolwire.server.observe._redact import REDACTED, Redactor


def records(directory: Path) -> list[dict[str, Any]]:
    return [
        orjson.loads(line)
        for path in sorted(directory.glob("exchanges-*.jsonl"))
        for line in path.read_bytes().splitlines()
    ]


def test_a_streamed_tool_call_is_captured_with_its_four_sides(upstream: ChatUpstream, tmp_path: Path) -> None:
    upstream.enqueue(ToolCalls([Call("apply_patch", orjson.dumps({"input": PATCH}).decode())]))
    config = observed_config(upstream.base_url, capture_dir=str(tmp_path / "capture"))
    body = {"model": "qwen3", "input": f"my key is {UPSTREAM_KEY}", "stream": True, "tools": [CUSTOM_PATCH_TOOL]}
    with observed_client(config) as (client, _):
        response = client.post("/v1/responses", json=body, headers={"Authorization": "Bearer client-key"})
    assert response.status_code == 200
    [record] = records(tmp_path / "capture")

    assert record["request_id"].startswith("resp_") and record["outcome"] == "completed"
    assert (record["model"], record["upstream"], record["stream"], record["status"]) == ("qwen3", "local", True, 200)
    assert record["tool_calls"] == [{"name": "apply_patch", "namespace": None, "type": "custom_tool_call"}]
    assert "custom apply_patch restored" in record["conversions"]
    assert record["client_request"]["tools"] == [CUSTOM_PATCH_TOOL]
    assert record["upstream_request"]["tools"][0]["function"]["name"] == "apply_patch"
    assert any(chunk["choices"] and chunk["choices"][0]["delta"].get("tool_calls") for chunk in record["upstream_chunks"])
    assert record["events"][0]["type"] == "response.created" and record["events"][-1]["type"] == "response.completed"
    assert record["response"] is None  # a stream: what was sent is the events
    # The key the client pasted is a configured secret: it never reaches the disk.
    raw = next((tmp_path / "capture").glob("*.jsonl")).read_text()
    assert UPSTREAM_KEY not in raw and "client-key" not in raw
    assert record["client_request"]["input"] == f"my key is {REDACTED}"


def test_a_request_that_did_not_stream_keeps_its_response(upstream: ChatUpstream, tmp_path: Path) -> None:
    upstream.enqueue(ToolCalls([Call("shell", '{"cmd": "ls"}')]))
    config = observed_config(upstream.base_url, capture_dir=str(tmp_path))
    tool = {"type": "function", "name": "shell", "parameters": {"type": "object"}}
    with observed_client(config) as (client, _):
        client.post("/v1/responses", json={"model": "m", "input": "list", "tools": [tool]})
    [record] = records(tmp_path)
    [completion] = record["upstream_chunks"]
    assert completion["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "shell"
    assert record["events"] == []
    assert record["response"]["output"][0]["type"] == "function_call"


def test_a_streamed_request_answered_whole_is_captured_with_that_answer(upstream: ChatUpstream, tmp_path: Path) -> None:
    """An upstream that ignores ``stream`` and answers with one completion: the record holds
    that completion as the upstream's side, and the client's stream as sent."""
    completion = {
        "id": "chatcmpl-1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "whole"}, "finish_reason": "stop"}],
    }  # fmt: skip
    upstream.enqueue(Raw([orjson.dumps(completion)], content_type="application/json"))
    with observed_client(observed_config(upstream.base_url, capture_dir=str(tmp_path))) as (client, _):
        response = client.post("/v1/responses", json={"model": "m", "input": "hi", "stream": True})
    assert response.status_code == 200 and "response.completed" in response.text
    [record] = records(tmp_path)
    assert record["outcome"] == "completed" and record["upstream_chunks"] == [completion]
    assert record["events"][-1]["response"]["output"][0]["content"][0]["text"] == "whole"


def test_a_request_that_is_not_json_is_captured_as_text(upstream: ChatUpstream, tmp_path: Path) -> None:
    with observed_client(observed_config(upstream.base_url, capture_dir=str(tmp_path))) as (client, _):
        client.post("/v1/responses", content=b"{not json")
    [record] = records(tmp_path)
    assert (record["client_request"], record["status"], record["error_kind"]) == ("{not json", 400, "RequestError")
    assert record["upstream_request"] is None


def test_files_rotate_by_size_and_only_the_newest_are_kept(tmp_path: Path) -> None:
    capture = CaptureObserver(tmp_path, max_bytes=4000, keep=3)
    size = len(RecordEncoder(Redactor()).redacted(same_size("resp_size"))) + 1
    for n in range(40):
        capture.finished(same_size(f"resp_{n:03}"))
    capture.close()
    files = sorted(tmp_path.glob("exchanges-*.jsonl"))
    assert len(files) == 3
    assert all(path.stat().st_size <= 4000 for path in files)
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in files)
    kept = [record["request_id"] for record in records(tmp_path)]
    per_file = 4000 // size
    assert kept == [f"resp_{n:03}" for n in range(40 - len(kept), 40)]  # the newest, in order
    assert len(kept) > 2 * per_file


def test_a_record_larger_than_a_file_gets_a_file_of_its_own(tmp_path: Path) -> None:
    capture = CaptureObserver(tmp_path, max_bytes=1000, keep=10)
    capture.finished(exchange("resp_small"))
    capture.finished(exchange("resp_big", client_request=orjson.dumps({"model": "m", "input": "x" * 5000})))
    capture.finished(exchange("resp_after"))
    capture.close()
    per_file = [[orjson.loads(line)["request_id"] for line in path.read_bytes().splitlines()]
                for path in sorted(tmp_path.glob("*.jsonl"))]
    assert per_file == [["resp_small"], ["resp_big"], ["resp_after"]]


def test_a_file_removed_by_another_worker_is_replaced(tmp_path: Path) -> None:
    capture = CaptureObserver(tmp_path)
    capture.finished(exchange("resp_1"))
    assert capture.path is not None
    capture.path.unlink()
    capture.finished(exchange("resp_2"))
    capture.close()
    assert [record["request_id"] for record in records(tmp_path)] == ["resp_2"]


def test_a_failing_capture_is_logged_and_never_raises(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = tmp_path / "capture"
    capture = CaptureObserver(directory)
    capture.finished(exchange("resp_1"))
    shutil.rmtree(directory)
    with caplog.at_level(logging.WARNING, logger="toolwire.capture"):
        capture.finished(exchange("resp_2"))
    [warning] = [record for record in caplog.records if record.name == "toolwire.capture"]
    assert re.fullmatch(
        rf"could not capture resp_2 in {re.escape(str(directory))}: \[Errno 2\] No such file or directory: .*",
        warning.getMessage(),
    ), warning.getMessage()
    directory.mkdir()
    capture.finished(exchange("resp_3"))  # and it recovers
    capture.close()
    assert [record["request_id"] for record in records(directory)] == ["resp_3"]


def test_credential_fields_are_redacted(tmp_path: Path) -> None:
    capture = CaptureObserver(tmp_path, encoder=RecordEncoder(Redactor(["hunter2-secret"])))
    upstream_request = {"model": "m", "messages": [], "extra_headers": {"Authorization": "Bearer abcdefghijkl"}}
    capture.finished(
        exchange(
            client_request=orjson.dumps({"model": "m", "input": "hi", "metadata": {"api_key": "k-123"}}),
            upstream_request=upstream_request,
            upstream_chunks=[{"choices": [{"delta": {"content": "the password is hunter2-secret"}}]}],
            error="upstream said: bad key hunter2-secret",
            outcome="failed",
            error_kind="server_error",
        )
    )
    capture.close()
    [record] = records(tmp_path)
    assert record["client_request"]["metadata"] == {"api_key": REDACTED}
    assert record["upstream_request"]["extra_headers"] == {"Authorization": REDACTED}
    assert record["upstream_chunks"][0]["choices"][0]["delta"]["content"] == f"the password is {REDACTED}"
    assert record["error"] == f"upstream said: bad key {REDACTED}"


def test_a_file_is_filled_to_its_size_exactly(tmp_path: Path) -> None:
    exchanges = [same_size(request_id) for request_id in ("resp_1", "resp_2", "resp_3")]
    size = len(RecordEncoder(Redactor()).redacted(exchanges[0])) + 1
    capture = CaptureObserver(tmp_path, max_bytes=2 * size)
    for made in exchanges:
        capture.finished(made)
    capture.close()
    per_file = [[orjson.loads(line)["request_id"] for line in path.read_bytes().splitlines()]
                for path in sorted(tmp_path.glob("*.jsonl"))]
    assert per_file == [["resp_1", "resp_2"], ["resp_3"]]


def test_a_file_is_named_by_its_utc_start_and_the_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # local time nine hours off UTC
    time.tzset()
    try:
        before = datetime.datetime.now(datetime.UTC).replace(microsecond=0, tzinfo=None)
        capture = CaptureObserver(tmp_path)
        capture.finished(exchange("resp_1"))
        path = capture.path
        assert path is not None and capture._fd is not None
        flags, fd_flags = fcntl.fcntl(capture._fd, fcntl.F_GETFL), fcntl.fcntl(capture._fd, fcntl.F_GETFD)
        capture.close()
    finally:
        monkeypatch.undo()
        time.tzset()
    named = re.fullmatch(rf"exchanges-(\d{{8}}T\d{{6}})\d{{6}}Z-{os.getpid()}\.jsonl", path.name)
    assert named, path.name
    started = datetime.datetime.strptime(named[1], "%Y%m%dT%H%M%S")
    assert before <= started <= datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    assert flags & os.O_APPEND and fd_flags & fcntl.FD_CLOEXEC  # appends whole lines; no child inherits it


@pytest.mark.parametrize(("max_bytes", "keep"), [(0, 1), (1, 0)])
def test_capture_needs_a_sane_size(tmp_path: Path, max_bytes: int, keep: int) -> None:
    with pytest.raises(ValueError, match=r"^max_bytes must be positive and keep at least 1$"):
        CaptureObserver(tmp_path, max_bytes=max_bytes, keep=keep)


def test_the_smallest_capture_and_its_private_directory(tmp_path: Path) -> None:
    directory = tmp_path / "not" / "there" / "yet"
    capture = CaptureObserver(directory, max_bytes=1, keep=1)
    assert capture.path is None  # nothing written yet
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for request_id in ("resp_1", "resp_2"):
        capture.finished(exchange(request_id))
    capture.close()
    assert [record["request_id"] for record in records(directory)] == ["resp_2"]  # one file of one record


@pytest.mark.usefixtures("stack_room")
def test_a_record_that_cannot_be_redacted_is_captured_without_its_traffic(tmp_path: Path) -> None:
    deep = b'{"model":"m","input":' + b"[" * 253 + b'{"api_key":"k"}' + b"]" * 253 + b"}"
    capture = CaptureObserver(tmp_path)
    capture.finished(exchange(client_request=deep))
    capture.close()
    [record] = records(tmp_path)
    assert record["traffic_omitted"] == "the record could not be redacted"
    assert "client_request" not in record and record["request_id"] == "resp_1"
