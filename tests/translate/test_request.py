"""``translate_request``: Responses requests in, Chat Completions requests out.

Item and tool shapes are the ones Codex sends (/work/shared/REAL_CLIENTS.md); the
recorded Codex bodies under ``tests/fixtures/codex`` are translated whole and checked
against the invariants every Chat backend relies on.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.protocol.codex_fixtures import FIXTURE_FILES as CODEX_FIXTURE_FILES
from toolwire.errors import RequestError
from toolwire.protocol import (
    CustomToolCallItem,
    FunctionCallItem,
    ResponsesRequest,
    ToolSearchCallItem,
    parse_request,
)
from toolwire.tools import ToolKind, ToolName
from toolwire.translate.profile import GENERIC, PRESETS, BackendProfile
from toolwire.translate.reasoning import seal_reasoning
from toolwire.translate.request import TranslatedRequest, translate_request

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
DEEPSEEK = BackendProfile(name="deepseek", reasoning_on_every_assistant=True)
VLLM = BackendProfile(
    name="vllm", reasoning_field="reasoning", max_tokens_field="max_completion_tokens"
)

# ---------------------------------------------------------------- shapes Codex sends

EXEC_COMMAND = {
    "type": "function",
    "name": "exec_command",
    "description": "Runs a command in a PTY.",
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string", "description": "Shell command to execute."}},
        "required": ["cmd"],
        "additionalProperties": False,
    },
}
VIEW_IMAGE = {
    "type": "function",
    "name": "view_image",
    "description": "View a local image file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}
APPLY_PATCH_GRAMMAR = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\n'
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Use the `apply_patch` tool to edit files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": APPLY_PATCH_GRAMMAR},
}
TOOL_SEARCH = {
    "type": "tool_search",
    "execution": "client",
    "description": "Search deferred tools.",
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "number"}},
        "required": ["query"],
    },
}
COLLABORATION = {
    "type": "namespace",
    "name": "collaboration",
    "description": "Tools for working with other agents.",
    "tools": [
        {
            "type": "function",
            "name": "list_agents",
            "description": "List the agents.",
            "parameters": {"type": "object", "properties": {}},
        },
        {
            "type": "function",
            "name": "spawn_agent",
            "parameters": {"type": "object", "properties": {"task": {"type": "string"}}},
        },
    ],
}
EXEC_JS = {
    "type": "custom",
    "name": "exec",
    "description": "Run JavaScript.",
    "format": {
        "type": "grammar",
        "syntax": "lark",
        "definition": "start: SOURCE\nSOURCE: /[\\s\\S]+/\n",
    },
}
FUNCTIONS_NAMESPACE = {
    "type": "namespace",
    "name": "functions",
    "description": "",
    "tools": [EXEC_JS],
}
WEB_SEARCH = {"type": "web_search", "external_web_access": False}
TOOLS = [EXEC_COMMAND, VIEW_IMAGE, APPLY_PATCH, TOOL_SEARCH, COLLABORATION, WEB_SEARCH]

PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEklEQVR4nGP4z8DAAMIM/4EAAB/uBfsL2WiLAAAAAElFTkSuQmCC"


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def developer(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": text}],
    }


def assistant(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call(
    call_id: str, name: str, arguments: str = "{}", namespace: str | None = None
) -> dict[str, Any]:
    item = {
        "type": "function_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }
    if namespace is not None:
        item["namespace"] = namespace
    return item


def function_output(call_id: str, output: Any) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def custom_call(
    call_id: str, name: str, input_text: str, namespace: str | None = None
) -> dict[str, Any]:
    item = {
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "input": input_text,
    }
    if namespace is not None:
        item["namespace"] = namespace
    return item


def custom_output(call_id: str, output: Any) -> dict[str, Any]:
    return {"type": "custom_tool_call_output", "call_id": call_id, "output": output}


def tool_search_call(call_id: str, query: str) -> dict[str, Any]:
    return {
        "type": "tool_search_call",
        "call_id": call_id,
        "status": "completed",
        "execution": "client",
        "arguments": {"query": query, "limit": 2},
    }


def reasoning(
    *, content: str | None = None, summary: str | None = None, encrypted_content: str | None = None
) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "id": "rs_1", "summary": []}
    if summary is not None:
        item["summary"] = [{"type": "summary_text", "text": summary}]
    if content is not None:
        item["content"] = [{"type": "reasoning_text", "text": content}]
    if encrypted_content is not None:
        item["encrypted_content"] = encrypted_content
    return item


def translate(
    body: dict[str, Any], profile: BackendProfile = GENERIC, **kwargs: Any
) -> TranslatedRequest:
    # As JSON, the way the gateway gets a body: the tool lists the tests share (``TOOLS``)
    # are then validated once and translated from the kept specs and tool tables.
    request = parse_request(orjson.dumps({"model": "gpt-5.5", **body}))
    translated = translate_request(request, profile, **kwargs)
    check_invariants(request, translated)
    return translated


def conversation(
    *items: dict[str, Any], profile: BackendProfile = GENERIC, **body: Any
) -> list[dict[str, Any]]:
    """The messages for ``items`` with the standard tools, without the system message."""
    messages = translate({"tools": TOOLS, "input": list(items), **body}, profile).chat["messages"]
    return [dict(m) for m in messages if m["role"] != "system"]


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


# ---------------------------------------------------------------- invariants

VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_invariants(request: ResponsesRequest, translated: TranslatedRequest) -> None:
    """What every Chat backend needs, whatever the input was."""
    chat = translated.chat
    messages = chat["messages"]
    orjson.dumps(chat)  # plain JSON all the way down
    assert all(m["role"] in ("system", "user", "assistant", "tool") for m in messages)
    assert [i for i, m in enumerate(messages) if m["role"] == "system"] in ([], [0])
    position = 0
    while position < len(messages):
        message = messages[position]
        position += 1
        assert message["role"] != "tool", f"tool message {position - 1} follows no tool call"
        calls = message.get("tool_calls") or []
        if not calls:
            continue
        assert message["role"] == "assistant"
        answers = [m.get("tool_call_id") for m in messages[position : position + len(calls)]]
        assert answers == [call["id"] for call in calls]
        assert all(
            m["role"] == "tool" and isinstance(m["content"], str)
            for m in messages[position : position + len(calls)]
        )
        position += len(calls)
        for call in calls:
            assert len(call["id"]) <= 40
            assert VALID_NAME.match(call["function"]["name"])
    for tool in chat.get("tools", []):
        name = tool["function"]["name"]
        assert VALID_NAME.match(name)
        upstream = translated.tools.by_upstream_name(name)
        assert upstream is not None
        if upstream.kind is ToolKind.CUSTOM:
            parameters = tool["function"]["parameters"]
            assert parameters["required"] == ["input"]
            assert list(parameters["properties"]) == ["input"]
            assert parameters["properties"]["input"]["type"] == "string"
    if "tools" not in chat:
        assert "tool_choice" not in chat and "parallel_tool_calls" not in chat
    # a declared tool called in the history is restored from its flat name
    for item in request.input_items():
        if isinstance(item, FunctionCallItem | CustomToolCallItem):
            tool_name = ToolName(item.namespace, item.name)
            if translated.tools.by_tool_name(tool_name) is not None:
                flat = translated.tools.upstream_name(tool_name)
                restored = translated.tools.by_upstream_name(flat)
                assert restored is not None and restored.tool_name == tool_name


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
    ],
    ids=["content", "envelope", "summary", "foreign-blob"],
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


# ---------------------------------------------------------------- tools


def test_function_tools_keep_their_schema_object() -> None:
    request = parse_request(
        {"model": "m", "input": "hi", "tools": [EXEC_COMMAND, {"type": "function", "name": "bare"}]}
    )
    chat_tools = translate_request(request).chat["tools"]
    assert chat_tools[0] == {
        "type": "function",
        "function": {
            "name": "exec_command",
            "parameters": EXEC_COMMAND["parameters"],
            "description": "Runs a command in a PTY.",
            "strict": False,
        },
    }
    declared = request.tools[0]  # type: ignore[index]
    assert chat_tools[0]["function"]["parameters"] is declared.parameters  # type: ignore[union-attr]
    assert chat_tools[1] == {
        "type": "function",
        "function": {"name": "bare", "parameters": {"type": "object", "properties": {}}},
    }


def test_custom_tool_becomes_a_function_with_one_raw_text_input() -> None:
    translated = translate({"input": "hi", "tools": [APPLY_PATCH]})
    (tool,) = translated.chat["tools"]
    function = tool["function"]
    assert function["name"] == "apply_patch"
    assert function["parameters"] == {
        "type": "object",
        "properties": {
            "input": {
                "type": "string",
                "description": "The raw text input: not JSON, not wrapped in markdown code fences.",
            }
        },
        "required": ["input"],
        "additionalProperties": False,
    }
    description = function["description"]
    assert description.startswith("Use the `apply_patch` tool to edit files.")
    assert "Lark grammar" in description and APPLY_PATCH_GRAMMAR in description
    assert (
        "raw text" in description
        and "NOT JSON" in description
        and "markdown code fences" in description
    )
    assert translated.conversions == ["custom tool apply_patch wrapped as function"]
    assert translated.tools.by_upstream_name("apply_patch").kind is ToolKind.CUSTOM  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("tool_format", "fragment"),
    [
        (None, "`input` is unconstrained text."),
        ({"type": "text"}, "`input` is unconstrained text."),
        (
            {"type": "grammar", "syntax": "regex", "definition": "^[a-z]+$"},
            "`input` must match this regular expression:\n^[a-z]+$",
        ),
    ],
)
def test_custom_tool_format_is_described(tool_format: dict[str, Any] | None, fragment: str) -> None:
    spec: dict[str, Any] = {"type": "custom", "name": "note"}
    if tool_format is not None:
        spec["format"] = tool_format
    (tool,) = translate({"input": "hi", "tools": [spec]}).chat["tools"]
    assert fragment in tool["function"]["description"]


def test_namespaced_tools_are_flattened_with_the_namespace_description() -> None:
    translated = translate({"input": "hi", "tools": [COLLABORATION, FUNCTIONS_NAMESPACE]})
    functions = {tool["function"]["name"]: tool["function"] for tool in translated.chat["tools"]}
    assert list(functions) == [
        "collaboration__list_agents",
        "collaboration__spawn_agent",
        "functions__exec",
    ]
    assert (
        functions["collaboration__list_agents"]["description"]
        == "Tools for working with other agents.\n\nList the agents."
    )
    assert (
        functions["collaboration__spawn_agent"]["description"]
        == "Tools for working with other agents."
    )
    assert functions["functions__exec"]["description"].startswith(
        "Run JavaScript."
    )  # empty namespace description
    restored = translated.tools.by_upstream_name("collaboration__list_agents")
    assert restored is not None and restored.tool_name == ToolName("collaboration", "list_agents")
    assert "namespace tools flattened" in translated.conversions


def test_tools_declared_in_additional_tools_are_sent_without_warning() -> None:
    translated = translate(
        {
            "parallel_tool_calls": False,
            "input": [
                {
                    "type": "additional_tools",
                    "role": "developer",
                    "tools": [FUNCTIONS_NAMESPACE, COLLABORATION],
                },
                user("hi"),
            ],
        }
    )
    assert [t["function"]["name"] for t in translated.chat["tools"]] == [
        "functions__exec",
        "collaboration__list_agents",
        "collaboration__spawn_agent",
    ]
    assert translated.chat["parallel_tool_calls"] is False
    assert translated.chat["messages"] == [{"role": "user", "content": "hi"}]
    assert translated.warnings == []


def test_client_tool_search_is_a_function_and_hosted_tools_are_not_sent() -> None:
    server_search = {"type": "tool_search", "execution": "server"}
    translated = translate(
        {
            "input": "hi",
            "tools": [
                TOOL_SEARCH,
                WEB_SEARCH,
                {"type": "file_search", "vector_store_ids": ["vs_1"]},
            ],
        }
    )
    assert translated.chat["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "tool_search",
                "parameters": TOOL_SEARCH["parameters"],
                "description": "Search deferred tools.",
            },
        }
    ]
    assert translated.warnings == [
        "hosted tools not sent (a Chat Completions backend cannot run them): web_search, file_search"
    ]
    only_hosted = translate(
        {"input": "hi", "tools": [WEB_SEARCH, server_search], "tool_choice": "auto"}
    )
    assert "tools" not in only_hosted.chat
    assert only_hosted.warnings == [
        "hosted tools not sent (a Chat Completions backend cannot run them): web_search, tool_search"
    ]


def test_two_different_tools_with_one_name_are_a_request_error() -> None:
    other = {**EXEC_COMMAND, "description": "something else"}
    with pytest.raises(RequestError) as caught:
        translate({"input": "hi", "tools": [EXEC_COMMAND, other]})
    assert caught.value.param == "tools"


# ---------------------------------------------------------------- tool_choice


@pytest.mark.parametrize(
    ("tool_choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (
            {"type": "function", "name": "exec_command"},
            {"type": "function", "function": {"name": "exec_command"}},
        ),
        (
            {"type": "function", "name": "list_agents", "namespace": "collaboration"},
            {"type": "function", "function": {"name": "collaboration__list_agents"}},
        ),
        (
            {"type": "custom", "name": "apply_patch"},
            {"type": "function", "function": {"name": "apply_patch"}},
        ),
    ],
    ids=["auto", "none", "required", "function", "namespaced-function", "custom"],
)
def test_tool_choice_forms(tool_choice: Any, expected: Any) -> None:
    chat = translate({"input": "hi", "tools": TOOLS, "tool_choice": tool_choice}).chat
    assert chat["tool_choice"] == expected
    assert chat["parallel_tool_calls"] is True
    assert len(chat["tools"]) == 6


def test_allowed_tools_sends_only_the_subset_and_the_mode() -> None:
    tool_choice = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [
            {"type": "function", "name": "exec_command"},
            {"type": "custom", "name": "apply_patch"},
            {"type": "function", "name": "list_agents", "namespace": "collaboration"},
            {"type": "web_search"},
        ],
    }
    translated = translate({"input": "hi", "tools": TOOLS, "tool_choice": tool_choice})
    assert [t["function"]["name"] for t in translated.chat["tools"]] == [
        "exec_command",
        "apply_patch",
        "collaboration__list_agents",
    ]
    assert translated.chat["tool_choice"] == "required"
    assert len(translated.tools) == 6, "the table still maps every declared callable tool"


@pytest.mark.parametrize(
    ("tool_choice", "param"),
    [
        ({"type": "web_search_preview"}, "tool_choice"),
        ({"type": "mcp", "server_label": "x"}, "tool_choice"),
        ({"type": "function", "name": "nope"}, "tool_choice"),
        (
            {"type": "function", "name": "list_agents"},
            "tool_choice",
        ),  # declared only inside a namespace
        ({"type": "function"}, "tool_choice"),
        ("sometimes", "tool_choice"),
        (
            {
                "type": "allowed_tools",
                "mode": "auto",
                "tools": [{"type": "function", "name": "nope"}],
            },
            "tool_choice.tools[0]",
        ),
    ],
    ids=[
        "hosted",
        "mcp",
        "undeclared",
        "missing-namespace",
        "no-name",
        "bad-string",
        "allowed-undeclared",
    ],
)
def test_tool_choice_errors(tool_choice: Any, param: str) -> None:
    with pytest.raises(RequestError) as caught:
        translate({"input": "hi", "tools": TOOLS, "tool_choice": tool_choice})
    assert caught.value.param == param


def test_tool_choice_and_parallel_calls_follow_the_profile() -> None:
    profile = BackendProfile(supports_tool_choice=False, supports_parallel_tool_calls=False)
    chat = translate(
        {"input": "hi", "tools": TOOLS, "tool_choice": "required", "parallel_tool_calls": True},
        profile,
    ).chat
    assert "tool_choice" not in chat and "parallel_tool_calls" not in chat
    assert len(chat["tools"]) == 6


def test_no_tools_means_no_tool_fields() -> None:
    translated = translate({"input": "hi", "tool_choice": "required", "parallel_tool_calls": True})
    assert set(translated.chat) == {"model", "messages"}
    assert translated.warnings == ["tool_choice not sent: no tool can be sent to this backend"]


# ---------------------------------------------------------------- request fields


def test_generation_fields_are_translated() -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
    }
    translated = translate(
        {
            "input": "hi",
            "max_output_tokens": 512,
            "temperature": 0.2,
            "top_p": 0.9,
            "reasoning": {"effort": "high", "context": "all_turns"},
            "text": {
                "format": {
                    "type": "json_schema",
                    "name": "answer",
                    "schema": schema,
                    "strict": True,
                    "description": "An answer.",
                }
            },
            "stream": True,
        },
        model="qwen3:8b",
    )
    assert translated.chat == {
        "model": "qwen3:8b",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 512,
        "temperature": 0.2,
        "top_p": 0.9,
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "answer",
                "schema": schema,
                "strict": True,
                "description": "An answer.",
            },
        },
        "reasoning_effort": "high",
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert translated.warnings == []
    assert "text.format json_schema sent as response_format" in translated.conversions


@pytest.mark.parametrize(
    ("text", "response_format"),
    [
        ({"format": {"type": "json_object"}}, {"type": "json_object"}),
        ({"format": {"type": "text"}}, None),
        (
            {"format": {"type": "json_schema", "name": "x", "schema": {}}},
            {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}},
        ),
    ],
    ids=["json_object", "text", "json_schema-minimal"],
)
def test_text_format(text: dict[str, Any], response_format: dict[str, Any] | None) -> None:
    chat = translate({"input": "hi", "text": text}).chat
    assert chat.get("response_format") == response_format


def test_profile_field_names_and_capabilities() -> None:
    body = {
        "input": "hi",
        "max_output_tokens": 100,
        "reasoning": {"effort": "low"},
        "text": {"format": {"type": "json_object"}},
        "stream": True,
    }
    assert translate(body, VLLM).chat["max_completion_tokens"] == 100
    limited = BackendProfile(
        supports_reasoning_effort=False, supports_response_format=False, stream_usage=False
    )
    translated = translate(body, limited)
    assert set(translated.chat) == {"model", "messages", "max_tokens", "stream"}
    assert translated.warnings == [
        "request fields not forwarded (no Chat Completions equivalent): reasoning.effort, text.format"
    ]


def test_fields_a_backend_cannot_take_are_not_forwarded() -> None:
    translated = translate(
        {
            "input": "hi",
            "store": False,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "k",
            "client_metadata": {"thread_id": "t"},
            "metadata": {"a": "b"},
            "user": "u",
            "service_tier": "auto",
            "truncation": "auto",
            "background": False,
            "text": {"verbosity": "low"},
            "reasoning": {"summary": "auto"},
            "stream": False,
        }
    )
    assert translated.chat == {"model": "gpt-5.5", "messages": [{"role": "user", "content": "hi"}]}
    assert translated.warnings == [
        "request fields not forwarded (no Chat Completions equivalent): reasoning.summary, text.verbosity, truncation"
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


@pytest.mark.parametrize(
    ("description", "line"),
    [
        ("Spawn a sub-agent.\nLong details...", "Spawn a sub-agent."),
        ("\n\n   Starts after blank lines.  \n more", "Starts after blank lines."),
        ("\r\n\t\r\nWindows lines\r\nsecond", "Windows lines"),
        ("\u2028Unicode separator\u2029second\x85third", "Unicode separator"),
        ("form\x0cfeed", "form"),
        ("unit\x1fseparator is no line break\nsecond", "unit\x1fseparator is no line break"),
        ("x" * 300, "x" * 199 + "…"),
        ("x" * 200 + "   \nsecond", "x" * 200),
    ],
)
def test_a_loaded_tool_is_listed_with_the_first_line_of_its_description(description: str, line: str) -> None:
    loaded = {"type": "function", "name": "spawn_agent", "description": description, "parameters": {"type": "object"}}
    translated = translate(
        {
            "tools": TOOLS,
            "input": [
                user("spawn"),
                tool_search_call("call_s", "spawn"),
                {"type": "tool_search_output", "call_id": "call_s", "execution": "client", "tools": [loaded]},
            ],
        }
    )
    content = translated.chat["messages"][-1]["content"]
    assert isinstance(content, str)
    listing = orjson.loads(content)
    assert listing == {"loaded_tools": [{"name": "spawn_agent", "description": line}]}


def test_a_description_of_blank_lines_lists_no_description() -> None:
    loaded = {"type": "function", "name": "spawn_agent", "description": " \n\t\n", "parameters": {"type": "object"}}
    translated = translate(
        {
            "tools": TOOLS,
            "input": [
                tool_search_call("call_s", "spawn"),
                {"type": "tool_search_output", "call_id": "call_s", "execution": "client", "tools": [loaded]},
            ],
        }
    )
    content = translated.chat["messages"][-1]["content"]
    assert isinstance(content, str)
    listing = orjson.loads(content)
    assert listing == {"loaded_tools": [{"name": "spawn_agent", "description": ""}]}
