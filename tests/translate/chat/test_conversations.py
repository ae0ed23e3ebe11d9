"""Whole conversations through ``translate_request`` (``chat/_messages``, ``chat/_content``):
the exact Chat messages each becomes on backends that differ in what they take back, and
the warnings and conversions an operator reads in the log. Every translation also keeps
the invariants every Chat backend relies on (``translate`` in ``shapes``).
"""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.errors import RequestError
from toolwire.translate import PRESETS, BackendProfile, seal_reasoning

from .shapes import (
    COLLABORATION,
    EXEC_COMMAND,
    TOOLS,
    assistant,
    custom_call,
    custom_output,
    developer,
    function_call,
    function_output,
    reasoning,
    translate,
    user,
)

JSON = dict[str, Any]
NO_MERGE = BackendProfile(name="no-merge", merge_consecutive_user=False, reasoning_field="reasoning")

LONG_LOOP = [
    function_output("early", "an output before any call"),
    developer("Use tools."),
    {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "A"}, {"type": "input_image", "image_url": "https://x.example/a.png"}, {"type": "input_text", "text": "B"}]},
    user("go"),
    reasoning(content="think 1"),
    function_call("c1", "list_agents", '{"all":true}', namespace="collaboration"),
    custom_call("c2", "apply_patch", "*** Begin Patch\n"),
    {"type": "tool_search_call", "call_id": "c3", "status": "completed", "execution": "client", "arguments": {"query": "q"}},
    function_call("c1", "exec_command", "{}"),
    assistant("between"),
    custom_output("c2", "patched"),
    function_output(
        "c1",
        [
            {"type": "input_text", "text": "line1"},
            {"type": "output_text", "text": "line2"},
            {"type": "input_image", "image_url": "https://x.example/a.png", "detail": "high"},
            {"type": "input_file", "file_data": "data:application/pdf;base64,JV"},
        ],
    ),
    function_output("c1", "again"),
    {"type": "tool_search_output", "call_id": "c3", "execution": "client", "status": "completed", "tools": [COLLABORATION]},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
    {"type": "additional_tools", "tools": []},
    function_call("c4", "exec_command", ""),
    reasoning(encrypted_content="gAAAA-foreign", summary="sum"),
    reasoning(encrypted_content=seal_reasoning("sealed think")),
    assistant("done"),
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "more"}, {"type": "refusal", "refusal": "no"}, {"type": "input_image", "image_url": "https://x.example/a.png"}]},
    reasoning(summary="dangling"),
    user("next"),
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "t"},
            {"type": "refusal", "refusal": "r"},
            {"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "weird"},
            {"type": "input_file", "file_data": "data:application/pdf;base64,JV", "filename": "a.pdf"},
            {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
            {"type": "input_audio"},
        ],
    },
    function_call("c5", "view_image", '{"path":"a.png"}'),
    function_output("c5", [{"type": "input_image", "image_url": "https://x.example/b.png"}]),
]
LISTING = '{"loaded_tools":[{"name":"collaboration__list_agents","description":"List the agents."},{"name":"collaboration__spawn_agent"}]}'
LATER_PARTS = [
    {"type": "text", "text": "t"},
    {"type": "text", "text": "r"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
    {"type": "file", "file": {"file_data": "data:application/pdf;base64,JV", "filename": "a.pdf"}},
    {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
]


def call(call_id: str, name: str, arguments: str) -> JSON:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool(call_id: str, content: str) -> JSON:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def long_loop_messages(reasoning_field: str | None, *, merged: bool, on_every_assistant: bool = False) -> list[JSON]:
    def reasoned(message: JSON, text: str) -> JSON:
        if reasoning_field is None:
            return message
        return {**message, reasoning_field: text}

    later_user = (
        [{"role": "user", "content": [{"type": "text", "text": "next"}, *LATER_PARTS]}]
        if merged
        else [{"role": "user", "content": "next"}, {"role": "user", "content": LATER_PARTS}]
    )
    last_turn: JSON = {"role": "assistant", "content": "", "tool_calls": [call("c5", "view_image", '{"path":"a.png"}')]}
    return [
        {"role": "system", "content": "Be brief.\n\nUse tools.\n\nA\n\nB"},
        {"role": "user", "content": "go"},
        reasoned(
            {
                "role": "assistant",
                "content": "between",
                "tool_calls": [
                    call("c1", "collaboration__list_agents", '{"all":true}'),
                    call("c2", "apply_patch", '{"input":"*** Begin Patch\\n"}'),
                    call("c3", "tool_search", '{"query":"q"}'),
                ],
            },
            "think 1",
        ),
        tool("c1", "line1\nline2"),
        tool("c2", "patched"),
        tool("c3", LISTING),
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Image output of tool call c1 (collaboration__list_agents):"},
                {"type": "image_url", "image_url": {"url": "https://x.example/a.png", "detail": "high"}},
            ],
        },
        reasoned({"role": "assistant", "content": "done\n\nmoreno", "tool_calls": [call("c4", "exec_command", "{}")]}, "sum\n\nsealed think"),
        tool("c4", "aborted"),
        *later_user,
        {**last_turn, "reasoning_content": ""} if on_every_assistant else last_turn,
        tool("c5", "[1 image(s) attached in the next message]"),
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Image output of tool call c5 (view_image):"},
                {"type": "image_url", "image_url": {"url": "https://x.example/b.png"}},
            ],
        },
    ]


