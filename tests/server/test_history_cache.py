"""A long conversation through the real gateway: each turn resends the whole history, as
Codex does (``store: false``), and the gateway parses and translates only what is new,
sending the upstream byte for byte what translating every item sends.

The requests are written as Codex writes them (compact JSON, the input before the tools)
and posted as bytes; the expected upstream body is translated in this process from the
decoded body, which knows no history. ``/metrics`` shows that the gateway did continue
the histories; with ``--history-cache-bytes 0`` it keeps none and sends the same.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import GatewayProcess
from toolwire.protocol import parse_request
from toolwire.translate import GENERIC, translate_request

JSON = dict[str, Any]
TOOLS = [
    {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
    {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
]


def codex_body(items: list[JSON], thread: str) -> bytes:
    return orjson.dumps({
        "model": "gpt-5.5", "stream": True, "input": items, "tools": TOOLS, "tool_choice": "auto",
        "parallel_tool_calls": True, "store": False, "prompt_cache_key": thread,
    })


def tool_turn(thread: str, n: int) -> list[JSON]:
    call_id = f"call_{thread}_{n}"
    return [
        {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": f"step {n}"}]},
        {"type": "function_call", "call_id": call_id, "name": "exec_command", "arguments": f'{{"cmd":"ls {n}"}}'},
        {"type": "function_call_output", "call_id": call_id, "output": f"file_{n}.txt\n" * (n + 1)},
    ]


def expected_upstream_body(body: bytes) -> bytes:
    """What translating every item of ``body`` sends upstream (the gateway's defaults)."""
    return orjson.dumps(translate_request(parse_request(orjson.loads(body)), GENERIC).chat)


def continued(gateway: GatewayProcess) -> float:
    metrics = httpx.get(gateway.url + "/metrics", timeout=10).text
    match = re.search(r"^toolwire_history_continued_total (\S+)$", metrics, re.M)
    assert match is not None, metrics[:2000]
    return float(match[1])


def post(client: httpx.Client, gateway: GatewayProcess, body: bytes) -> None:
    response = client.post(gateway.base_url + "/responses", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert '"type":"response.completed"' in response.text


@pytest.fixture
def answering(upstream: ChatUpstream) -> Iterator[ChatUpstream]:
    upstream.responder = lambda request: Text("done")
    yield upstream


def test_each_turn_of_a_long_session_sends_what_every_item_translated_sends(
    gateway: GatewayProcess, answering: ChatUpstream
) -> None:
    items: list[JSON] = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be careful."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Look around."}]},
    ]
    before = continued(gateway)
    bodies = []
    with httpx.Client(timeout=30) as client:
        for n in range(12):
            items += tool_turn("a", n)
            bodies.append(codex_body(items, "a"))
            post(client, gateway, bodies[-1])
    sent = [request.body for request in answering.requests if request.path == "/v1/chat/completions"]
    assert sent == [expected_upstream_body(body) for body in bodies]
    assert continued(gateway) - before >= 11  # every turn after the first continued the one before


def test_interleaved_sessions_retries_and_a_shared_prefix_each_get_their_own_translation(
    gateway: GatewayProcess, answering: ChatUpstream
) -> None:
    start: list[JSON] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Begin."}]}]
    shared = [*start, *tool_turn("s", 0)]
    sessions = {
        "a": [[*shared, *tool_turn("a", n)] for n in range(1, 5)],
        "b": [[*shared, *tool_turn("b", n)] for n in range(1, 5)],  # the same prefix, another continuation
    }

    async def session(client: httpx.AsyncClient, name: str, turns: list[list[JSON]]) -> list[bytes]:
        sent = []
        items: list[JSON] = list(shared)
        for turn in turns:
            items += turn[len(shared) :]
            body = codex_body(items, name)
            for _ in range(2 if name == "a" else 1):  # session a retries every turn
                response = await client.post(
                    gateway.base_url + "/responses", content=body, headers={"content-type": "application/json"}
                )
                assert response.status_code == 200, response.text
                sent.append(body)
        return sent

    async def run() -> list[bytes]:
        async with httpx.AsyncClient(timeout=30) as client:
            first = codex_body(shared, "a")  # the shared prefix alone comes first
            await client.post(gateway.base_url + "/responses", content=first, headers={"content-type": "application/json"})
            results = await asyncio.gather(*(session(client, name, turns) for name, turns in sessions.items()))
            return [first, *(body for bodies in results for body in bodies)]

    bodies = asyncio.run(run())
    sent = [request.body for request in answering.requests if request.path == "/v1/chat/completions"]
    assert Counter(sent) == Counter(expected_upstream_body(body) for body in bodies)


def test_a_gateway_keeping_no_history_sends_the_same(
    answering: ChatUpstream, tmp_path: Path
) -> None:
    items: list[JSON] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go."}]}]
    bodies = []
    with GatewayProcess(answering.base_url, tmp_path / "gateway.log", "--history-cache-bytes", "0") as gateway:
        before = continued(gateway)
        with httpx.Client(timeout=30) as client:
            for n in range(3):
                items += tool_turn("c", n)
                bodies.append(codex_body(items, "c"))
                post(client, gateway, bodies[-1])
        assert continued(gateway) == before == 0
    sent = [request.body for request in answering.requests if request.path == "/v1/chat/completions"]
    assert sent == [expected_upstream_body(body) for body in bodies]


def test_the_capture_and_the_inspector_record_what_a_continuing_turn_sent(
    answering: ChatUpstream, tmp_path: Path
) -> None:
    from tests.support.observed import observed_client, observed_config
    from toolwire.protocol import KNOWN_HISTORIES
    from toolwire.server.observe import RecentExchanges

    continued_before = KNOWN_HISTORIES.continued  # this gateway runs in this process
    items: list[JSON] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go."}]}]
    config = observed_config(answering.base_url, capture_dir=str(tmp_path / "capture"))
    with observed_client(config) as (client, observed):
        for n in range(3):
            items += tool_turn("d", n)
            response = client.post("/v1/responses", content=codex_body(items, "d"),
                                   headers={"content-type": "application/json"})
            assert response.status_code == 200
        [recent] = [o for o in observed.observers if isinstance(o, RecentExchanges)]
        kept = [orjson.loads(recent.record(summary["request_id"]) or b"null") for summary in recent.summaries()]
    sent = [request.json for request in answering.requests if request.path == "/v1/chat/completions"]
    captured = [
        orjson.loads(line)
        for path in sorted((tmp_path / "capture").glob("exchanges-*.jsonl"))
        for line in path.read_bytes().splitlines()
    ]
    assert [record["upstream_request"] for record in captured] == sent
    assert [record["upstream_request"] for record in reversed(kept)] == sent
    assert sent == [orjson.loads(expected_upstream_body(codex_body(items[: 1 + 3 * n], "d"))) for n in (1, 2, 3)]
    assert KNOWN_HISTORIES.continued - continued_before == 2  # the later turns sent kept messages as bytes
