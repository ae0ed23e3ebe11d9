"""``translate_request`` as a whole: the recorded Codex bodies translate to valid Chat
requests for every preset, deterministically, and requests that declare the same tools
share their tool translation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.protocol.codex_fixtures import FIXTURE_FILES as CODEX_FIXTURE_FILES
from toolwire.errors import RequestError
from toolwire.protocol import (
    CustomToolCallItem,
    FunctionCallItem,
    ToolSearchCallItem,
    parse_request,
)
from toolwire.translate import PRESETS, translate_request

from .shapes import (
    DEEPSEEK,
    EXEC_COMMAND,
    EXEC_JS,
    FUNCTIONS_NAMESPACE,
    TOOLS,
    VLLM,
    check_invariants,
    custom_call,
    custom_output,
    function_call,
    function_output,
    reasoning,
    user,
)

FIXTURE_FILES = CODEX_FIXTURE_FILES


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_codex_fixture_translates_to_a_valid_chat_request(path: Path) -> None:
    request = parse_request(path.read_bytes())
    for profile in dict.fromkeys([*PRESETS.values(), DEEPSEEK, VLLM]):
        translated = translate_request(request, profile)
        check_invariants(request, translated)
        messages = translated.chat["messages"]
        assert messages[0]["role"] == "system"
        assert all(m["role"] != "developer" for m in messages)
        assert len(messages) >= 2
        calls = [
            item
            for item in request.input_items()
            if isinstance(item, FunctionCallItem | CustomToolCallItem | ToolSearchCallItem)
        ]
        sent = [call for m in messages for call in m.get("tool_calls", [])]
        assert len(sent) == len(calls)
        assert translated.chat.get("tools"), "Codex always declares tools"


def test_fixtures_exist_for_every_codex_protocol() -> None:
    assert {path.parent.name for path in FIXTURE_FILES} >= {"gpt-5.4", "gpt-5.5", "gpt-5.6-terra"}
    assert [path for path in FIXTURE_FILES if not path.is_file()] == []


def test_translation_is_deterministic_and_does_not_touch_the_request() -> None:
    body: dict[str, Any] = {
        "model": "m",
        "tools": TOOLS,
        "input": [
            user("go"),
            reasoning(content="r"),
            function_call("c", "exec_command"),
            function_output("c", "ok"),
        ],
    }
    for raw in (orjson.dumps(body), FIXTURE_FILES[-1].read_bytes()):
        request = parse_request(raw)
        before = request.dump()
        first = translate_request(request, DEEPSEEK)
        second = translate_request(request, DEEPSEEK)
        assert orjson.dumps(first.chat) == orjson.dumps(second.chat)
        assert first.warnings == second.warnings and first.conversions == second.conversions
        assert request.dump() == before


# ---------------------------------------------------------------- shared tool translation


SHARED_TOOLS_BODY: dict[str, Any] = {
    "model": "gpt-5.5",
    "tools": [*TOOLS, {"type": "file_search"}],
    "input": [
        {"type": "additional_tools", "role": "developer", "tools": [EXEC_JS, FUNCTIONS_NAMESPACE]},
        user("go"),
        custom_call("c1", "apply_patch", "*** Begin Patch\n*** End Patch\n"),
        custom_output("c1", "done"),
    ],
}


def test_requests_declaring_the_same_tools_share_their_translation() -> None:
    body = orjson.dumps(SHARED_TOOLS_BODY)
    fresh = translate_request(parse_request(SHARED_TOOLS_BODY))  # a dict: nothing shared
    first = translate_request(parse_request(body))
    second = translate_request(parse_request(body))
    assert second.tools is first.tools  # one upstream tool table
    assert second.chat["tools"] is not first.chat["tools"]  # each request its own list
    for translated in (first, second):
        assert orjson.dumps(translated.chat) == orjson.dumps(fresh.chat)
        assert translated.warnings == fresh.warnings
        assert translated.conversions == fresh.conversions
    assert any(warning.startswith("hosted tools not sent") for warning in second.warnings)
    assert "custom tool apply_patch wrapped as function" in second.conversions


def test_shared_tools_with_allowed_tools_send_the_subset() -> None:
    body = {**SHARED_TOOLS_BODY, "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "exec_command"}]}}
    translate_request(parse_request(orjson.dumps(SHARED_TOOLS_BODY)))
    translated = translate_request(parse_request(orjson.dumps(body)))
    assert [tool["function"]["name"] for tool in translated.chat["tools"]] == ["exec_command"]
    assert translated.conversions == translate_request(parse_request(body)).conversions
    assert len(translate_request(parse_request(orjson.dumps(SHARED_TOOLS_BODY))).chat["tools"]) > 1


def test_a_duplicate_tool_stays_a_request_error_when_its_lists_are_shared() -> None:
    other = {**EXEC_COMMAND, "description": "Another one."}
    body = orjson.dumps({"model": "m", "tools": TOOLS, "input": [{"type": "additional_tools", "tools": [other]}]})
    translate_request(parse_request(orjson.dumps({"model": "m", "tools": TOOLS})))
    for _ in range(2):
        with pytest.raises(RequestError) as caught:
            translate_request(parse_request(body))
        assert caught.value.param == "tools"
        assert caught.value.message == (
            "Two different tools are named exec_command: at tools[0] and at input[0].tools[0]."
        )


