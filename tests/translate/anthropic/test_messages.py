"""The ``system`` and ``messages`` of a Messages request (``anthropic/_messages``): whole
conversations and the exact messages they become, with the warnings and conversions an
operator reads in the log. Every body also passes the scripted Messages API's rules
(``translate`` in ``test_request``).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.messages_upstream import Redacted, sign
from tests.translate.chat.shapes import (
    APPLY_PATCH,
    COLLABORATION,
    EXEC_COMMAND,
    TOOL_SEARCH,
    assistant,
    custom_call,
    custom_output,
    function_call,
    function_output,
    reasoning,
    user,
)
from toolwire.errors import RequestError
from toolwire.translate import seal_reasoning

from .test_request import translate

JSON = dict[str, Any]
TOOLS = [EXEC_COMMAND, APPLY_PATCH, TOOL_SEARCH, COLLABORATION]
CACHED = "cache_control breakpoints on tools, system and the latest turn"
EPHEMERAL = {"type": "ephemeral"}
TOOL_CONVERSIONS = ["custom tool apply_patch wrapped as a tool with one string input", "client tool_search sent as a tool", "namespace tools flattened"]


def thinking(text: str) -> JSON:
    return {"type": "thinking", "thinking": text, "signature": sign(text)}


def signed(*blocks: JSON) -> JSON:
    """A reasoning item as toolwire seals the thinking blocks of an Anthropic answer."""
    text = "".join(block.get("thinking", "") for block in blocks)
    return reasoning(content=text, encrypted_content=seal_reasoning(text, blocks=list(blocks)))


def text(value: str, **extra: Any) -> JSON:
    return {"type": "text", "text": value, **extra}


def tool_use(call_id: str, name: str, value: JSON) -> JSON:
    return {"type": "tool_use", "id": call_id, "name": name, "input": value}


def result(call_id: str, content: Any, **extra: Any) -> JSON:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


REDACTED = {"type": "redacted_thinking", "data": Redacted().data}
LISTING = '{"loaded_tools":[{"name":"collaboration__list_agents","description":"List the agents."},{"name":"collaboration__spawn_agent"}]}'
LONG_LOOP = [
    function_output("early", "an output before any call"),
    user("go"),
    signed(thinking("plan")),
    function_call("c1", "list_agents", '{"all": true}', namespace="collaboration"),
    custom_call("c2", "apply_patch", "*** Begin Patch\n"),
    {"type": "tool_search_call", "call_id": "c3", "status": "completed", "execution": "client", "arguments": '{"query": "q"}'},
    function_call("c1", "exec_command", "{}"),
    assistant("between"),
    custom_output("c2", "patched"),
    function_output("c1", "listed"),
    function_output("c1", "again"),
    {"type": "tool_search_output", "call_id": "c3", "execution": "client", "status": "completed", "tools": [COLLABORATION]},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
    {"type": "additional_tools", "tools": []},
    {"type": "local_shell_call", "call_id": "ls1", "status": "completed", "action": {"type": "exec", "command": ["ls"]}},
    function_call("c4", "exec_command", "[1]"),
    function_call("c5", "exec_command", "  "),
    reasoning(content="from another backend"),
    signed(REDACTED, thinking("t")),
    assistant("done"),
    signed(thinking("dangling")),
    user("next"),
]


def long_loop_messages(second_thinking: list[JSON]) -> list[JSON]:
    return [
        {"role": "user", "content": [text("go")]},
        {
            "role": "assistant",
            "content": [
                thinking("plan"),
                text("between"),
                tool_use("c1", "collaboration__list_agents", {"all": True}),
                tool_use("c2", "apply_patch", {"input": "*** Begin Patch\n"}),
                tool_use("c3", "tool_search", {"query": "q"}),
            ],
        },
        {"role": "user", "content": [result("c1", "listed"), result("c2", "patched"), result("c3", LISTING)]},
        {
            "role": "assistant",
            "content": [
                *second_thinking,
                text("done"),
                tool_use("c4", "exec_command", {"arguments": "[1]"}),
                tool_use("c5", "exec_command", {}),
            ],
        },
        {"role": "user", "content": [result("c4", "aborted"), result("c5", "aborted"), text("next")]},
    ]


LONG_LOOP_WARNINGS = [
    'call arguments that are not a JSON object sent as {"arguments": text}: input[15]',
    "tool outputs without a matching call dropped: input[0] (early)",
    "calls with a repeated call_id dropped: input[6]",
    "repeated tool outputs for one call dropped: input[10] (c1)",
    "input items skipped (no Messages API equivalent): local_shell_call at input[14]",
    "reasoning not sent (only thinking this backend signed can go back): input[17]",
]
LONG_LOOP_CONVERSIONS = [
    "custom tool calls sent as tool_use",
    "parallel calls merged into one assistant message",
    "tool_search calls sent as tool_use",
    "assistant text between calls and their outputs moved before the calls",
    "web_search_call items not sent back (their results are in the answer)",
    "tool outputs reordered to follow their calls",
    'missing tool outputs replaced by "aborted"',
    *TOOL_CONVERSIONS,
]


def test_a_long_tool_loop_becomes_alternating_messages_with_results_after_their_calls() -> None:
    translated = translate({"tools": TOOLS, "input": LONG_LOOP})
    messages = translated.body["messages"]
    assert messages[-1]["content"][-1].pop("cache_control") == EPHEMERAL
    assert messages == long_loop_messages([REDACTED, thinking("t")])
    assert translated.warnings == [
        *LONG_LOOP_WARNINGS,
        "reasoning without a following assistant message dropped: input[20]",
    ]
    assert translated.conversions == [*LONG_LOOP_CONVERSIONS, CACHED]


def test_a_backend_that_rejects_redacted_thinking_gets_the_rest_of_the_reasoning() -> None:
    translated = translate({"tools": TOOLS, "input": LONG_LOOP}, "deepseek-anthropic")
    assert translated.body["messages"] == long_loop_messages([thinking("t")])
    assert translated.warnings == [
        *LONG_LOOP_WARNINGS,
        "redacted_thinking not sent (the backend rejects it): input[18]",
        "reasoning without a following assistant message dropped: input[20]",
    ]
    assert translated.conversions == LONG_LOOP_CONVERSIONS


@pytest.mark.parametrize(
    ("items", "messages", "conversions"),
    [
        (
            [user("go"), function_call("c1", "exec_command"), function_output("c1", "1"), function_call("c2", "exec_command"), function_output("c2", "2")],
            [
                {"role": "user", "content": [text("go")]},
                {"role": "assistant", "content": [tool_use("c1", "exec_command", {})]},
                {"role": "user", "content": [result("c1", "1")]},
                {"role": "assistant", "content": [tool_use("c2", "exec_command", {})]},
                {"role": "user", "content": [result("c2", "2", cache_control=EPHEMERAL)]},
            ],
            [],
        ),
        (
            [function_output("c1", "early"), user("go"), function_call("c1", "exec_command"), user("after")],
            [
                {"role": "user", "content": [text("go")]},
                {"role": "assistant", "content": [tool_use("c1", "exec_command", {})]},
                {"role": "user", "content": [result("c1", "early"), text("after", cache_control=EPHEMERAL)]},
            ],
            ["tool outputs reordered to follow their calls"],
        ),
        (
            [user("go"), function_call("c1", "exec_command"), {"type": "message", "role": "assistant", "content": []}, function_output("c1", "1")],
            [
                {"role": "user", "content": [text("go")]},
                {"role": "assistant", "content": [tool_use("c1", "exec_command", {})]},
                {"role": "user", "content": [result("c1", "1", cache_control=EPHEMERAL)]},
            ],
            ["assistant text between calls and their outputs moved before the calls"],
        ),
        (
            [
                user("go"),
                {"type": "tool_search_call", "call_id": "c3", "status": "completed", "execution": "client", "arguments": [1]},
                {"type": "tool_search_output", "call_id": "c3", "execution": "client", "status": "completed", "tools": []},
            ],
            [
                {"role": "user", "content": [text("go")]},
                {"role": "assistant", "content": [tool_use("c3", "tool_search", {})]},
                {"role": "user", "content": [result("c3", '{"loaded_tools":[]}', cache_control=EPHEMERAL)]},
            ],
            ["tool_search calls sent as tool_use"],
        ),
        (
            [assistant("Earlier."), user("now")],
            [
                {"role": "user", "content": [text("(The conversation continues from an earlier assistant turn.)")]},
                {"role": "assistant", "content": [text("Earlier.")]},
                {"role": "user", "content": [text("now", cache_control=EPHEMERAL)]},
            ],
            ["a user message put first (the Messages API starts with one)"],
        ),
    ],
    ids=["one-loop-after-another", "output-before-its-call", "empty-assistant-between", "tool-search-without-object", "assistant-first"],
)
def test_conversations(items: list[JSON], messages: list[JSON], conversions: list[str]) -> None:
    translated = translate({"tools": [EXEC_COMMAND, TOOL_SEARCH], "input": items})
    assert translated.body["messages"] == messages
    assert translated.warnings == []
    assert translated.conversions == [*conversions, "client tool_search sent as a tool", CACHED]


def test_a_message_of_an_unknown_role_is_a_request_error_naming_it() -> None:
    with pytest.raises(RequestError) as raised:
        translate({"input": [user("a"), {"type": "message", "role": "tool", "content": "x"}]})
    assert raised.value.message == "Invalid 'input[1].role': 'tool' is not user, assistant, system or developer."
    assert raised.value.param == "input[1].role"


def test_a_request_with_nothing_to_send_is_a_request_error() -> None:
    with pytest.raises(RequestError) as raised:
        translate({"input": [{"type": "message", "role": "user", "content": ""}]})
    assert raised.value.message == "Invalid 'input': the Messages API needs at least one message with content."
    assert raised.value.param == "input"


def test_text_after_a_finished_tool_loop_starts_the_next_turn() -> None:
    translated = translate(
        {
            "tools": [EXEC_COMMAND, TOOL_SEARCH],
            "input": [
                user("go"),
                function_call("c1", "exec_command"),
                function_output("c1", "ok"),
                assistant("after"),
                {"type": "tool_search_call", "call_id": "c3", "status": "completed", "execution": "client", "arguments": '"x"'},
                {"type": "tool_search_output", "call_id": "c3", "execution": "client", "status": "completed", "tools": []},
                {"type": "message", "role": "assistant", "content": "plain"},
                {"type": "message", "role": "system", "content": "sys plain"},
                {"type": "message", "role": "assistant", "content": [{"type": "input_image", "image_url": "http://x.example/a.png"}, {"type": "output_text", "text": "kept"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "http://x.example/a.png"}]},
            ],
        }
    )
    assert translated.body["messages"] == [
        {"role": "user", "content": [text("go")]},
        {"role": "assistant", "content": [tool_use("c1", "exec_command", {})]},
        {"role": "user", "content": [result("c1", "ok")]},
        {"role": "assistant", "content": [text("after"), tool_use("c3", "tool_search", {"arguments": '"x"'})]},
        {"role": "user", "content": [result("c3", '{"loaded_tools":[]}')]},
        {"role": "assistant", "content": [text("plain\n\nkept")]},
        {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "http://x.example/a.png"}, "cache_control": EPHEMERAL}]},
    ]
    assert translated.body["system"] == [text("sys plain", cache_control=EPHEMERAL)]
    assert translated.warnings == [
        'call arguments that are not a JSON object sent as {"arguments": text}: input[4]',
        "assistant message parts dropped (text only): input_image at input[8].content[0]",
    ]


def test_a_turns_results_and_the_next_user_message_are_one_user_message() -> None:
    sent = translate(
        {
            "tools": TOOLS,
            "input": [user("go"), function_call("c1", "exec_command", "{}"), function_output("c1", "ok"), user("next"), assistant("done")],
        }
    ).body["messages"]
    assert [(message["role"], [block["type"] for block in message["content"]]) for message in sent] == [
        ("user", ["text"]),
        ("assistant", ["tool_use"]),
        ("user", ["tool_result", "text"]),
        ("assistant", ["text"]),
    ]
    assert sent[2]["content"][1]["text"] == "next"
