"""``WebSocketTransport``: how the pipeline's answers reach a WebSocket client, message by message.

A request on a WebSocket always streams, so the pipeline never hands this transport a
whole Response; should it, the Response goes out as the terminal event its status names,
so the client still reads one stream that ends properly.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from toolwire.server._transport import ErrorAnswer
from toolwire.server._websocket import ResponsesConnection, WebSocketTransport, error_event


class Sent:
    """Stands in for the connection: the JSON messages it was asked to send."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def send_json(self, event: dict[str, Any]) -> None:
        self.messages.append(event)


def transport() -> tuple[WebSocketTransport, Sent]:
    sent = Sent()
    return WebSocketTransport(cast(ResponsesConnection, sent)), sent


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        ("completed", "response.completed"),
        ("incomplete", "response.incomplete"),
        ("failed", "response.failed"),
        (None, "response.completed"),
    ],
)
async def test_a_whole_response_goes_out_as_its_terminal_event(status: str | None, kind: str) -> None:
    websocket, sent = transport()
    response = {"id": "resp_1", "object": "response", "status": status, "output": []}
    await websocket.send_response(response)
    assert sent.messages == [{"type": kind, "sequence_number": 0, "response": response}]


async def test_events_go_out_one_message_each_and_an_error_as_the_error_event() -> None:
    websocket, sent = transport()
    await websocket.open_stream()
    await websocket.send_events([{"type": "a"}, {"type": "b"}], last=True)
    await websocket.send_error(ErrorAnswer(429, {"error": {"message": "slow down", "type": "rate_limit"}}, "7"))
    assert sent.messages == [
        {"type": "a"},
        {"type": "b"},
        {
            "type": "error",
            "status": 429,
            "error": {"message": "slow down", "type": "rate_limit", "code": "rate_limit"},
            "headers": {"retry-after": "7"},
        },
    ]


def test_an_error_without_a_code_or_a_type_is_a_server_error() -> None:
    assert error_event(ErrorAnswer(500, {"error": {"message": "boom"}})) == {
        "type": "error", "status": 500, "error": {"message": "boom", "code": "server_error"},
    }  # fmt: skip


@pytest.mark.parametrize("failure", [OSError("the peer reset the connection"), RuntimeError("Unexpected ASGI message 'websocket.close'")])
async def test_a_send_to_a_client_already_gone_is_given_up_quietly(failure: Exception) -> None:
    """What the ASGI server raises when the client left (OSError) or the connection was
    closed already (RuntimeError): there is no one left to tell, so nothing is raised."""

    async def sending() -> None:
        raise failure

    await ResponsesConnection._guarded(sending())
