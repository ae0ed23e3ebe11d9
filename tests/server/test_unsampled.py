"""``UnsampledAnswer``: the answer of a ``generate: false`` request, with nothing asked upstream.

It stands in for a backend's answer translator, so it is checked as one: the stream it
writes, what it says before and after it ends, a failure (a shutdown could cut it), and
the whole Response the translator protocol asks for.
"""

from __future__ import annotations

import time

from toolwire.protocol import parse_request
from toolwire.server._unsampled import UnsampledAnswer

REQUEST = parse_request(b'{"model": "gpt-test", "input": "hi", "instructions": "Be brief.", "stream": true}')


def unsampled() -> UnsampledAnswer:
    return UnsampledAnswer(REQUEST, response_id="resp_1", created_at=100)


def test_before_it_starts_the_response_is_in_progress_and_empty() -> None:
    answer = unsampled()
    assert not answer.finished
    snapshot = answer.response
    assert (snapshot["id"], snapshot["status"], snapshot["output"], snapshot["model"]) == ("resp_1", "in_progress", [], "gpt-test")
    assert snapshot["instructions"] == "Be brief."
    assert answer.feed({"anything": 1}) == []


def test_it_ends_completed_and_empty_as_soon_as_it_starts() -> None:
    answer = unsampled()
    started = answer.start()
    assert [event["type"] for event in started] == ["response.created", "response.in_progress"]
    ended = answer.finish(completed_at=123)
    [completed] = ended
    assert (completed["type"], completed["sequence_number"]) == ("response.completed", 2)
    response = completed["response"]
    assert (response["status"], response["output"], response["usage"], response["completed_at"]) == ("completed", [], None, 123)
    assert answer.finished and answer.response == response
    assert answer.finish() == [] and answer.fail("too late") == []


def test_without_a_time_it_ends_now() -> None:
    answer = unsampled()
    before = int(time.time())
    [*_, completed] = answer.finish()
    assert before <= completed["response"]["completed_at"] <= int(time.time())


def test_a_failure_before_the_end() -> None:
    answer = unsampled()
    events = answer.fail("The gateway is shutting down.")
    assert [event["type"] for event in events] == ["response.created", "response.in_progress", "error", "response.failed"]
    error, failed = events[2], events[3]
    assert (error["code"], error["message"]) == ("server_error", "The gateway is shutting down.")
    response = failed["response"]
    assert response["status"] == "failed" and response["output"] == []
    assert response["error"] == {"code": "server_error", "message": "The gateway is shutting down."}
    assert answer.finished
    assert answer.fail("again", code="other") == []


def test_a_failure_with_its_own_code() -> None:
    [*_, failed] = unsampled().fail("no", code="rate_limit_exceeded")
    assert failed["response"]["error"] == {"code": "rate_limit_exceeded", "message": "no"}


def test_the_whole_response_is_completed_and_empty() -> None:
    before = int(time.time())
    whole = unsampled().translate_whole({"ignored": True})
    assert (whole["id"], whole["status"], whole["output"], whole["model"]) == ("resp_1", "completed", [], "gpt-test")
    assert before <= whole["completed_at"] <= int(time.time())
