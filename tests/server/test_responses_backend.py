"""Responses backends (``kind = "responses"``) through the real gateway process.

``toolwire serve --config`` routes models to two scripted Responses upstreams on
127.0.0.1 (``tests/support/responses_upstream.py``): ``v1`` understands only function
tools (every capability flag off), ``full`` everything. A V2 Codex request
(``gpt-5.6-terra``: tools in an ``additional_tools`` item, namespaces, custom ``exec``)
must reach ``v1`` as flat function tools, and its function calls must come back as the
``custom_tool_call`` / namespaced ``function_call`` items Codex executes.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.support.codex import run_codex
from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV, GatewayProcess
from tests.support.responses_upstream import (
    Cut,
    Events,
    HttpError,
    ResponsesUpstream,
    answer,
    function_call,
    message,
)
from toolwire.config import ConfigError, parse_config
from toolwire.protocol import TERMINAL_EVENT_TYPES, SSEDecoder
from toolwire.server import build_router
from toolwire.translate import ResponsesCapabilities
from toolwire.upstream import KINDS

RESPONSES_CAPABILITY_FLAGS = tuple(KINDS["responses"].settings)

JSON = dict[str, Any]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
TERRA: JSON = json.loads((FIXTURES / "gpt-5.6-terra" / "turn-1.json").read_text())
JS = 'const r = await tools.exec_command({cmd: "echo hi"});\ntext(JSON.stringify(r));\n'


@pytest.fixture(scope="module")
def v1() -> Iterator[ResponsesUpstream]:
    with ResponsesUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def full() -> Iterator[ResponsesUpstream]:
    with ResponsesUpstream() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(v1: ResponsesUpstream, full: ResponsesUpstream) -> None:
    v1.reset()
    full.reset()


@pytest.fixture(scope="module")
def gateway(
    v1: ResponsesUpstream, full: ResponsesUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("responses-gateway")
    config = folder / "toolwire.toml"
    everything = "\n".join(f"{flag} = true" for flag in RESPONSES_CAPABILITY_FLAGS)
    config.write_text(
        f"""
[server]
store = "memory://"
upstream_retries = 2

[[upstreams]]
name = "v1"
kind = "responses"
base_url = "{v1.base_url}"
api_key_env = "{UPSTREAM_KEY_ENV}"
default = true

[[upstreams]]
name = "full"
kind = "responses"
base_url = "{full.base_url}"
{everything}

