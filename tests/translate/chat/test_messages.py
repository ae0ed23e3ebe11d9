"""The Chat messages of a translated request (``chat/_messages``, ``chat/_content``):
the system message, message content, calls and their outputs, reasoning, items without
a Chat equivalent."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from toolwire.errors import RequestError
from toolwire.translate import BackendProfile, seal_reasoning

from .shapes import (
    DEEPSEEK,
    FUNCTIONS_NAMESPACE,
    PNG,
    TOOLS,
    VALID_NAME,
    VLLM,
    assistant,
    conversation,
    custom_call,
    custom_output,
    developer,
    function_call,
    function_output,
    reasoning,
    roles,
    tool_search_call,
    translate,
    user,
)

# ---------------------------------------------------------------- system message


@pytest.mark.parametrize(
    ("body", "system"),
    [
        ({"instructions": "Be brief.", "input": "hi"}, "Be brief."),
        ({"input": [developer("A"), user("hi")]}, "A"),
        (
            {
                "instructions": "I",
                "input": [
                    developer("A"),
                    user("hi"),
                    assistant("ok"),
                    developer("B"),
                    user("more"),
                ],
            },
            "I\n\nA\n\nB",
        ),
        (
            {
                "input": [
                    {"role": "system", "content": "S"},
                    {
                        "type": "message",
                        "role": "developer",
                        "content": [
                            {"type": "input_text", "text": "D1"},
                            {"type": "input_text", "text": "D2"},
                        ],
                    },
                    user("hi"),
                ]
            },
            "S\n\nD1\n\nD2",
        ),
        ({"input": "hi"}, None),
    ],
    ids=["instructions", "developer", "everywhere-in-order", "system-and-parts", "none"],
)
def test_instructions_and_system_messages_become_one_leading_system_message(
    body: dict[str, Any], system: str | None
) -> None:
    messages = translate(body).chat["messages"]
    systems = [m for m in messages if m["role"] == "system"]
    if system is None:
        assert systems == []
    else:
        assert systems == [{"role": "system", "content": system}]
        assert messages[0] is systems[0]


def test_mid_conversation_developer_message_does_not_split_user_turns() -> None:
    messages = conversation(user("one"), developer("rule"), user("two"))
    assert messages == [{"role": "user", "content": "one\n\ntwo"}]


# ---------------------------------------------------------------- message content


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("plain string", "plain string"),
        ([{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}], "a\n\nb"),
        (
            [
                {"type": "input_text", "text": "what is this?"},
                {"type": "input_image", "image_url": PNG, "detail": "low"},
            ],
            [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
            ],
        ),
        (
            [
                {
                    "type": "input_image",
                    "image_url": "https://example.com/a.png",
                    "detail": "original",
                }
            ],
            [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}],
        ),
        (
            [
                {
                    "type": "input_file",
                    "file_data": "data:application/pdf;base64,AAAA",
                    "filename": "a.pdf",
                }
            ],
            [
                {
                    "type": "file",
                    "file": {"file_data": "data:application/pdf;base64,AAAA", "filename": "a.pdf"},
                }
            ],
        ),
    ],
    ids=["string", "text-parts-collapse", "text-and-image", "detail-original-omitted", "file-data"],
)
def test_user_content(content: Any, expected: Any) -> None:
    assert conversation({"role": "user", "content": content}) == [
        {"role": "user", "content": expected}
    ]


def test_consecutive_user_messages_merge_only_when_the_profile_asks() -> None:
    image = {"role": "user", "content": [{"type": "input_image", "image_url": PNG}]}
    assert conversation(user("a"), image) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image_url", "image_url": {"url": PNG}},
            ],
        }
    ]
    # An empty message adds nothing to the parts it is merged with, not an empty text part.
    assert conversation(image, {"role": "user", "content": ""}) == [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": PNG}}]}
    ]
    separate = BackendProfile(merge_consecutive_user=False)
    assert conversation(user("a"), user("b"), profile=separate) == [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
    ]


def test_assistant_output_message_concatenates_text_and_refusal() -> None:
    item = {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "phase": "final_answer",
        "content": [
            {"type": "output_text", "text": "Hello", "annotations": []},
            {"type": "output_text", "text": " world.", "annotations": []},
            {"type": "refusal", "refusal": " I can't do that."},
        ],
    }
    assert conversation(user("hi"), item) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello world. I can't do that."},
    ]


def test_image_given_by_file_id_is_a_request_error_naming_the_part() -> None:
    body = {
        "input": [
            user("x"),
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "see"},
                    {"type": "input_image", "file_id": "file-1", "detail": "auto"},
                ],
            },
        ]
    }
    with pytest.raises(RequestError) as caught:
        translate(body)
    assert caught.value.param == "input[1].content[1]"
    assert "file" in caught.value.message


# ---------------------------------------------------------------- calls and outputs


def test_parallel_calls_of_every_kind_become_one_assistant_message() -> None:
    messages = conversation(
        user("go"),
        reasoning(content="plan"),
        custom_call("call_a", "apply_patch", "*** Begin Patch\n*** End Patch\n"),
        tool_search_call("call_b", "spawn"),
        reasoning(content="and look"),
        function_call("call_c", "view_image", '{"path":"a.png"}'),
        function_call("call_d", "list_agents", namespace="collaboration"),
        custom_output("call_a", "Done!"),
        {
            "type": "tool_search_output",
            "call_id": "call_b",
            "execution": "client",
            "status": "completed",
            "tools": [],
        },
        function_output("call_c", "no such file"),
        function_output("call_d", '{"agents":[]}'),
    )
    assert roles(messages) == ["user", "assistant", "tool", "tool", "tool", "tool"]
    call_message = messages[1]
    assert call_message["content"] == ""
    assert call_message["reasoning_content"] == "plan\n\nand look"
    assert call_message["tool_calls"] == [
        {
            "id": "call_a",
            "type": "function",
            "function": {
                "name": "apply_patch",
                "arguments": '{"input":"*** Begin Patch\\n*** End Patch\\n"}',
            },
        },
        {
            "id": "call_b",
            "type": "function",
            "function": {"name": "tool_search", "arguments": '{"query":"spawn","limit":2}'},
        },
        {
            "id": "call_c",
            "type": "function",
            "function": {"name": "view_image", "arguments": '{"path":"a.png"}'},
        },
        {
            "id": "call_d",
            "type": "function",
            "function": {"name": "collaboration__list_agents", "arguments": "{}"},
        },
    ]
    assert [m["content"] for m in messages[2:]] == [
        "Done!",
        '{"loaded_tools":[]}',
        "no such file",
        '{"agents":[]}',
    ]


def test_sequential_turns_stay_separate_assistant_messages() -> None:
    messages = conversation(
        user("go"),
        function_call("call_1", "exec_command", '{"cmd":"ls"}'),
        function_output("call_1", "a.txt"),
        function_call("call_2", "exec_command", '{"cmd":"cat a.txt"}'),
        function_output("call_2", "hello"),
        assistant("It says hello."),
    )
    assert roles(messages) == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert messages[-1] == {"role": "assistant", "content": "It says hello."}


def test_outputs_are_reordered_to_follow_their_calls() -> None:
    translated = translate(
        {
            "tools": TOOLS,
            "input": [
                user("go"),
                function_call("call_1", "exec_command"),
                function_call("call_2", "exec_command"),
                function_output("call_2", "second"),
                function_output("call_1", "first"),
            ],
        }
    )
    messages = translated.chat["messages"]
    assert [(m["role"], m.get("tool_call_id"), m["content"]) for m in messages[2:]] == [
        ("tool", "call_1", "first"),
        ("tool", "call_2", "second"),
    ]
    assert "tool outputs reordered to follow their calls" in translated.conversions


def test_output_separated_from_its_call_by_a_user_message_moves_up() -> None:
    messages = conversation(
        user("go"),
        function_call("call_1", "exec_command"),
        user("are you done?"),
        function_output("call_1", "yes"),
    )
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "go"),
        ("assistant", ""),
        ("tool", "yes"),
        ("user", "are you done?"),
    ]


def test_call_without_output_gets_an_aborted_tool_message() -> None:
    translated = translate(
        {
            "tools": TOOLS,
            "input": [
                user("go"),
                function_call("call_1", "exec_command"),
                function_call("call_2", "exec_command"),
                function_output("call_2", "ok"),
                user("next"),
            ],
        }
    )
    messages = translated.chat["messages"]
    assert [(m["role"], m.get("tool_call_id"), m["content"]) for m in messages] == [
        ("user", None, "go"),
        ("assistant", None, ""),
        ("tool", "call_1", "aborted"),
        ("tool", "call_2", "ok"),
        ("user", None, "next"),
    ]


def test_orphan_output_is_dropped_with_a_warning() -> None:
    translated = translate(
        {
            "tools": TOOLS,
            "input": [user("go"), function_output("call_gone", "late"), assistant("hi")],
        }
    )
    assert roles(translated.chat["messages"]) == ["user", "assistant"]
    assert translated.warnings == [
        "tool outputs without a matching call dropped: input[1] (call_gone)",
        "hosted tools not sent (a Chat Completions backend cannot run them): web_search",
    ]


def test_assistant_text_between_a_call_and_its_output_moves_before_the_calls() -> None:
    translated = translate(
        {
            "tools": TOOLS,
            "input": [
                user("go"),
                assistant("Let me check."),
                function_call("call_1", "exec_command"),
                assistant("Still running."),
                function_output("call_1", "done"),
                assistant("Finished."),
            ],
        }
    )
    messages = translated.chat["messages"]
    assert [(m["role"], m["content"], len(m.get("tool_calls", []))) for m in messages] == [
        ("user", "go", 0),
        ("assistant", "Let me check.\n\nStill running.", 1),
        ("tool", "done", 0),
        ("assistant", "Finished.", 0),
    ]
    assert (
        "assistant text between calls and their outputs moved before the calls"
        in translated.conversions
    )


def test_output_arrays_flatten_to_text_joined_by_newlines() -> None:
    output = [
        {"type": "input_text", "text": "Script completed"},
        {"type": "input_text", "text": '{"exit_code":0}'},
    ]
    messages = conversation(
        user("go"),
        custom_call("call_1", "exec", "text(1)", namespace="functions"),
        custom_output("call_1", output),
        tools=[FUNCTIONS_NAMESPACE],
    )
    assert messages[1]["tool_calls"][0]["function"] == {
        "name": "functions__exec",
        "arguments": '{"input":"text(1)"}',
    }
    assert messages[2] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": 'Script completed\n{"exit_code":0}',
    }


def test_view_image_output_reaches_the_model_in_one_user_message_after_the_tool_messages() -> None:
    translated = translate(
        {
            "tools": TOOLS,
            "input": [
                user("describe a.png and b.png"),
                function_call("call_a", "view_image", '{"path":"a.png"}'),
                function_call("call_b", "view_image", '{"path":"b.png"}'),
                function_output(
                    "call_a", [{"type": "input_image", "image_url": PNG, "detail": "original"}]
                ),
                function_output(
                    "call_b",
                    [
                        {"type": "input_text", "text": "b.png:"},
                        {"type": "input_image", "image_url": PNG, "detail": "high"},
                    ],
                ),
                user("thanks"),
            ],
        }
    )
    messages = translated.chat["messages"]
    assert roles(messages) == ["user", "assistant", "tool", "tool", "user"]
    assert messages[2]["content"] == "[1 image(s) attached in the next message]"
    assert messages[3]["content"] == "b.png:"
    assert messages[4]["content"] == [
        {"type": "text", "text": "Image output of tool call call_a (view_image):"},
        {"type": "image_url", "image_url": {"url": PNG}},
        {"type": "text", "text": "Image output of tool call call_b (view_image):"},
        {"type": "image_url", "image_url": {"url": PNG, "detail": "high"}},
        {"type": "text", "text": "thanks"},
    ]


def test_image_in_an_output_given_by_file_id_is_a_request_error() -> None:
    body = {
        "tools": TOOLS,
        "input": [
            user("go"),
            function_call("c", "view_image"),
            function_output("c", [{"type": "input_image", "file_id": "file-9"}]),
        ],
    }
    with pytest.raises(RequestError) as caught:
        translate(body)
    assert caught.value.param == "input[2].output[0]"


def test_tool_search_output_lists_the_loaded_tools_by_upstream_name() -> None:
    loaded = {
        "type": "namespace",
        "name": "multi_agent_v1",
        "description": "Tools for spawning and managing sub-agents.",
        "tools": [
            {
                "type": "function",
                "name": "spawn_agent",
                "description": "Spawn a sub-agent.\nLong details...",
                "defer_loading": True,
                "parameters": {"type": "object", "properties": {}},
            },
            {
                "type": "function",
                "name": "close_agent",
                "defer_loading": True,
                "parameters": {"type": "object", "properties": {}},
            },
        ],
    }
    translated = translate(
        {
            "tools": TOOLS,
            "input": [
                user("spawn an agent"),
                tool_search_call("call_s", "spawn"),
                {
                    "type": "tool_search_output",
                    "call_id": "call_s",
                    "execution": "client",
                    "status": "completed",
                    "tools": [loaded],
                },
            ],
        }
    )
    tool_message = translated.chat["messages"][-1]
    assert orjson.loads(tool_message["content"]) == {
        "loaded_tools": [
            {"name": "multi_agent_v1__spawn_agent", "description": "Spawn a sub-agent."},
            {"name": "multi_agent_v1__close_agent"},
        ]
    }
    sent = {tool["function"]["name"]: tool["function"] for tool in translated.chat["tools"]}
    assert sent["multi_agent_v1__spawn_agent"]["description"] == (
        "Tools for spawning and managing sub-agents.\n\nSpawn a sub-agent.\nLong details..."
    )


def test_long_call_ids_are_shortened_the_same_way_for_call_and_output() -> None:
    long_id = "fc_" + "x" * 60
    messages = conversation(
        user("go"), function_call(long_id, "exec_command"), function_output(long_id, "ok")
    )
    call_id = messages[1]["tool_calls"][0]["id"]
    assert len(call_id) <= 40
    assert messages[2]["tool_call_id"] == call_id


def test_call_of_an_undeclared_tool_keeps_a_valid_flat_name() -> None:
    messages = conversation(
        user("go"), function_call("c1", "old.tool", namespace="gone"), function_output("c1", "x")
    )
    assert VALID_NAME.match(messages[1]["tool_calls"][0]["function"]["name"])


# ---------------------------------------------------------------- reasoning

FOREIGN_BLOB = "gAAAAABoOpaqueOpenAIBlob=="


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (
            reasoning(
                content="raw thoughts",
                summary="summary",
                encrypted_content=seal_reasoning("sealed"),
            ),
            "raw thoughts",
        ),
        (
            reasoning(summary="summary", encrypted_content=seal_reasoning("sealed thoughts")),
            "sealed thoughts",
        ),
        (reasoning(summary="**Step 0**"), "**Step 0**"),
        (reasoning(summary="summary", encrypted_content=FOREIGN_BLOB), "summary"),
        (
            {"type": "reasoning", "id": "rs_parts", "summary": [], "content": [{"type": "reasoning_text", "text": "one "}, {"type": "reasoning_text", "text": "two"}]},
            "one two",
        ),
        (
            {"type": "reasoning", "id": "rs_summaries", "summary": [{"type": "summary_text", "text": "first"}, {"type": "summary_text", "text": "second"}]},
            "first\n\nsecond",
        ),
    ],
    ids=["content", "envelope", "summary", "foreign-blob", "content-parts", "summaries"],
)
def test_reasoning_rides_on_the_following_assistant_message(
    item: dict[str, Any], expected: str
) -> None:
    messages = conversation(user("hi"), item, assistant("hello"))
    assert messages[1] == {"role": "assistant", "content": "hello", "reasoning_content": expected}


def test_foreign_encrypted_content_is_never_sent_and_is_warned_about() -> None:
    translated = translate(
        {
            "input": [
                user("hi"),
                reasoning(content="thinking", encrypted_content=FOREIGN_BLOB),
                assistant("hello"),
            ]
        }
    )
    assert FOREIGN_BLOB not in orjson.dumps(translated.chat).decode()
    assert translated.warnings == ["encrypted_content not made by toolwire dropped: input[1]"]


def test_reasoning_uses_the_backends_field_or_none() -> None:
    items = (
        user("hi"),
        reasoning(content="why"),
        function_call("c", "exec_command"),
        function_output("c", "ok"),
    )
    assert conversation(*items, profile=VLLM)[1]["reasoning"] == "why"
    silent = conversation(*items, profile=BackendProfile(reasoning_field=None))
    assert all("reasoning" not in m and "reasoning_content" not in m for m in silent)


def test_deepseek_profile_puts_reasoning_on_every_assistant_message() -> None:
    messages = conversation(
        user("hi"),
        assistant("Hello."),
        user("run ls"),
        reasoning(content="use exec"),
        function_call("c", "exec_command", '{"cmd":"ls"}'),
        function_output("c", "a.txt"),
        assistant("a.txt"),
        profile=DEEPSEEK,
    )
    assistants = [m for m in messages if m["role"] == "assistant"]
    assert [m["reasoning_content"] for m in assistants] == ["", "use exec", ""]
    plain = conversation(user("hi"), assistant("Hello."))
    assert "reasoning_content" not in plain[1]


def test_reasoning_without_a_following_answer_is_dropped() -> None:
    translated = translate({"input": [user("hi"), reasoning(content="hmm"), user("hello?")]})
    assert all("reasoning_content" not in m for m in translated.chat["messages"])
    assert translated.warnings == [
        "reasoning without a following assistant message dropped: input[1]"
    ]


def test_items_without_chat_meaning_are_skipped() -> None:
    translated = translate(
        {
            "input": [
                {"type": "additional_tools", "role": "developer", "tools": []},
                user("hi"),
                {
                    "type": "web_search_call",
                    "id": "ws_1",
                    "status": "completed",
                    "action": {"type": "search", "query": "q"},
                },
                {
                    "type": "local_shell_call",
                    "id": "lsc_1",
                    "call_id": "c",
                    "status": "completed",
                    "action": {"type": "exec", "command": ["ls"]},
                },
                {"type": "compaction", "encrypted_content": "opaque"},
                {"type": "item_reference", "id": "msg_old"},
                {"type": "agent_message", "content": "?"},
                {
                    "type": "tool_search_call",
                    "call_id": "s",
                    "execution": "server",
                    "arguments": {},
                },
                assistant("hello"),
            ]
        }
    )
    assert translated.chat["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    assert translated.warnings == [
        "input items skipped (no Chat Completions equivalent): web_search_call at input[2], local_shell_call at input[3], "
        "compaction at input[4], item_reference at input[5], agent_message at input[6] and 1 more"
    ]




def test_a_history_that_starts_with_a_call() -> None:
    messages = conversation(function_call("c1", "exec_command", "{}"), function_output("c1", "ok"), user("next"))
    assert [(m["role"], m.get("tool_calls", [{}])[0].get("id"), m.get("content")) for m in messages] == [
        ("assistant", "c1", ""),
        ("tool", None, "ok"),
        ("user", None, "next"),
    ]


def test_a_refusal_in_a_system_message_is_dropped_with_a_warning() -> None:
    system = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}, {"type": "refusal", "refusal": "no"}]}
    translated = translate({"input": [system, user("hi")]})
    assert translated.chat["messages"][0] == {"role": "system", "content": "Be brief."}
    assert translated.warnings == ["system message parts dropped (text only): refusal at input[0].content[1]"]


def test_a_user_message_keeps_output_text_parts_as_text() -> None:
    replayed = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "one"}, {"type": "output_text", "text": "two"}]}
    translated = translate({"input": [replayed]})
    assert (translated.chat["messages"], translated.warnings) == ([{"role": "user", "content": "one\n\ntwo"}], [])
