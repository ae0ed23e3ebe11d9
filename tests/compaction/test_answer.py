"""``CompactionAnswer`` over the Chat wire's translator: whatever the model streams, the
client gets exactly one sealed ``compaction`` item, or a failure."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.compaction import CompactionAnswer, CompactionSeal
from toolwire.errors import UpstreamError
from toolwire.protocol import parse_request
from toolwire.translate import (
    PRESETS,
    ChatStreamTranslator,
    ResponsesCapabilities,
    ResponsesStreamRestorer,
    downgrade_request,
    translate_request,
)

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


def machine(request: Any = REQUEST) -> CompactionAnswer:
    translated = translate_request(request, PRESETS["generic"])
    inner = ChatStreamTranslator(request, translated.tools, response_id="resp_c", created_at=100, model="client-model")
    return CompactionAnswer(
        inner, request, seal=lambda text: SEAL.seal(text, "alice"), response_id="resp_c", created_at=100, model="client-model"
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
    assert "safety_identifier" not in compacted and "service_tier" not in compacted


def test_the_compaction_object_repeats_the_identifier_and_tier_the_client_sent() -> None:
    completion = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Sum."}, "finish_reason": "stop"}]}
    fields = {"safety_identifier": "user-7", "service_tier": "flex"}
    for sent, repeated in [(fields, fields), ({"safety_identifier": None, "service_tier": 3}, {})]:
        answer = machine(parse_request({**REQUEST.model_dump(exclude_none=True), **sent}))
        compacted = answer.compaction_object(answer.translate_whole(completion), [])
        assert {key: compacted[key] for key in fields if key in compacted} == repeated


def test_whole_without_a_summary_is_an_upstream_error() -> None:
    completion = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "  "}, "finish_reason": "stop"}]}
    with pytest.raises(UpstreamError, match="no summary"):
        machine().translate_whole(completion)


def test_the_item_is_output_zero_and_the_response_keeps_its_creation_time() -> None:
    answer = machine()
    events: list[Any] = answer.start() + answer.feed(chunk({"content": "Summary."})) + answer.feed(chunk(finish="stop"))
    events += answer.finish()  # ended cleanly, as the server says by default
    added, done, completed = events[2], events[3], events[4]
    assert (added["output_index"], done["output_index"]) == (0, 0)
    assert completed["response"]["created_at"] == 100
    assert answer.response is completed["response"]


def test_a_stream_cut_before_its_end_fails_the_compaction() -> None:
    answer = machine()
    events = answer.start() + answer.feed(chunk({"content": "Half a sum"})) + answer.finish(ended_cleanly=False)
    assert [e["type"] for e in events][-2:] == ["error", "response.failed"]


def test_a_stream_without_a_finish_reason_that_ended_cleanly_completes() -> None:
    answer = machine()
    events = answer.start() + answer.feed(chunk({"content": "Summary."})) + answer.finish()
    assert events[-1]["type"] == "response.completed"
    assert SEAL.open(events[-1]["response"]["output"][0]["encrypted_content"], "alice") == "Summary."


def test_a_refusal_is_no_summary() -> None:
    events = run([chunk({"refusal": "I cannot summarise this."}), chunk(finish="stop")])
    assert [e["type"] for e in events][-2:] == ["error", "response.failed"]
    assert events[-1]["response"]["error"] == {
        "code": "server_error",
        "message": "The model wrote no summary of the conversation, so it could not be compacted.",
    }


def test_a_failure_keeps_what_the_backend_reported_it_used() -> None:
    events = run([chunk({"content": "half"}), chunk(usage=USAGE), {"error": {"message": "model crashed"}}])
    failed = events[-1]["response"]
    assert (failed["status"], failed["output"]) == ("failed", [])
    assert failed["usage"]["input_tokens"] == 900
    assert events[-2]["message"] == "model crashed"
    no_summary = run([chunk({"content": " "}), chunk(finish="stop"), chunk(usage=USAGE)])[-1]["response"]
    assert (no_summary["status"], no_summary["output"], no_summary["usage"]["input_tokens"]) == ("failed", [], 900)


def test_a_transport_failure_says_what_happened() -> None:
    answer = machine()
    answer.start()
    events: list[Any] = answer.feed(chunk({"content": "half"})) + answer.fail("connection reset")
    assert (events[0]["code"], events[0]["message"]) == ("server_error", "connection reset")
    assert events[1]["response"]["error"] == {"code": "server_error", "message": "connection reset"}
    answer = machine()
    answer.start()
    failed: list[Any] = answer.fail("too long", code="context_length_exceeded")
    assert failed[0]["code"] == "context_length_exceeded"


def test_the_repairs_are_the_inner_translators() -> None:
    translated = translate_request(REQUEST, PRESETS["generic"])
    inner = ChatStreamTranslator(REQUEST, translated.tools, response_id="resp_c", created_at=100, model="client-model")
    answer = CompactionAnswer(inner, REQUEST, seal=lambda text: text, response_id="resp_c", created_at=100, model="m")
    assert answer.conversions is inner.conversions


# ---------------------------------------------------------------- over the Responses wire


def responses_machine() -> CompactionAnswer:
    downgraded = downgrade_request(REQUEST, ResponsesCapabilities())
    inner = ResponsesStreamRestorer(downgraded, response_id="resp_c", created_at=100, model="client-model")
    return CompactionAnswer(
        inner, REQUEST, seal=lambda text: SEAL.seal(text, "alice"), response_id="resp_c", created_at=100, model="client-model"
    )


def message(*texts: str) -> JSON:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text} for text in texts]}


def test_every_message_the_model_wrote_is_the_summary() -> None:
    answer = {
        "id": "resp_up",
        "status": "completed",
        "completed_at": 150,
        "output": [
            {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "thinking"}]},
            message("Part one."),
            {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
            message("Part two.", " "),
        ],
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    }
    response = responses_machine().translate_whole(answer)
    [item] = response["output"]
    assert SEAL.open(item["encrypted_content"], "alice") == "Part one.\n\nPart two."
    assert (response["completed_at"], response["usage"]["total_tokens"]) == (150, 15)


def test_a_completion_time_that_is_no_integer_is_left_out() -> None:
    answer = {"id": "resp_up", "status": "completed", "completed_at": 150.5, "output": [message("Summary.")]}
    assert responses_machine().translate_whole(answer)["completed_at"] is None


@pytest.mark.parametrize(
    ("error", "message_seen"),
    [
        ({"code": "rate_limited", "message": "Slow down."}, "Slow down."),
        ({"code": "rate_limited"}, "The response failed."),  # the Responses wire completes the error
        (None, "The backend failed to write the summary."),
        ("down", "The backend failed to write the summary."),
    ],
    ids=["message", "no-message", "no-error", "error-not-an-object"],
)
def test_a_whole_failed_answer_is_an_upstream_error_saying_why(error: object, message_seen: str) -> None:
    with pytest.raises(UpstreamError) as caught:
        responses_machine().translate_whole({"id": "resp_up", "status": "failed", "error": error, "output": []})
    assert caught.value.message == message_seen


def test_a_whole_answer_without_a_summary_says_so() -> None:
    with pytest.raises(UpstreamError) as caught:
        responses_machine().translate_whole({"id": "resp_up", "status": "completed", "output": [message(" ")]})
    assert caught.value.message == "The model wrote no summary of the conversation, so it could not be compacted."


@pytest.mark.parametrize(
    ("error", "code", "message_seen"),
    [
        ({"code": "rate_limited", "message": "Slow down."}, "rate_limited", "Slow down."),
        ({}, "server_error", "The response failed."),  # the Responses wire completes the error
        ("down", "server_error", "The backend failed to write the summary."),
    ],
    ids=["code-and-message", "neither", "error-not-an-object"],
)
def test_a_streamed_failure_passes_on_the_backends_code_and_message(error: object, code: str, message_seen: str) -> None:
    answer = responses_machine()
    failed = {"id": "resp_up", "status": "failed", "error": error, "output": [], "usage": {"input_tokens": 7, "output_tokens": 0}}
    events: list[Any] = answer.start() + answer.feed({"type": "response.failed", "sequence_number": 0, "response": failed})
    assert [e["type"] for e in events] == ["response.created", "response.in_progress", "error", "response.failed"]
    assert (events[2]["code"], events[2]["message"]) == (code, message_seen)
    final = events[3]["response"]
    assert final["error"] == {"code": code, "message": message_seen}
    assert (final["output"], final["usage"]["input_tokens"]) == ([], 7)


def test_a_streamed_answer_over_the_responses_wire() -> None:
    answer = responses_machine()
    completed = {"id": "resp_up", "status": "completed", "completed_at": 160, "output": [message("Summary.")]}
    events: list[Any] = answer.start() + answer.feed({"type": "response.completed", "sequence_number": 0, "response": completed})
    assert events[-1]["type"] == "response.completed"
    final = events[-1]["response"]
    assert (final["status"], final["completed_at"]) == ("completed", 160)
    assert SEAL.open(final["output"][0]["encrypted_content"], "alice") == "Summary."


def test_the_compaction_object_keeps_the_ids_messages_have() -> None:
    response = responses_machine().translate_whole({"id": "resp_up", "status": "completed", "output": [message("S.")]})
    retained = [
        {"id": "msg_kept", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "b"}]},
    ]
    compacted = responses_machine().compaction_object(response, retained)
    assert compacted["output"][0]["id"] == "msg_kept"
    assert compacted["output"][1]["id"].startswith("msg_") and compacted["output"][1]["id"] != "msg_kept"
    assert (compacted["created_at"], compacted["output"][2]) == (100, response["output"][0])


def test_before_its_end_a_compaction_is_in_progress_with_what_the_backend_reported() -> None:
    """A client that leaves mid-compaction is charged what the backend reported so far."""
    answer = machine()
    answer.start()
    answer.feed(chunk({"content": "Half a summ"}))
    answer.feed(chunk(usage=USAGE))
    so_far = answer.response
    assert not answer.finished
    assert (so_far["status"], so_far["output"], so_far["id"]) == ("in_progress", [], "resp_c")
    assert (so_far["usage"]["input_tokens"], so_far["usage"]["total_tokens"]) == (900, 940)