[[models]]
name = "gpt-5.6-full"
upstream = "full"
upstream_model = "served-by-full"
"""
    )
    process = GatewayProcess("unused", folder / "gateway.log")
    process.args = [
        sys.executable, "-m", "toolwire", "serve", "--config", str(config),
        "--host", "127.0.0.1", "--port", str(process.port),
    ]  # fmt: skip
    with process:
        yield process


def stream_events(gateway: GatewayProcess, body: JSON) -> list[JSON]:
    decoder = SSEDecoder()
    events: list[JSON] = []
    with httpx.stream("POST", gateway.base_url + "/responses", json=body, timeout=30) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for chunk in response.iter_raw():
            events.extend(orjson.loads(event.data) for event in decoder.feed(chunk))
    return events


def exec_then_list_agents() -> list[JSON]:
    return [
        function_call("functions__exec", json.dumps({"input": JS}), "call_exec"),
        function_call("collaboration__list_agents", "{}", "call_list"),
    ]


# ---------------------------------------------------------------- the V2 request, V1 backend


def test_v2_request_against_a_v1_backend(gateway: GatewayProcess, v1: ResponsesUpstream) -> None:
    v1.enqueue(answer(exec_then_list_agents(), model="gpt-5.6-terra"))
    events = stream_events(gateway, TERRA)

    [sent] = v1.bodies
    assert "additional_tools" not in [item["type"] for item in sent["input"]]
    assert [(tool["type"], tool["name"]) for tool in sent["tools"]] == [
        ("function", "functions__exec"),
        ("function", "functions__wait"),
        ("function", "functions__request_user_input"),
        ("function", "collaboration__followup_task"),
        ("function", "collaboration__interrupt_agent"),
        ("function", "collaboration__list_agents"),
        ("function", "collaboration__send_message"),
        ("function", "collaboration__spawn_agent"),
        ("function", "collaboration__wait_agent"),
    ]
    assert sent["tools"][0]["parameters"]["required"] == ["input"]
    assert v1.requests[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"

    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    terminals = [event for event in events if event["type"] in TERMINAL_EVENT_TYPES]
    assert [event["type"] for event in terminals] == ["response.completed"]
    exec_call, list_call = terminals[0]["response"]["output"]
    assert {k: exec_call[k] for k in ("type", "name", "namespace", "input", "call_id")} == {
        "type": "custom_tool_call",
        "name": "exec",
        "namespace": "functions",
        "input": JS,
        "call_id": "call_exec",
    }
    assert exec_call["id"].startswith("ctc_")
    assert (list_call["type"], list_call["namespace"], list_call["name"]) == (
        "function_call",
        "collaboration",
        "list_agents",
    )
    done = [event["item"] for event in events if event["type"] == "response.output_item.done"]
    assert done == [exec_call, list_call]
    kinds = [event["type"] for event in events]
    assert "response.custom_tool_call_input.done" in kinds
    assert terminals[0]["response"]["id"].startswith("resp_")
    assert terminals[0]["response"]["model"] == "gpt-5.6-terra"


def test_the_history_of_a_v2_session_reaches_the_backend_as_function_calls(
    gateway: GatewayProcess, v1: ResponsesUpstream
) -> None:
    body = json.loads((FIXTURES / "gpt-5.6-terra" / "turn-3.json").read_text())
    v1.enqueue(answer([message("All done.")]))
    events = stream_events(gateway, body)
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "All done."
    [sent] = v1.bodies
    calls = [(item["type"], item.get("name")) for item in sent["input"] if "call_id" in item]
    assert calls == [
        ("function_call", "functions__exec"),
        ("function_call_output", None),
        ("function_call", "collaboration__list_agents"),
        ("function_call_output", None),
    ]


def test_openai_sdk_strict_mode_reads_the_restored_stream(
    gateway: GatewayProcess, v1: ResponsesUpstream
) -> None:
    v1.enqueue(answer([message("Calling.", "msg_9"), *exec_then_list_agents()]))
    extra = {
        key: TERRA[key] for key in ("parallel_tool_calls", "reasoning", "store", "include", "text")
    }
    with openai.OpenAI(
        base_url=gateway.base_url, api_key="x", _strict_response_validation=True, max_retries=0
    ) as client, client.responses.stream(model=TERRA["model"], input=TERRA["input"], **extra) as stream:
        final = stream.get_final_response()
    assert [item.type for item in final.output] == ["message", "custom_tool_call", "function_call"]
    assert final.output_text == "Calling."


SAFE_ID = re.compile(r"[A-Za-z0-9_-]+")


@pytest.mark.parametrize(
    "upstream_id",
    ["item 1/with:spaces", 'fc_"quoted"', "fc_<script>", "fc_\u00e9t\u00e9", "ctc\n"],
    ids=["spaces-slash-colon", "quotes", "markup", "non-ascii", "escape"],
)
def test_a_restored_item_gets_a_safe_id_whatever_id_the_backend_gave(
    gateway: GatewayProcess, v1: ResponsesUpstream, upstream_id: str
) -> None:
    """The client sees a ``custom_tool_call`` the backend never made: its id is derived
    from the backend's, and must be safe for a client to use as it is (in a URL, a file
    name, a log line) and the same in every event of the item."""
    calls = [
        function_call("functions__exec", json.dumps({"input": JS}), "call_a", item_id=upstream_id),
        function_call("functions__exec", json.dumps({"input": JS}), "call_b", item_id=upstream_id + "x"),
    ]
    v1.enqueue(answer(calls), answer(calls))
    events = stream_events(gateway, TERRA)
    response = httpx.post(gateway.base_url + "/responses", json={**TERRA, "stream": False}, timeout=30).json()
    for output in (next(e for e in events if e["type"] == "response.completed")["response"]["output"], response["output"]):
        ids = [item["id"] for item in output]
        assert all(item["type"] == "custom_tool_call" for item in output), output
        assert all(item_id.startswith("ctc_") and SAFE_ID.fullmatch(item_id) for item_id in ids), ids
        assert len(set(ids)) == 2, ids  # two backend ids, two client ids
    streamed_ids = {event["item"]["id"] for event in events if "item" in event}
    streamed_ids |= {event["item_id"] for event in events if "item_id" in event}
    assert streamed_ids == {item["id"] for item in events[-1]["response"]["output"]}


def test_non_streaming_answer_is_restored(gateway: GatewayProcess, v1: ResponsesUpstream) -> None:
    v1.enqueue(answer(exec_then_list_agents()))
    response = httpx.post(
        gateway.base_url + "/responses", json={**TERRA, "stream": False}, timeout=30
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert [(item["type"], item.get("namespace"), item["name"]) for item in body["output"]] == [
        ("custom_tool_call", "functions", "exec"),
        ("function_call", "collaboration", "list_agents"),
    ]
    assert body["output"][0]["input"] == JS
    assert v1.bodies[0].get("stream") is False


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("npm") is None, reason="needs node/npm to install Codex")
def test_codex_v2_runs_the_exec_call_a_v1_backend_made(
    gateway: GatewayProcess, v1: ResponsesUpstream, tmp_path: Path
) -> None:
    """The real Codex CLI (V2, code mode) -> gateway -> a V1-only Responses backend."""
    script = 'const r = await tools.exec_command({cmd: "echo toolwire-$((6*7))"});\ntext(JSON.stringify(r));'

    def respond(body: JSON) -> Events:
        if any(item.get("type") == "function_call_output" for item in body["input"]):
            return answer([message("FINAL")])
        return answer([function_call("functions__exec", json.dumps({"input": script}), "call_run")])

    v1.responder = respond
    result = run_codex(
        base_url=gateway.base_url, model="gpt-5.6-terra", prompt="Run it.", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.last_message == "FINAL"
    first, second = v1.bodies
    assert "functions__exec" in [tool["name"] for tool in first["tools"]]
    [output] = [item for item in second["input"] if item.get("type") == "function_call_output"]
    assert output["call_id"] == "call_run"
    assert "toolwire-42" in json.dumps(output["output"])  # Codex ran it as a custom_tool_call
    [call] = [
        item
        for item in second["input"]
        if item.get("call_id") == "call_run" and item["type"] == "function_call"
    ]
    assert json.loads(call["arguments"]) == {"input": script}


# ---------------------------------------------------------------- a backend with every capability


def test_a_capable_backend_gets_the_request_as_sent(
    gateway: GatewayProcess, full: ResponsesUpstream
) -> None:
    full.enqueue(answer([message("hi")]))
    body = {**TERRA, "model": "gpt-5.6-full"}
    events = stream_events(gateway, body)
    assert full.bodies == [{**body, "model": "served-by-full"}]
    assert "authorization" not in full.requests[0].headers
    assert events[-1]["response"]["model"] == "gpt-5.6-full"


# ---------------------------------------------------------------- failures


def test_an_upstream_error_status_reaches_the_client(
    gateway: GatewayProcess, v1: ResponsesUpstream
) -> None:
    v1.enqueue(
        HttpError(
            400,
            {"error": {"message": "tools[3]: unknown tool type", "type": "invalid_request_error"}},
        )
    )
    response = httpx.post(gateway.base_url + "/responses", json=TERRA, timeout=30)
    assert response.status_code == 400
    assert "unknown tool type" in response.json()["error"]["message"]


def test_a_5xx_is_retried_before_streaming(gateway: GatewayProcess, v1: ResponsesUpstream) -> None:
    v1.enqueue(HttpError(503, {"error": {"message": "loading"}}), answer([message("second try")]))
    events = stream_events(gateway, TERRA)
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "second try"
    assert len(v1.bodies) == 2


def test_a_stream_cut_mid_call_fails_without_the_half_call(
    gateway: GatewayProcess, v1: ResponsesUpstream
) -> None:
    full_stream = answer([message("partial", "msg_p"), *exec_then_list_agents()]).events
    cut_at = next(
        i
        for i, event in enumerate(full_stream)
        if event["type"] == "response.function_call_arguments.delta"
    )
    v1.enqueue(Cut(full_stream, after=cut_at + 1))
    events = stream_events(gateway, TERRA)
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    terminal = events[-1]
    assert terminal["type"] == "response.failed"
    assert [item["type"] for item in terminal["response"]["output"]] == ["message"]
    assert not any(
        event["type"] == "response.output_item.done" and event["item"]["type"] != "message"
        for event in events
    )


def test_done_marker_and_a_stream_without_terminal_event(
    gateway: GatewayProcess, v1: ResponsesUpstream
) -> None:
    whole = answer([message("fine")]).events
    v1.enqueue(Events(whole, done_marker=True), Events(whole[:-1]))
    assert stream_events(gateway, TERRA)[-1]["type"] == "response.completed"
    events = stream_events(gateway, TERRA)
    assert events[-1]["type"] == "response.failed"
    assert "closed before a terminal event" in events[-1]["response"]["error"]["message"]
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "fine"


def test_readiness_asks_the_responses_backends(
    gateway: GatewayProcess, v1: ResponsesUpstream
) -> None:
    assert httpx.get(gateway.url + "/readyz", timeout=10).status_code == 200
    assert "/v1/models" in [request.path for request in v1.requests]


# ---------------------------------------------------------------- configuration and routing


def test_routing_gives_a_responses_route_with_its_capabilities() -> None:
    config = parse_config(
        """
[[upstreams]]
name = "vllm"
kind = "responses"
base_url = "http://127.0.0.1:9/v1"
supports_namespaces = true

[[models]]
name = "qwen3"
upstream = "vllm"
"""
    )
    route = build_router(config).resolve("qwen3")
    assert route.backend.capabilities == ResponsesCapabilities(supports_namespaces=True)  # type: ignore[attr-defined]


def test_capability_flags_match_the_capabilities_type() -> None:
    names = tuple(field.name for field in fields(ResponsesCapabilities))
    assert names == RESPONSES_CAPABILITY_FLAGS


def test_capability_flags_belong_to_responses_upstreams_only() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(
            '[[upstreams]]\nname = "c"\nbase_url = "http://x/v1"\nsupports_custom_tools = true\n'
        )
    assert "supports_custom_tools" in str(caught.value) and "responses" in str(caught.value)
