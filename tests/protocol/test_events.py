"""parse_event: the envelope of a Responses stream event, and the event type sets."""

from __future__ import annotations

import pytest

from toolwire.errors import UpstreamProtocolError
from toolwire.protocol import EVENT_TYPES, TERMINAL_EVENT_TYPES, parse_event

from .reference_stream import reference_events


def test_terminal_events() -> None:
    assert {"response.completed", "response.failed", "response.incomplete"} == TERMINAL_EVENT_TYPES
    assert TERMINAL_EVENT_TYPES <= EVENT_TYPES


def test_reference_stream_uses_only_known_event_types() -> None:
    assert {event["type"] for event in reference_events()} <= EVENT_TYPES


@pytest.mark.parametrize("data", ['{"type": "response.created", "x": 1}', b'{"type": "response.created", "x": 1}'])
def test_parse_event(data: str | bytes) -> None:
    assert parse_event(data) == {"type": "response.created", "x": 1}


def test_unknown_event_type_is_returned_as_is() -> None:
    assert parse_event('{"type": "codex.response.metadata"}') == {"type": "codex.response.metadata"}


@pytest.mark.parametrize("data", ["", "[DONE]", "[]", '{"type": null}', '{"type": 1}', '{"delta": "x"}'])
def test_bad_event_is_an_upstream_protocol_error(data: str) -> None:
    with pytest.raises(UpstreamProtocolError):
        parse_event(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{", "Stream event is not valid JSON: unexpected end of data: line 1 column 2 (char 1)."),
        ("[]", "Stream event is not a JSON object with a string 'type'."),
        ('{"type": 1}', "Stream event is not a JSON object with a string 'type'."),
    ],
)
def test_a_bad_event_says_what_is_wrong_with_it(data: str, message: str) -> None:
    with pytest.raises(UpstreamProtocolError) as caught:
        parse_event(data)
    assert caught.value.message == message
