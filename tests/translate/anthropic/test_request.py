"""``translate_messages_request``: tables of Responses requests and the Messages bodies they become.

Every body is also checked by ``rule_violations``, the scripted Messages API's own
check of the rules the real API enforces: a translation that would cost a 400 fails
here, whatever the test asserts besides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.messages_upstream import Redacted, rule_violations, sign
from tests.translate.chat.shapes import (
    APPLY_PATCH,
    COLLABORATION,
    EXEC_COMMAND,
    FUNCTIONS_NAMESPACE,
    PNG,
    TOOLS,
    assistant,
    custom_call,
    custom_output,
    developer,
    function_call,
    function_output,
    reasoning,
    tool_search_call,
    user,
)
from toolwire.errors import RequestError
from toolwire.protocol import parse_request
from toolwire.translate import (
    MESSAGES_PRESETS,
    TranslatedMessages,
    seal_reasoning,
    translate_messages_request,
)

JSON = dict[str, Any]
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "codex"
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def translate(body: JSON, preset: str = "anthropic", **kwargs: Any) -> TranslatedMessages:
    request = parse_request(orjson.dumps({"model": "claude-sonnet-4-5", **body}))
    profile = MESSAGES_PRESETS[preset]
    translated = translate_messages_request(request, profile, **kwargs)
    body = orjson.loads(orjson.dumps(translated.body))
    assert rule_violations(body, HEADERS, max_temperature=profile.max_temperature) == []
    return translated


def messages(*items: JSON, preset: str = "anthropic", **body: Any) -> list[JSON]:
    return list(translate({"tools": TOOLS, "input": list(items), **body}, preset).body["messages"])


def kinds(message: JSON) -> list[str]:
    return [block["type"] for block in message["content"]]


def signed(text: str) -> JSON:
    """A reasoning item as toolwire seals an Anthropic thinking block."""
    block = {"type": "thinking", "thinking": text, "signature": sign(text)}
    return reasoning(content=text, encrypted_content=seal_reasoning(text, blocks=[block]))


# ---------------------------------------------------------------- real Codex requests


@pytest.mark.parametrize(
    "path", sorted(FIXTURES.glob("*/turn-*.json")), ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_every_captured_codex_request_becomes_a_valid_messages_request(path: Path) -> None:
    body = orjson.loads(path.read_bytes())
    for preset in MESSAGES_PRESETS:
        translated = translate(body, preset)
        assert translated.body["messages"][0]["role"] == "user"
        assert translated.body["max_tokens"] > 0


# ---------------------------------------------------------------- system and messages


def test_instructions_and_developer_messages_become_the_system_prompt() -> None:
    body = translate({"instructions": "Be brief.", "input": [developer("Use tools."), user("hi")]}).body
    assert [block["text"] for block in body["system"]] == ["Be brief.", "Use tools."]
    assert [m["role"] for m in body["messages"]] == ["user"]


def test_outputs_move_to_their_calls_in_call_order_and_missing_ones_are_aborted() -> None:
    sent = messages(
        user("go"),
        function_call("c1", "exec_command", '{"cmd": "ls"}'),
        function_call("c2", "exec_command", '{"cmd": "pwd"}'),
        function_call("c3", "exec_command", '{"cmd": "id"}'),
        assistant("Working on it."),
        function_output("c2", "second"),
        function_output("c1", "first"),
        function_output("orphan", "dropped"),
        user("next"),
    )
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert kinds(sent[1]) == ["text", "tool_use", "tool_use", "tool_use"]
    assert sent[1]["content"][0]["text"] == "Working on it."
    results = sent[2]["content"]
    assert [(r.get("tool_use_id"), r.get("content")) for r in results[:3]] == [
        ("c1", "first"),
        ("c2", "second"),
        ("c3", "aborted"),
    ]
    assert results[3]["text"] == "next"


def test_consecutive_turns_alternate_and_a_first_assistant_message_gets_a_user_before_it() -> None:
    sent = messages(assistant("Earlier."), user("a"), user("b"), assistant("x"), assistant("y"))
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant"]
    assert [b["text"] for b in sent[2]["content"]] == ["a", "b"]
    assert [(b["type"], b["text"]) for b in sent[3]["content"]] == [("text", "x\n\ny")]


def test_call_inputs_are_objects() -> None:
    sent = messages(
        user("go"),
        custom_call("c1", "apply_patch", "*** Begin Patch\n"),
        function_call("c2", "exec_command", "not json"),
        tool_search_call("c3", "agents"),
        custom_output("c1", "ok"),
        function_output("c2", "ok"),
        {"type": "tool_search_output", "call_id": "c3", "execution": "client", "status": "completed", "tools": [COLLABORATION]},
    )
    inputs = [block["input"] for block in sent[1]["content"]]
    assert inputs == [{"input": "*** Begin Patch\n"}, {"arguments": "not json"}, {"query": "agents", "limit": 2}]
    listing = orjson.loads(sent[2]["content"][2]["content"])
    assert [tool["name"] for tool in listing["loaded_tools"]] == ["collaboration__list_agents", "collaboration__spawn_agent"]


def test_namespaced_calls_keep_their_flat_upstream_name() -> None:
    sent = messages(user("go"), custom_call("c1", "exec", "text('hi')", namespace="functions"), custom_output("c1", "hi"))
    assert sent[1]["content"][0]["name"] == "functions__exec"


def test_an_empty_tool_output_is_a_result_without_content() -> None:
    sent = messages(user("go"), function_call("c1", "exec_command"), function_output("c1", ""))
    assert sent[2]["content"] == [{"type": "tool_result", "tool_use_id": "c1", "cache_control": {"type": "ephemeral"}}]


# ---------------------------------------------------------------- reasoning


def test_signed_thinking_goes_back_unchanged_before_its_calls() -> None:
    sent = messages(user("go"), signed("plan A"), function_call("c1", "exec_command"), signed("plan B"), function_call("c2", "exec_command"), function_output("c1", "1"), function_output("c2", "2"))
    assert kinds(sent[1]) == ["thinking", "tool_use", "thinking", "tool_use"]
    assert sent[1]["content"][0] == {"type": "thinking", "thinking": "plan A", "signature": sign("plan A")}


def test_reasoning_that_no_messages_backend_signed_is_not_sent() -> None:
    translated = translate({"input": [user("go"), reasoning(content="chat reasoning"), assistant("ok"), user("more")]})
    assert all("thinking" not in kinds(m) for m in translated.body["messages"])
    assert any("reasoning not sent" in warning for warning in translated.warnings)


def test_redacted_thinking_is_dropped_for_a_backend_that_rejects_it() -> None:
    block = {"type": "redacted_thinking", "data": Redacted().data}
    item = reasoning(encrypted_content=seal_reasoning("", blocks=[block]))
    anthropic = messages(user("go"), item, assistant("ok"), user("more"))
    deepseek = messages(user("go"), item, assistant("ok"), user("more"), preset="deepseek-anthropic")
    assert kinds(anthropic[1]) == ["redacted_thinking", "text"]
    assert kinds(deepseek[1]) == ["text"]


@pytest.mark.parametrize(
    ("effort", "max_output_tokens", "thinking", "max_tokens"),
    [
        (None, None, None, 64000),
        ("minimal", None, None, 64000),
        ("low", None, 2048, 64000),
        ("medium", None, 8192, 64000),
        ("high", 10000, 8976, 10000),
        ("medium", 1500, None, 1500),
    ],
)
def test_reasoning_effort_is_a_thinking_budget_below_max_tokens(
    effort: str | None, max_output_tokens: int | None, thinking: int | None, max_tokens: int
) -> None:
    body: JSON = {"input": "hi"}
    if effort is not None:
        body["reasoning"] = {"effort": effort}
    if max_output_tokens is not None:
        body["max_output_tokens"] = max_output_tokens
    sent = translate(body).body
    assert sent["max_tokens"] == max_tokens
    assert sent.get("thinking") == (None if thinking is None else {"type": "enabled", "budget_tokens": thinking})


@pytest.mark.parametrize(
    ("model", "preset", "max_tokens"),
    [("claude-3-5-haiku-latest", "anthropic", 8192), ("claude-opus-4-1", "anthropic", 32000), ("deepseek-chat", "deepseek-anthropic", 32768), ("x", "generic", 8192)],
)
def test_max_tokens_defaults_to_the_models_limit(model: str, preset: str, max_tokens: int) -> None:
    assert translate({"input": "hi"}, preset, model=model).body["max_tokens"] == max_tokens


def test_thinking_is_off_when_a_tool_is_forced_or_the_open_tool_loop_has_no_thinking() -> None:
    forced = translate({"input": "hi", "tools": [EXEC_COMMAND], "tool_choice": "required", "reasoning": {"effort": "high"}})
    assert "thinking" not in forced.body and forced.body["tool_choice"] == {"type": "any"}
    loop = [user("go"), function_call("c1", "exec_command"), function_output("c1", "ok")]
    unsigned = translate({"input": loop, "tools": TOOLS, "reasoning": {"effort": "high"}})
    assert "thinking" not in unsigned.body
    signed_loop = translate({"input": [loop[0], signed("plan"), *loop[1:]], "tools": TOOLS, "reasoning": {"effort": "high"}})
    assert signed_loop.body["thinking"]["type"] == "enabled"


def test_temperature_is_lowered_to_the_backends_range_and_dropped_with_thinking() -> None:
    assert translate({"input": "hi", "temperature": 1.7}).body["temperature"] == 1.0
    assert translate({"input": "hi", "temperature": 1.7}, "deepseek-anthropic").body["temperature"] == 1.7
    with_thinking = translate({"input": "hi", "temperature": 0.2, "reasoning": {"effort": "low"}})
    assert "temperature" not in with_thinking.body
    assert any("temperature" in warning for warning in with_thinking.warnings)


# ---------------------------------------------------------------- content


def test_images_are_base64_blocks_also_inside_tool_results() -> None:
    image = {"type": "input_image", "image_url": PNG}
    sent = messages(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "see"}, image]},
        function_call("c1", "view_image", '{"path": "a.png"}'),
        function_output("c1", [image]),
    )
    assert sent[0]["content"][1]["source"]["media_type"] == "image/png"
    [result] = sent[2]["content"]
    assert result["content"][0]["type"] == "image"


def test_a_backend_without_images_gets_a_note_and_a_warning() -> None:
    image = {"type": "input_image", "image_url": PNG}
    translated = translate({"input": [{"type": "message", "role": "user", "content": [image]}]}, "deepseek-anthropic")
    [block] = translated.body["messages"][0]["content"]
    assert block["type"] == "text" and "image" in block["text"]
    assert any("images replaced" in warning for warning in translated.warnings)


def test_an_image_by_file_id_is_a_request_error_naming_the_part() -> None:
    with pytest.raises(RequestError) as raised:
        translate({"input": [{"type": "message", "role": "user", "content": [{"type": "input_image", "file_id": "file_1"}]}]})
    assert raised.value.param == "input[0].content[0]"


# ---------------------------------------------------------------- tools


def test_tools_are_client_tools_with_flat_names_and_object_schemas() -> None:
    tools = translate({"input": "hi", "tools": [EXEC_COMMAND, APPLY_PATCH, COLLABORATION, FUNCTIONS_NAMESPACE]}).body["tools"]
    assert [tool["name"] for tool in tools] == [
        "exec_command",
        "apply_patch",
        "collaboration__list_agents",
        "collaboration__spawn_agent",
        "functions__exec",
    ]
    assert tools[1]["input_schema"]["required"] == ["input"]
    assert "freeform" in tools[1]["description"]
    assert tools[2]["description"].startswith("Tools for working with other agents.")


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        ("auto", None, {"type": "auto"}),
        ("required", None, {"type": "any"}),
        ("none", None, {"type": "none"}),
        ({"type": "function", "name": "exec_command"}, None, {"type": "tool", "name": "exec_command"}),
        ({"type": "custom", "name": "exec", "namespace": "functions"}, None, {"type": "tool", "name": "functions__exec"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
    ],
)
def test_tool_choice_and_parallel_tool_calls(choice: Any, parallel: bool | None, expected: JSON) -> None:
    body: JSON = {"input": "hi", "tools": [EXEC_COMMAND, FUNCTIONS_NAMESPACE]}
    if choice is not None:
        body["tool_choice"] = choice
    if parallel is not None:
        body["parallel_tool_calls"] = parallel
    assert translate(body).body["tool_choice"] == expected


def test_allowed_tools_sends_the_subset() -> None:
    choice = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "exec_command"}]}
    body = translate({"input": "hi", "tools": TOOLS, "tool_choice": choice}).body
    assert [tool["name"] for tool in body["tools"]] == ["exec_command"]
    assert body["tool_choice"] == {"type": "any"}


@pytest.mark.parametrize("choice", [None, "auto", "none", "required"])
def test_a_history_of_calls_without_tools_declares_the_tools_it_calls_none_to_be_called(choice: str | None) -> None:
    """The API refuses ``tool_use``/``tool_result`` blocks in a request without tools (a
    compaction's summary request offers none): the ones the history calls are declared,
    each once, in order, and ``tool_choice`` is ``none``; ``translate`` checks the rule."""
    items = [
        user("fix it"),
        function_call("c1", "list_agents", '{"all": true}', namespace="collaboration"),
        function_output("c1", "none"),
        custom_call("c2", "apply_patch", "*** Begin Patch"),
        custom_output("c2", "done"),
        function_call("c3", "list_agents", namespace="collaboration"),
        function_output("c3", "still none"),
        user("summarise"),
    ]
    body: JSON = {"input": items} if choice is None else {"input": items, "tool_choice": choice}
    translated = translate(body)
    empty = {"type": "object", "properties": {}}
    said = "A tool called earlier in this conversation, not available now."
    assert [{key: value for key, value in tool.items() if key != "cache_control"} for tool in translated.body["tools"]] == [
        {"name": "collaboration__list_agents", "description": said, "input_schema": empty},
        {"name": "apply_patch", "description": said, "input_schema": empty},
    ]
    assert translated.body["tool_choice"] == {"type": "none"}
    assert "tools the history calls declared, none to be called (tool_choice none)" in translated.conversions
    assert ("tool_choice not sent: no tool can be sent to this backend" in translated.warnings) is (choice == "required")
    assert translate({"input": [user("hi")]}).body.keys().isdisjoint({"tools", "tool_choice"})


def test_tool_choice_naming_an_undeclared_tool_is_a_request_error() -> None:
    with pytest.raises(RequestError) as raised:
        translate({"input": "hi", "tools": [EXEC_COMMAND], "tool_choice": {"type": "function", "name": "nope"}})
    assert raised.value.param == "tool_choice"


@pytest.mark.parametrize(
    ("preset", "tool", "offered", "warned"),
    [
        ("anthropic", {"type": "web_search"}, True, None),
        ("anthropic", {"type": "web_search", "external_web_access": False}, False, "no live web access"),
        ("deepseek-anthropic", {"type": "web_search"}, False, "hosted tools not sent"),
        ("generic", {"type": "web_search"}, False, "hosted tools not sent"),
    ],
)
def test_hosted_web_search_only_where_the_backend_runs_it(preset: str, tool: JSON, offered: bool, warned: str | None) -> None:
    translated = translate({"input": "hi", "tools": [EXEC_COMMAND, tool]}, preset)
    types = [t.get("type") for t in translated.body["tools"]]
    assert ("web_search_20250305" in types) is offered
    if warned is not None:
        assert any(warned in warning for warning in translated.warnings), translated.warnings


# ---------------------------------------------------------------- prompt caching


def test_cache_breakpoints_on_tools_system_and_the_latest_turn() -> None:
    body = translate({"instructions": "sys", "input": [user("a"), assistant("b"), user("c")], "tools": TOOLS}).body
    marked = orjson.dumps(body).count(b'"cache_control"')
    assert marked == 3
    assert "cache_control" in [t for t in body["tools"] if "input_schema" in t][-1]
    assert "cache_control" in body["system"][-1]
    assert "cache_control" in body["messages"][-1]["content"][-1]
    assert "cache_control" not in body["messages"][0]["content"][-1]


def test_no_breakpoints_for_a_backend_that_ignores_them() -> None:
    body = translate({"instructions": "sys", "input": "hi", "tools": TOOLS}, "deepseek-anthropic").body
    assert b"cache_control" not in orjson.dumps(body)
