"""``TurnFields``: a connection's continuing turns read as ``parse_request`` reads them, with
the fields they resend unchanged validated once; anything else read whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.protocol.codex_fixtures import FIXTURES, load
from toolwire.errors import RequestError
from toolwire.protocol import FunctionTool, ResponsesRequest, TurnFields, parse_request

JSON = dict[str, Any]


def read(turns: TurnFields, body: JSON) -> ResponsesRequest:
    """A turn as the WebSocket hands it over: its bytes and what they decode to."""
    raw = orjson.dumps(body)
    return turns.parse(raw, orjson.loads(raw))


def error_of(reading: Any) -> RequestError:
    with pytest.raises(RequestError) as raised:
        reading()
    return raised.value


def continuing(body: JSON, n: int, item: JSON | str | None = None) -> JSON:
    own: JSON = {"previous_response_id": f"resp_{n}"}
    own["input"] = [item or {"role": "user", "content": [{"type": "input_text", "text": f"go on {n}"}]}]
    return {**{key: value for key, value in body.items() if key != "input"}, **own}


@pytest.mark.parametrize("path", FIXTURES)
def test_codex_turns_read_as_the_whole_path_reads_them(path: Path) -> None:
    _, body = load(path)
    turns = TurnFields()
    items: list[JSON | str] = [
        {"role": "user", "content": "a plain message"},
        {"type": "function_call_output", "call_id": "call_1", "output": "done"},
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": "patched"},
    ]
    read_turns = [read(turns, continuing(body, n, item)) for n, item in enumerate(items)]
    for n, (request, item) in enumerate(zip(read_turns, items, strict=True)):
        assert request == parse_request(orjson.dumps(continuing(body, n, item)))
        assert request.previous_response_id == f"resp_{n}"
    # the fields after the first turn are the first turn's, not validated again
    assert read_turns[1].reasoning is read_turns[2].reasoning
    if body.get("tools"):  # (V1: V2 declares its tools in an input item)
        assert read_turns[1].tools is not read_turns[2].tools  # each request has its own lists


def test_a_string_input_stays_a_string() -> None:
    turns = TurnFields()
    base = {"model": "m", "instructions": "be brief", "previous_response_id": "resp_1"}
    read(turns, {**base, "input": "first"})
    request = read(turns, {**base, "input": "second"})
    assert request.input == "second" and request.instructions == "be brief"


def test_a_changed_field_is_read_whole_and_kept_for_the_turns_after() -> None:
    turns = TurnFields()
    base = {"model": "m", "client_metadata": {"turn": "1"}, "previous_response_id": "resp_1", "input": []}
    read(turns, base)
    changed = {**base, "client_metadata": {"turn": "2"}}
    assert read(turns, changed).model_extra == {"client_metadata": {"turn": "2"}}
    assert read(turns, {**changed, "previous_response_id": "resp_2"}).model_extra == {"client_metadata": {"turn": "2"}}
    assert read(turns, {**base, "previous_response_id": "resp_3"}).model_extra == {"client_metadata": {"turn": "1"}}


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ({"metadata_extra": 1}, {"metadata_extra": 1.0}),  # equal in Python, echoed differently
        ({"flag": True}, {"flag": 1}),
        ({"temperature": 0.5, "top_p": 1.0}, {"top_p": 1.0, "temperature": 0.5}),  # another order
        ({"store": False}, {}),  # a field left out
        ({}, {"user": "someone"}),  # a field added
    ],
)
def test_fields_that_are_not_the_same_bytes_are_read_whole(first: JSON, then: JSON) -> None:
    turns = TurnFields()
    read(turns, {"model": "m", **first, "previous_response_id": "resp_1", "input": "one"})
    body = {"model": "m", **then, "previous_response_id": "resp_2", "input": "two"}
    request = read(turns, body)
    assert request == parse_request(orjson.dumps(body))
    assert orjson.dumps(request.model_dump(exclude_none=True)) == orjson.dumps(
        parse_request(orjson.dumps(body)).model_dump(exclude_none=True)
    )


def test_a_turn_that_continues_nothing_is_read_whole_and_keeps_no_fields() -> None:
    turns = TurnFields()
    base = {"model": "m", "instructions": "one", "previous_response_id": "resp_1", "input": "x"}
    read(turns, base)
    fresh = read(turns, {"model": "m", "instructions": "two", "input": "start over"})
    assert fresh.previous_response_id is None and fresh.instructions == "two"
    assert read(turns, {**base, "previous_response_id": "resp_2"}).instructions == "one"


def test_a_continuing_turns_own_error_says_where_as_the_whole_paths_does() -> None:
    turns = TurnFields()
    base = {"model": "m", "previous_response_id": "resp_1", "input": "fine"}
    read(turns, base)
    bad = {**base, "input": [{"type": "function_call_output", "call_id": 7, "output": "x"}]}
    mine, whole = error_of(lambda: read(turns, bad)), error_of(lambda: parse_request(orjson.dumps(bad)))
    assert (mine.message, mine.param, mine.code) == (whole.message, whole.param, whole.code)
    assert mine.param == "input[0].call_id"
    not_an_id = {**base, "previous_response_id": 5}
    assert error_of(lambda: read(turns, not_an_id)).param == "previous_response_id"


def test_a_continuing_turns_own_input_nested_too_deep_is_refused_as_a_whole_body_is() -> None:
    turns = TurnFields()
    read(turns, {"model": "m", "previous_response_id": "resp_1", "input": "fine"})
    raw = b'{"model":"m","previous_response_id":"resp_2","input":' + b"[" * 300 + b"]" * 300 + b"}"
    mine = error_of(lambda: turns.parse(raw, orjson.loads(raw)))
    whole = error_of(lambda: parse_request(raw))
    assert (mine.code, mine.message) == (whole.code, whole.message) and mine.code == "too_deep"


def test_a_request_changed_by_its_reader_leaves_the_next_turn_alone() -> None:
    turns = TurnFields()
    tool = {"type": "function", "name": "shell", "parameters": {"type": "object"}}
    base = {"model": "m", "tools": [tool], "previous_response_id": "resp_1", "input": "one"}
    read(turns, base)
    first = read(turns, {**base, "previous_response_id": "resp_2"})
    assert first.tools is not None
    first.tools.append(FunctionTool(type="function", name="added"))
    second = read(turns, {**base, "previous_response_id": "resp_3"})
    assert second.tools is not None and [t.name for t in second.tools] == ["shell"]  # type: ignore[union-attr]


def test_a_continuing_turns_field_nested_too_deep_is_refused_as_a_whole_body_is() -> None:
    turns = TurnFields()
    raw = b'{"model":"m","previous_response_id":"resp_1","deep":' + b"[" * 300 + b"]" * 300 + b',"input":"x"}'
    mine = error_of(lambda: turns.parse(raw, orjson.loads(raw)))
    whole = error_of(lambda: parse_request(raw))
    assert (mine.code, mine.message) == (whole.code, whole.message) and mine.code == "too_deep"


def test_a_continuing_turns_tool_lists_are_the_ones_seen_before() -> None:
    turns = TurnFields()
    declared = {"type": "additional_tools", "role": "developer", "tools": [
        {"type": "namespace", "name": "ns", "description": "", "tools": [{"type": "function", "name": "seen"}]}
    ]}
    base = {"model": "m", "previous_response_id": "resp_1", "input": [declared]}
    first = read(turns, base)  # read whole: its tool list is kept
    again = read(turns, {**base, "previous_response_id": "resp_2"})  # only its own input validated
    assert again == parse_request(orjson.dumps({**base, "previous_response_id": "resp_2"}))
    assert again.input[0].tools[0] is first.input[0].tools[0]  # type: ignore[union-attr]
