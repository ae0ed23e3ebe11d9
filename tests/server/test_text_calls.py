"""Calls written into the text, through the real gateway: the per-upstream setting, both
answer styles (streamed and not), and the conversion counted in ``/metrics``.

One ``toolwire serve --config`` process routes three models to the scripted upstream
through upstreams with different ``tool_call_text`` settings; the openai SDK (strict)
is the client.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import UPSTREAM_KEY_ENV, GatewayProcess
from tests.support.text_calls import written

PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch\n"
TOOLS = [
    {
        "type": "function",
        "name": "exec_command",
        "description": "Runs a command.",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
    },
    {"type": "custom", "name": "apply_patch", "description": "Edit files."},
]
LS = [("exec_command", {"cmd": "ls"})]


@pytest.fixture(scope="module")
def gateway(_session_upstream: ChatUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("text-calls")
    config = folder / "toolwire.toml"
    upstreams = "".join(
        f"""
[[upstreams]]
name = "{name}"
base_url = "{_session_upstream.base_url}"
api_key_env = "{UPSTREAM_KEY_ENV}"
tool_call_text = "{setting}"

[[models]]
name = "{name}-model"
upstream = "{name}"
"""
        for name, setting in (("text-off", "off"), ("hermes-only", "hermes"))
    )
    config.write_text(upstreams)
    with GatewayProcess(_session_upstream.base_url, folder / "gateway.log", "--config", str(config)) as process:
        yield process


def client(gateway: GatewayProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key="test", _strict_response_validation=True, max_retries=0)


def streamed_output(gateway: GatewayProcess, model: str) -> list[tuple[str, str]]:
    with (
        client(gateway) as sdk,
        sdk.responses.stream(model=model, input="go", tools=TOOLS) as events,  # type: ignore[arg-type]
    ):
        response = events.get_final_response()
    return [summary(item) for item in response.output]


def summary(item: Any) -> tuple[str, str]:
    if item.type == "message":
        return item.type, "".join(part.text for part in item.content)
    if item.type == "function_call":
        return item.type, f"{item.name} {item.arguments}"
    return item.type, f"{item.name} {item.input}"


def conversions(gateway: GatewayProcess) -> dict[tuple[str, str], float]:
    text = httpx.get(gateway.url + "/metrics", timeout=10).text
    return {
        (sample.labels["upstream"], sample.labels["conversion"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "toolwire_conversions_total"
    }


def test_the_setting_of_each_upstream_decides(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.fragment_size = 5
    deepseek = "Listing.\n" + written("deepseek", LS)
    qwen = written("qwen3_coder", [("apply_patch", {"input": PATCH})])
    hermes, mistral = written("hermes", LS), written("mistral", LS)
    upstream.enqueue(Text(deepseek), Text(qwen), Text(hermes), Text(hermes), Text(mistral))
    try:
        # The flag's upstream: "auto", streamed and not.
        assert streamed_output(gateway, "any-model") == [
            ("message", "Listing.\n"),
            ("function_call", 'exec_command {"cmd":"ls"}'),
        ]
        with client(gateway) as sdk:
            answered = sdk.responses.create(model="any-model", input="go", tools=TOOLS)  # type: ignore[arg-type]
        assert [summary(item) for item in answered.output] == [("custom_tool_call", f"apply_patch {PATCH}")]
        # "off": the call stays the text it was.
        assert streamed_output(gateway, "text-off-model") == [("message", hermes)]
        # One family: its calls are recovered, another family's stay text.
        assert streamed_output(gateway, "hermes-only-model") == [("function_call", 'exec_command {"cmd":"ls"}')]
        assert streamed_output(gateway, "hermes-only-model") == [("message", mistral)]
    finally:
        upstream.fragment_size = 4

    counted = conversions(gateway)
    assert counted[("upstream", "tool call recovered from deepseek text")] == 1
    assert counted[("upstream", "tool call recovered from qwen3_coder text")] == 1
    assert counted[("hermes-only", "tool call recovered from hermes text")] == 1
    assert not [key for key in counted if key[0] == "text-off" and "recovered" in key[1]]
    assert not [key for key in counted if "mistral" in key[1]]
