"""Compaction in front of Responses backends, through the real gateway process.

``native`` is a scripted Responses server configured with ``supports_compaction = true``:
it compacts by itself, so ``compaction_trigger``, ``/responses/compact`` and the
``compaction`` items it made pass to it untouched. ``plain`` is one without: the gateway
compacts for it, asking its model for the summary over its own ``/responses``, exactly
as for a Chat backend.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from tests.support.gateway import UPSTREAM_KEY_ENV, GatewayProcess
from tests.support.responses_upstream import ResponsesUpstream, Whole, answer, message
from tests.support.served import gateway_client
from toolwire.compaction import COMPACTION_PROMPT, SEALED_PREFIX, SUMMARY_HEADING
from toolwire.config import GatewayConfig, parse_config
from toolwire.protocol import SSEDecoder

JSON = dict[str, Any]
TOOLS = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]
CONVERSATION: list[JSON] = [
    {"type": "message", "role": "user", "content": "Tidy the repository."},
    {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": '{"cmd":"git status"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "3 untracked files"},
]
TRIGGER: JSON = {"type": "compaction_trigger"}
BACKENDS_OWN = {"id": "cmp_native_1", "type": "compaction", "encrypted_content": "gAAAAABnative-opaque-blob"}


@pytest.fixture(scope="module")
def native() -> Iterator[ResponsesUpstream]:
    with ResponsesUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def plain() -> Iterator[ResponsesUpstream]:
    with ResponsesUpstream() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(native: ResponsesUpstream, plain: ResponsesUpstream) -> None:
    native.reset()
    plain.reset()


@pytest.fixture(scope="module")
def gateway(
    native: ResponsesUpstream, plain: ResponsesUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("compaction-responses")
    config = folder / "toolwire.toml"
    config.write_text(
        f"""
[server]
store = "memory://"
upstream_retries = 1

[[upstreams]]
name = "native"
kind = "responses"
base_url = "{native.base_url}"
api_key_env = "{UPSTREAM_KEY_ENV}"
supports_compaction = true

[[upstreams]]
name = "plain"
kind = "responses"
base_url = "{plain.base_url}"
default = true

