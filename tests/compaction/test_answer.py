"""``CompactionAnswer`` over the Chat wire's translator: whatever the model streams, the
client gets exactly one sealed ``compaction`` item, or a failure."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.compaction import CompactionAnswer, CompactionSeal
from toolwire.errors import UpstreamError
from toolwire.protocol import parse_request
from toolwire.translate import PRESETS, ChatStreamTranslator, translate_request

JSON = dict[str, Any]
SEAL = CompactionSeal(bytes(32))
REQUEST = parse_request(
    {
        "model": "client-model",
        "input": [{"role": "user", "content": "hi"}, {"type": "compaction_trigger"}],
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "store": False,
    }
)


def chunk(delta: JSON | None = None, finish: str | None = None, usage: JSON | None = None) -> JSON:
    choices = [] if delta is None and finish is None else [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    found: JSON = {"id": "c", "object": "chat.completion.chunk", "choices": choices}
    if usage is not None:
        found["usage"] = usage
    return found


def machine() -> CompactionAnswer:
    translated = translate_request(REQUEST, PRESETS["generic"])
    inner = ChatStreamTranslator(REQUEST, translated.tools, response_id="resp_c", created_at=100, model="client-model")
    return CompactionAnswer(
        inner, REQUEST, seal=lambda text: SEAL.seal(text, "alice"), response_id="resp_c", created_at=100, model="client-model"
    )


def run(chunks: list[JSON]) -> list[JSON]:
    answer = machine()
    events: list[Any] = answer.start()
    for item in chunks:
        events += answer.feed(item)
    events += answer.finish(completed_at=123)
    assert answer.finished and answer.finish() == [] and answer.fail("late") == []
    return events


USAGE = {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940}


def test_the_summary_becomes_one_sealed_compaction_item() -> None:
    events = run(
        [
            chunk({"role": "assistant", "reasoning_content": "let me think"}),
            chunk({"content": "The user "}),
            chunk({"content": "wants X."}),
            chunk(finish="stop"),
            chunk(usage=USAGE),
        ]
    )
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(5))
    final = events[-1]["response"]
    [item] = final["output"]
    assert item == events[2]["item"] == events[3]["item"]
    assert set(item) == {"id", "type", "encrypted_content"} and item["type"] == "compaction"
    assert item["id"].startswith("cmp_")
    assert SEAL.open(item["encrypted_content"], "alice") == "The user wants X."
    assert final["usage"]["input_tokens"] == 900 and final["usage"]["output_tokens"] == 40
    assert final["completed_at"] == 123 and final["model"] == "client-model" and final["id"] == "resp_c"
    assert final["tools"][0]["name"] == "f"  # the client's request is echoed


def test_a_model_that_writes_no_summary_fails_the_compaction() -> None:
    events = run([chunk({"role": "assistant", "content": ""}), chunk(finish="stop")])
    assert [e["type"] for e in events][-2:] == ["error", "response.failed"]
    assert "no summary" in events[-1]["response"]["error"]["message"]
    assert events[-1]["response"]["output"] == []


def test_a_backend_failure_fails_the_compaction() -> None:
    events = run([chunk({"content": "half"}), {"error": {"message": "model crashed", "code": 500}}])
    assert [e["type"] for e in events][-2:] == ["error", "response.failed"]
    assert "model crashed" in events[-1]["response"]["error"]["message"]
    assert not any(e["type"] == "response.output_item.added" for e in events)


def test_a_transport_failure_fails_the_compaction() -> None:
    answer = machine()
    events = answer.start() + answer.feed(chunk({"content": "half"})) + answer.fail("connection reset")
    assert [e["type"] for e in events] == ["response.created", "response.in_progress", "error", "response.failed"]


def test_whole() -> None:
    completion = {
        "id": "c",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Summary."}, "finish_reason": "stop"}],
        "usage": USAGE,
    }
    answer = machine()
    response = answer.translate_whole(completion)
    [item] = response["output"]
    assert response["status"] == "completed" and SEAL.open(item["encrypted_content"], "alice") == "Summary."
    retained = [{"type": "message", "role": "user", "status": "completed", "content": [{"type": "input_text", "text": "hi"}]}]
    compacted = answer.compaction_object(response, retained)
    assert compacted["object"] == "response.compaction" and compacted["id"] == "resp_c"
    assert compacted["output"][-1] == item and compacted["output"][0]["id"].startswith("msg_")
    assert compacted["usage"]["total_tokens"] == 940


def test_whole_without_a_summary_is_an_upstream_error() -> None:
    completion = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "  "}, "finish_reason": "stop"}]}
    with pytest.raises(UpstreamError, match="no summary"):
        machine().translate_whole(completion)
