"""``bench.stream_path``: each layer really carries the canned answer through (the relay
passes the upstream's bytes on as they came, toolwire's layers give the whole Responses
stream), and a quick measurement reports every layer. No timing is asserted."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from bench import stream_path
from bench import upstream as canned
from toolwire.protocol import SSEDecoder

ANSWER = "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in canned.text_chunks(40)[:-1])


def sent_through(layer: str, reads: str = "event") -> tuple[list[dict[str, Any]], bytes]:
    messages: list[dict[str, Any]] = []

    async def keep(message: dict[str, Any]) -> None:
        messages.append(message)

    path = stream_path.StreamPath("v2", send=keep, reads=reads)
    asyncio.run(path.run(layer))
    return messages, b"".join(m.get("body", b"") for m in messages)


@pytest.mark.parametrize("reads", ["event", "answer"])
@pytest.mark.parametrize("layer", ["encoded", "pump"])
def test_toolwire_layers_stream_the_whole_answer(layer: str, reads: str) -> None:
    messages, body = sent_through(layer, reads)
    assert messages[0]["type"] == "http.response.start"
    assert [m["more_body"] for m in messages[1:]][-1] is False
    events = [orjson.loads(e.data) for e in SSEDecoder().feed(body)]
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1]["type"] == "response.completed"
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == ANSWER
    assert events[-1]["response"]["usage"]["output_tokens"] > 0
    deltas = sum(e["type"] == "response.output_text.delta" for e in events)
    assert deltas == (40 if reads == "event" else 2)  # in one read: the first teaches the rest's shape


def test_reads_are_one_event_each_or_the_whole_answer() -> None:
    assert len(stream_path.StreamPath(reads="event").frames) == 44
    assert stream_path.StreamPath(reads="answer").frames == [b"".join(stream_path.StreamPath().frames)]
    with pytest.raises(ValueError, match="reads: event or answer, not 'lines'"):
        stream_path.StreamPath(reads="lines")


def test_the_relay_passes_the_upstream_bytes_on() -> None:
    messages, body = sent_through("relay")
    assert body == b"".join(stream_path.StreamPath().frames)
    assert len(messages) > 2  # read by read, not gathered


@pytest.mark.parametrize("reads", ["event", "answer"])
def test_a_quick_measurement_reports_every_layer(reads: str) -> None:
    costs = stream_path.measure(quick=True, reads=reads)
    assert [c.layer for c in costs] == list(stream_path.LAYERS)
    assert all(c.us_per_stream > 0 for c in costs)
    table = stream_path.table(costs)
    assert all(f"`{layer}`" in table for layer in stream_path.LAYERS)