WARNINGS_BEFORE_REASONING = [
    "tool outputs without a matching call dropped: input[0] (early)",
    "system message parts dropped (text only): input_image at input[2].content[1]",
]
WARNINGS_AFTER_REASONING = [
    "calls with a repeated call_id dropped: input[8]",
    "repeated tool outputs for one call dropped: input[12] (c1)",
    "input items skipped (no Chat Completions equivalent): web_search_call at input[14]",
    "tool output parts dropped (tool messages take text and images only): input_file at input[11].output[3]",
]
HOSTED = "hosted tools not sent (a Chat Completions backend cannot run them): web_search"
TOOL_CONVERSIONS = ["custom tool apply_patch wrapped as function", "client tool_search sent as a function", "namespace tools flattened"]


def conversions(reasoning_field: str | None, *, merged: bool) -> list[str]:
    return [
        "system/developer messages merged into one leading system message",
        *([f"reasoning sent as {reasoning_field}"] if reasoning_field else []),
        "custom tool calls sent as function calls",
        "parallel calls merged into one assistant message",
        "tool_search calls sent as function calls",
        "assistant text between calls and their outputs moved before the calls",
        "tool outputs reordered to follow their calls",
        "tool output images sent in a user message after the tool messages",
        'missing tool outputs replaced by "aborted"',
        *(["consecutive user messages merged"] if merged else []),
        *TOOL_CONVERSIONS,
    ]


@pytest.mark.parametrize(
    ("profile", "reasoning_field", "merged"),
    [(PRESETS["generic"], "reasoning_content", True), (PRESETS["deepseek"], "reasoning_content", True), (NO_MERGE, "reasoning", False)],
    ids=["generic", "deepseek", "no-merge"],
)
def test_a_long_tool_loop_on_backends_that_take_reasoning_back(profile: BackendProfile, reasoning_field: str, merged: bool) -> None:
    translated = translate({"instructions": "Be brief.", "tools": TOOLS, "input": LONG_LOOP}, profile)
    assert translated.chat["messages"] == long_loop_messages(
        reasoning_field, merged=merged, on_every_assistant=profile.reasoning_on_every_assistant
    )
    assert translated.warnings == [
        *WARNINGS_BEFORE_REASONING,
        *WARNINGS_AFTER_REASONING,
        "encrypted_content not made by toolwire dropped: input[17]",
        "assistant message parts dropped (text only): input_image at input[20].content[2]",
        "reasoning without a following assistant message dropped: input[21]",
        "message parts dropped (no Chat Completions equivalent): input_audio at input[23].content[5]",
        HOSTED,
    ]
    assert translated.conversions == conversions(reasoning_field, merged=merged)


def test_a_long_tool_loop_on_a_backend_that_takes_no_reasoning_back() -> None:
    translated = translate({"instructions": "Be brief.", "tools": TOOLS, "input": LONG_LOOP}, PRESETS["openai"])
    assert translated.chat["messages"] == long_loop_messages(None, merged=True)
    assert translated.warnings == [
        *WARNINGS_BEFORE_REASONING,
        "reasoning not sent (the backend takes none back)",
        *WARNINGS_AFTER_REASONING,
        "assistant message parts dropped (text only): input_image at input[20].content[2]",
        "message parts dropped (no Chat Completions equivalent): input_audio at input[23].content[5]",
        HOSTED,
    ]
    assert translated.conversions == conversions(None, merged=True)


def test_assistant_turns_one_after_another_and_reasoning_on_every_assistant_message() -> None:
    items = [
        assistant("a"),
        assistant("b"),
        user("u"),
        reasoning(content="r"),
        assistant("c"),
        function_call("c1", "exec_command"),
        function_output("c1", "ok"),
        function_call("c2", "exec_command"),
        function_output("c2", "ok2"),
    ]
    translated = translate({"tools": [EXEC_COMMAND], "input": items}, PRESETS["deepseek"])
    assert translated.chat["messages"] == [
        {"role": "assistant", "content": "a\n\nb", "reasoning_content": ""},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "c", "reasoning_content": "r", "tool_calls": [call("c1", "exec_command", "{}")]},
        tool("c1", "ok"),
        {"role": "assistant", "content": "", "tool_calls": [call("c2", "exec_command", "{}")], "reasoning_content": ""},
        tool("c2", "ok2"),
    ]
    assert translated.warnings == []
    assert translated.conversions == ["consecutive assistant messages merged", "reasoning sent as reasoning_content"]


def test_an_empty_assistant_message_then_another() -> None:
    translated = translate({"input": [user("u"), {"type": "message", "role": "assistant", "content": ""}, assistant("x")]})
    assert translated.chat["messages"] == [{"role": "user", "content": "u"}, {"role": "assistant", "content": "x"}]
    assert translated.conversions == ["consecutive assistant messages merged"]


@pytest.mark.parametrize(
    ("part", "why"),
    [
        ({"type": "input_image", "file_id": "file_1"}, "an input_image needs an image_url; a file_id cannot be sent (Chat Completions has no file ids)."),
        (
            {"type": "input_file", "file_url": "https://x.example/a.pdf"},
            "an input_file needs file_data; a file_id or file_url cannot be sent (Chat Completions has no file ids or URLs).",
        ),
    ],
)
def test_a_part_chat_cannot_take_is_a_request_error_naming_it(part: JSON, why: str) -> None:
    with pytest.raises(RequestError) as raised:
        translate({"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "see"}, part]}]})
    assert (raised.value.message, raised.value.param) == (f"Invalid 'input[0].content[1]': {why}", "input[0].content[1]")


def test_a_message_of_an_unknown_role_is_a_request_error_naming_it() -> None:
    with pytest.raises(RequestError) as raised:
        translate({"input": [user("u"), {"type": "message", "role": "critic", "content": "x"}]})
    assert (raised.value.message, raised.value.param) == (
        "Invalid 'input[1].role': 'critic' is not user, assistant, system or developer.",
        "input[1].role",
    )