[[models]]
name = "native-model"
upstream = "native"
upstream_model = "served-natively"
"""
    )
    process = GatewayProcess("unused", folder / "gateway.log")
    process.args = [
        sys.executable, "-m", "toolwire", "serve", "--config", str(config),
        "--host", "127.0.0.1", "--port", str(process.port),
    ]  # fmt: skip
    with process:
        yield process


def stream(gateway: GatewayProcess, body: JSON) -> list[JSON]:
    decoder = SSEDecoder()
    with httpx.stream("POST", gateway.base_url + "/responses", json={**body, "stream": True}, timeout=30) as reply:
        assert reply.status_code == 200, reply.read()
        return [orjson.loads(event.data) for chunk in reply.iter_raw() for event in decoder.feed(chunk)]


def post(gateway: GatewayProcess, path: str, body: JSON) -> httpx.Response:
    return httpx.post(gateway.base_url + path, json=body, timeout=30)


# ---------------------------------------------------------------- a backend that compacts itself


def test_a_trigger_passes_to_a_backend_that_compacts_itself(gateway: GatewayProcess, native: ResponsesUpstream) -> None:
    native.enqueue(answer([BACKENDS_OWN]))
    events = stream(gateway, {"model": "native-model", "input": [*CONVERSATION, TRIGGER], "tools": TOOLS})
    final = events[-1]["response"]
    assert final["status"] == "completed" and final["output"] == [BACKENDS_OWN]
    [sent] = native.bodies
    assert sent["input"][-1] == TRIGGER and sent["input"].count(TRIGGER) == 1
    assert sent["model"] == "served-natively" and sent["tools"] == TOOLS


def test_a_backends_own_compaction_reaches_it_untouched(gateway: GatewayProcess, native: ResponsesUpstream) -> None:
    native.enqueue(answer([message("Carrying on.")]))
    later = [CONVERSATION[0], BACKENDS_OWN, {"role": "user", "content": "Go on."}]
    events = stream(gateway, {"model": "native-model", "input": later})
    assert events[-1]["type"] == "response.completed"
    [sent] = native.bodies
    assert BACKENDS_OWN in sent["input"]


def test_compact_endpoint_goes_to_the_backends_own(gateway: GatewayProcess, native: ResponsesUpstream) -> None:
    usage = {"input_tokens": 900, "output_tokens": 40, "total_tokens": 940}
    native.enqueue(Whole({"id": "resp_native", "object": "response.compaction", "created_at": 1_750_000_000,
                          "output": [CONVERSATION[0], BACKENDS_OWN], "usage": usage}))  # fmt: skip
    reply = post(gateway, "/responses/compact", {"model": "native-model", "input": CONVERSATION, "tools": TOOLS})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["object"] == "response.compaction" and body["id"].startswith("resp_") and body["id"] != "resp_native"
    assert body["output"][-1] == BACKENDS_OWN and body["created_at"] == 1_750_000_000
    assert body["usage"]["input_tokens_details"] == {"cached_tokens": 0, "cache_write_tokens": 0}  # made whole
    [sent] = native.compact_bodies
    assert sent["model"] == "served-natively" and sent["input"] == CONVERSATION and sent["tools"] == TOOLS
    assert "stream" not in sent and "store" not in sent and native.bodies == []


# ---------------------------------------------------------------- a backend that does not


def test_the_gateway_compacts_for_a_responses_backend_that_does_not(gateway: GatewayProcess, plain: ResponsesUpstream) -> None:
    plain.enqueue(answer([message("Three files were untracked; next: add a .gitignore.")]))
    events = stream(gateway, {"model": "any", "input": [*CONVERSATION, TRIGGER], "tools": TOOLS})
    [item] = events[-1]["response"]["output"]
    assert item["type"] == "compaction" and item["encrypted_content"].startswith(SEALED_PREFIX)
    [asked] = plain.bodies
    assert asked.get("tools") in (None, []) and asked["input"][-1]["content"][0]["text"] == COMPACTION_PROMPT
    assert TRIGGER not in asked["input"]

    plain.enqueue(answer([message("Adding .gitignore.")]))
    stream(gateway, {"model": "any", "input": [CONVERSATION[0], item, {"role": "user", "content": "Go on."}]})
    sent = plain.bodies[-1]["input"]
    assert not any(entry.get("type") == "compaction" for entry in sent)
    summary = sent[1]["content"][0]["text"]
    assert summary == f"{SUMMARY_HEADING}\n\nThree files were untracked; next: add a .gitignore."


def test_a_backends_compaction_cannot_go_to_another(gateway: GatewayProcess, plain: ResponsesUpstream) -> None:
    reply = post(gateway, "/responses", {"model": "any", "input": [BACKENDS_OWN, {"role": "user", "content": "hi"}]})
    assert reply.status_code == 400
    assert "another provider" in reply.json()["error"]["message"] and plain.requests == []


def test_a_gateway_compaction_opens_for_a_backend_that_compacts_itself(
    gateway: GatewayProcess, native: ResponsesUpstream, plain: ResponsesUpstream
) -> None:
    """A conversation compacted by the gateway, then routed to a backend with its own
    compaction: ours is opened for it (it could not read ours), its own would not be."""
    plain.enqueue(answer([message("Summary from plain.")]))
    [item] = stream(gateway, {"model": "any", "input": [*CONVERSATION, TRIGGER]})[-1]["response"]["output"]
    native.enqueue(answer([message("ok")]))
    stream(gateway, {"model": "native-model", "input": [item, {"role": "user", "content": "Go on."}]})
    [sent] = native.bodies
    assert sent["input"][0]["content"][0]["text"] == f"{SUMMARY_HEADING}\n\nSummary from plain."


def inspected_backend(base_url: str, *, compacts_itself: bool) -> GatewayConfig:
    """One Responses backend, the default, with the inspector on (the record shows what
    the backend answered)."""
    return parse_config(f"""
[server]
store = "none"
inspector = true

[[upstreams]]
name = "backend"
kind = "responses"
base_url = "{base_url}"
supports_compaction = {str(compacts_itself).lower()}
default = true
""")


async def compact_and_record(config: GatewayConfig) -> tuple[httpx.Response, JSON]:
    async with gateway_client(config) as client:
        reply = await client.post("/v1/responses/compact", json={"model": "m", "input": CONVERSATION})
        record = (await client.get(f"/ui/api/exchanges/{reply.json()['id']}")).json()
    return reply, record


async def test_a_backends_own_compaction_is_the_answer_and_the_record_in_process(
    responses_upstream: ResponsesUpstream,
) -> None:
    """The same, served in this process with the inspector on: the answer is a
    ``response.compaction`` whatever object the backend named, and the backend's answer is
    what the exchange's record shows it sent."""
    native_answer = {"id": "resp_native", "object": "response", "created_at": 1_750_000_000,
                     "output": [CONVERSATION[0], BACKENDS_OWN], "usage": {"input_tokens": 9, "output_tokens": 4}}  # fmt: skip
    responses_upstream.enqueue(Whole(native_answer))
    reply, record = await compact_and_record(inspected_backend(responses_upstream.base_url, compacts_itself=True))
    assert reply.status_code == 200 and reply.json()["object"] == "response.compaction"
    assert record["upstream_chunks"] == [native_answer]


async def test_the_backends_answer_the_gateway_sealed_is_in_the_record(responses_upstream: ResponsesUpstream) -> None:
    responses_upstream.enqueue(answer([message("The work so far: three files listed.")]))
    reply, record = await compact_and_record(inspected_backend(responses_upstream.base_url, compacts_itself=False))
    assert reply.status_code == 200, reply.text
    [whole] = record["upstream_chunks"]
    assert whole["output"][0]["content"][0]["text"] == "The work so far: three files listed."
