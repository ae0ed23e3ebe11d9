"""The gateway process end to end over HTTP: a real ``toolwire serve`` in front of the
scripted Chat upstream, driven with plain HTTP requests."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from tests.support.chat_upstream import Call, ChatUpstream, Cut, HttpError, Text, ToolCalls
from tests.support.gateway import UPSTREAM_KEY, GatewayProcess
from toolwire.protocol import SSEDecoder


def post(gateway: GatewayProcess, body: Any, **kwargs: Any) -> httpx.Response:
    return httpx.post(gateway.base_url + "/responses", json=body, timeout=30, **kwargs)


def stream_events(gateway: GatewayProcess, body: dict[str, Any]) -> list[dict[str, Any]]:
    decoder = SSEDecoder()
    events = []
    with httpx.stream("POST", gateway.base_url + "/responses", json={**body, "stream": True}, timeout=30) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for chunk in response.iter_raw():
            events.extend(orjson.loads(event.data) for event in decoder.feed(chunk))
    return events


def test_plain_answer_not_streaming(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("Hello there."))
    response = post(gateway, {"model": "qwen3", "input": "Say hello", "instructions": "Be brief."})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "response" and body["status"] == "completed"
    assert body["model"] == "qwen3"
    [message] = body["output"]
    assert message["content"][0]["text"] == "Hello there."
    sent = upstream.chat_requests[0]
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
    assert sent["model"] == "qwen3"


def test_streamed_function_call_keeps_its_namespace(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(ToolCalls([Call("collaboration__list_agents", "{}")]))
    events = stream_events(
        gateway,
        {
            "model": "m",
            "input": [{"type": "message", "role": "user", "content": "who is there?"}],
            "tools": [
                {
                    "type": "namespace",
                    "name": "collaboration",
                    "description": "agents",
                    "tools": [{"type": "function", "name": "list_agents", "parameters": {"type": "object"}}],
                }
            ],
        },
    )
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    [call] = events[-1]["response"]["output"]
    assert call["type"] == "function_call"
    assert (call["namespace"], call["name"]) == ("collaboration", "list_agents")
    assert upstream.chat_requests[0]["tools"][0]["function"]["name"] == "collaboration__list_agents"


def test_upstream_key_is_sent_and_client_key_is_not(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("ok"))
    post(gateway, {"model": "m", "input": "hi"}, headers={"Authorization": "Bearer client-key-123"})
    headers = {k.lower(): v for k, v in upstream.requests[0].headers.items()}
    assert headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert "client-key-123" not in str(upstream.requests[0].headers)


def test_upstream_error_keeps_status_and_message(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(
        HttpError(429, {"error": {"message": "Slow down, please", "type": "rate_limit"}}, {"retry-after": "7"})
    )
    response = post(gateway, {"model": "m", "input": "hi", "stream": True})
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    assert "Slow down, please" in response.json()["error"]["message"]


def test_upstream_5xx_is_retried_before_streaming(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(HttpError(503, {"error": {"message": "warming up"}}), Text("second try"))
    events = stream_events(gateway, {"model": "m", "input": "hi"})
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "second try"


@pytest.mark.parametrize(("upstream_status", "client_status"), [(500, 502), (502, 502), (503, 503)])
def test_persistent_5xx_reaches_the_client(
    gateway: GatewayProcess, upstream: ChatUpstream, upstream_status: int, client_status: int
) -> None:
    """An upstream 500 becomes 502 (the gateway's backend failed); other statuses pass as they are."""
    upstream.enqueue(*[HttpError(upstream_status, {"error": {"message": "model crashed"}})] * 2)
    response = post(gateway, {"model": "m", "input": "hi", "stream": True})
    assert response.status_code == client_status
    assert "model crashed" in response.json()["error"]["message"]


def test_mid_stream_cut_fails_the_response(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Cut(after_chunks=3))
    events = stream_events(gateway, {"model": "m", "input": "hi"})
    terminal = [e for e in events if e["type"] in {"response.completed", "response.failed", "response.incomplete"}]
    assert [e["type"] for e in terminal] == ["response.failed"]
    assert terminal[0]["response"]["error"]["code"] == "server_error"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "hi"}, "model"),
        ({"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]}, "input[0].arguments"),
        ({"model": "m", "input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
    ],
)
def test_malformed_requests_get_400_naming_the_field(
    gateway: GatewayProcess, upstream: ChatUpstream, body: dict[str, Any], param: str
) -> None:
    response = post(gateway, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == param and param in error["message"]
    assert upstream.requests == []


def test_invalid_json_gets_400(gateway: GatewayProcess) -> None:
    response = httpx.post(gateway.base_url + "/responses", content=b"{nope", timeout=10)
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["error"]["message"]


def test_health(gateway: GatewayProcess) -> None:
    assert httpx.get(gateway.url + "/healthz").json() == {"status": "ok"}
    assert httpx.get(gateway.url + "/readyz").status_code == 200
