"""Calls written into the content, through ChatStreamTranslator and translate_completion.

The recogniser's signals go the way of every other call: restored to the declared type
(function, custom, namespaced, tool_search, code-mode ``exec`` with its input repaired),
in order with the reasoning and the text around them, under ``finish_reason: "stop"``.
Every stream is checked by ``verify`` (strict SDK validation, the SDK's accumulator, the
stream invariants). The next turn sends the calls back as ordinary ``tool_calls``.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.text_calls import written
from toolwire.protocol import SSEDecoder, parse_request
from toolwire.tools import ToolCatalog
from toolwire.translate import (
    ChatStreamTranslator,
    UpstreamToolTable,
    translate_completion,
    translate_request,
)

from .test_stream import (
    BODY,
    CREATED_AT,
    EXEC_COMMAND,
    RESPONSE_ID,
    chunk,
    finish,
    summarize,
    usage_chunk,
    verify,
)

JSON = dict[str, Any]
PATCH = "*** Begin Patch\n*** Add File: a.txt\n+héllo 世界 😀\n*** End Patch\n"
JS = "const r = await tools.exec_command({cmd: 'ls'});\ntext(JSON.stringify(r));"


def translator(body: JSON = BODY, tool_call_text: str = "auto") -> ChatStreamTranslator:
    request = parse_request(body)
    return ChatStreamTranslator(
        request,
        UpstreamToolTable(ToolCatalog.from_request(request)),
        response_id=RESPONSE_ID,
        created_at=CREATED_AT,
        model=body["model"],
        tool_call_text=tool_call_text,
    )


def content_chunks(content: str, size: int = 3) -> list[JSON]:
    return [chunk(content=content[i : i + size]) for i in range(0, len(content), size)]


def stream(
    chunks: list[JSON], body: JSON = BODY, tool_call_text: str = "auto"
) -> tuple[JSON, ChatStreamTranslator]:
    """Feed the chunks, finish, verify the stream; the terminal Response and the translator."""
    machine = translator(body, tool_call_text)
    events = [dict(e) for e in machine.start()]
    for each in chunks:
        events += [dict(e) for e in machine.feed(each)]
    events += [dict(e) for e in machine.finish()]
    return verify(events, body), machine


def answer(content: str, *, reasoning: str | None = None, size: int = 3) -> list[JSON]:
    """A server without a tool parser: the calls in ``content``, then ``stop`` and usage."""
    chunks = [chunk(role="assistant", content="")]
    if reasoning:
        chunks.append(chunk(reasoning_content=reasoning))
    return [*chunks, *content_chunks(content, size), finish("stop"), usage_chunk()]


# ---------------------------------------------------------------- restored like any call

RESTORED: list[tuple[str, str, list[tuple[Any, ...]]]] = [
    (
        "hermes-function",
        written("hermes", [("exec_command", {"cmd": "ls"})]),
        [("function_call", None, "exec_command", '{"cmd":"ls"}')],
    ),
    (
        "qwen3-coder-custom-apply-patch",
        written("qwen3_coder", [("apply_patch", {"input": PATCH})]),
        [("custom_tool_call", None, "apply_patch", PATCH)],
    ),
    (
        "kimi-namespaced",
        written("kimi_k2", [("collaboration__list_agents", {})]),
        [("function_call", "collaboration", "list_agents", "{}")],
    ),
    (
        "mistral-bare-name-of-a-namespaced-tool",
        written("mistral", [("list_agents", {})]),
        [("function_call", "collaboration", "list_agents", "{}")],
    ),
    (
        "deepseek-code-mode-exec-fenced-input-repaired",
        written("deepseek", [("functions__exec", {"input": f"```javascript\n{JS}\n```"})]),
        [("custom_tool_call", "functions", "exec", JS + "\n")],  # the fence's own line break kept
    ),
    (
        "glm-tool-search",
        written("glm45", [("tool_search", {"query": "agents", "limit": 2})]),
        [("tool_search_call", {"query": "agents", "limit": 2})],
    ),
    (
        "deepseek-v3-parallel",
        written("deepseek_v3", [("get_weather", {"city": "Paris"}), ("apply_patch", {"input": PATCH})]),
        [
            ("function_call", None, "get_weather", '{"city":"Paris"}'),
            ("custom_tool_call", None, "apply_patch", PATCH),
        ],
    ),
]


@pytest.mark.parametrize(("content", "expected"), [pytest.param(c, e, id=i) for i, c, e in RESTORED])
def test_calls_in_the_text_are_restored_to_their_declared_type(
    content: str, expected: list[tuple[Any, ...]]
) -> None:
    response, machine = stream(answer(content))
    assert response["status"] == "completed"
    assert [summarize(item) for item in response["output"]] == expected
    assert response["usage"]["total_tokens"] == 30
    assert any(c.startswith("tool call recovered from ") for c in machine.conversions)


def test_a_call_to_the_only_tool_offered_is_restored() -> None:
    response, _ = stream(answer(written("hermes", [("exec_command", {"cmd": "ls"})])), {**BODY, "tools": [EXEC_COMMAND]})
    assert [summarize(item)[:3] for item in response["output"]] == [("function_call", None, "exec_command")]
    assert json.loads(response["output"][0]["arguments"]) == {"cmd": "ls"}


def test_reasoning_text_and_calls_stay_in_order() -> None:
    content = "<think>Two steps.</think>\nFirst the files.\n" + written(
        "hermes", [("exec_command", {"cmd": "ls"}), ("get_weather", {"city": "Oslo"})]
    ) + "\nThen I wait."
    response, machine = stream(answer(content, reasoning=None))
    assert [summarize(item) for item in response["output"]] == [
        ("reasoning", "Two steps."),
        ("message", "First the files.\n"),
        ("function_call", None, "exec_command", '{"cmd":"ls"}'),
        ("function_call", None, "get_weather", '{"city":"Oslo"}'),
        ("message", "Then I wait."),
    ]
    assert machine.conversions.count("tool call recovered from hermes text") == 2
    assert "think tags split into reasoning" in machine.conversions


def test_reasoning_field_before_the_text_and_the_call() -> None:
    content = "Looking.\n" + written("glm45", [("exec_command", {"cmd": "pwd"})])
    response, _ = stream(answer(content, reasoning="I should look."))
    assert [summarize(item) for item in response["output"]] == [
        ("reasoning", "I should look."),
        ("message", "Looking.\n"),
        ("function_call", None, "exec_command", '{"cmd":"pwd"}'),
    ]


def test_a_call_cut_off_by_length_is_not_a_call() -> None:
    content = written("hermes", [("exec_command", {"cmd": "rm -rf build"})])[:-20]
    chunks = [*content_chunks(content), finish("length")]
    response, _ = stream(chunks)
    assert response["status"] == "incomplete"
    assert [summarize(item) for item in response["output"]] == [("message", content)]


def test_a_native_call_and_a_written_one_in_one_answer() -> None:
    native = chunk(
        tool_calls=[
            {"index": 0, "id": "call_native", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}
        ]
    )
    chunks = [*content_chunks(written("mistral", [("exec_command", {"cmd": "ls"})])), native, finish("tool_calls")]
    response, _ = stream(chunks)
    assert [summarize(item) for item in response["output"]] == [
        ("function_call", None, "exec_command", '{"cmd":"ls"}'),
        ("function_call", None, "get_weather", '{"city": "Rome"}'),
    ]


# ---------------------------------------------------------------- what stays text


@pytest.mark.parametrize(
    ("content", "body", "tool_call_text"),
    [
        pytest.param(written("hermes", [("exec_command", {"cmd": "ls"})]), BODY, "off", id="setting-off"),
        pytest.param(written("hermes", [("exec_command", {"cmd": "ls"})]), BODY, "mistral", id="another-family"),
        pytest.param(
            written("hermes", [("exec_command", {"cmd": "ls"})]),
            {**BODY, "tools": []},
            "auto",
            id="no-tools-offered",
        ),
        pytest.param(
            written("glm45", [("exec_command", {"cmd": "ls"})]),
            {**BODY, "tool_choice": "none"},
            "auto",
            id="tool-choice-none",
        ),
        pytest.param(written("kimi_k2", [("drop_database", {})]), BODY, "auto", id="tool-not-offered"),
        pytest.param(
            'Reply with <tool_call>{"name": <function-name>, "arguments": <args>}</tool_call>.',
            BODY,
            "auto",
            id="prose-explaining-the-syntax",
        ),
    ],
)
def test_stays_text(content: str, body: JSON, tool_call_text: str) -> None:
    response, machine = stream(answer(content), body, tool_call_text)
    assert [summarize(item) for item in response["output"]] == [("message", content)]
    assert not any(c.startswith("tool call recovered") for c in machine.conversions)


# ---------------------------------------------------------------- non-streamed answers


def test_a_completion_with_calls_in_its_content_gives_the_streamed_response() -> None:
    content = "Checking.\n" + written("qwen3_coder", [("exec_command", {"cmd": "ls"}), ("apply_patch", {"input": PATCH})])
    completion: JSON = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30},
    }
    request = parse_request(BODY)
    whole = ChatStreamTranslator(
        request,
        UpstreamToolTable(ToolCatalog.from_request(request)),
        response_id=RESPONSE_ID,
        created_at=CREATED_AT,
        model=BODY["model"],
    )
    translated = whole.translate_whole(completion)
    repairs = whole.conversions
    streamed, machine = stream(answer(content))
    assert translated["output"] == streamed["output"]
    assert repairs == machine.conversions
    assert repairs.count("tool call recovered from qwen3_coder text") == 2
    assert [item["type"] for item in translated["output"]] == ["message", "function_call", "custom_tool_call"]
    off = translate_completion(
        completion,
        request,
        UpstreamToolTable(ToolCatalog.from_request(request)),
        response_id=RESPONSE_ID,
        created_at=CREATED_AT,
        model=BODY["model"],
        tool_call_text="off",
    )
    assert [summarize(item) for item in off["output"]] == [("message", content)]


# ---------------------------------------------------------------- the next turn


def test_the_next_turn_sends_the_calls_back_as_tool_calls() -> None:
    content = "Let me check.\n" + written(
        "deepseek", [("exec_command", {"cmd": "ls"}), ("apply_patch", {"input": PATCH})]
    )
    response, _ = stream(answer(content))
    _, function_call, custom_call = response["output"]
    history = [
        {"role": "user", "content": "hi"},
        *response["output"],
        {"type": "function_call_output", "call_id": function_call["call_id"], "output": "a.txt"},
        {"type": "custom_tool_call_output", "call_id": custom_call["call_id"], "output": "Done!"},
    ]
    chat = translate_request(parse_request({**BODY, "input": history})).chat
    assistant, *tools = [m for m in chat["messages"] if m["role"] in ("assistant", "tool")]
    assert assistant["content"] == "Let me check.\n"
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in assistant["tool_calls"]] == [
        ("exec_command", {"cmd": "ls"}),
        ("apply_patch", {"input": PATCH}),
    ]
    assert [(m["tool_call_id"], m["content"]) for m in tools] == [
        (assistant["tool_calls"][0]["id"], "a.txt"),
        (assistant["tool_calls"][1]["id"], "Done!"),
    ]
    assert "tool\u2581calls" not in json.dumps(chat, ensure_ascii=False)


# ---------------------------------------------------------------- bytes split anywhere


def sse_body(chunks: list[JSON]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def through_sse(pieces: list[bytes]) -> tuple[JSON, list[str]]:
    """The upstream body read as the gateway reads it: SSE decoder, JSON, translator."""
    decoder = SSEDecoder()
    payloads = [data for piece in pieces for data in decoder.feed_data(piece)]
    payloads += decoder.flush_data()
    assert payloads[-1] == "[DONE]"
    response, machine = stream([orjson.loads(data) for data in payloads[:-1]])
    return response, machine.conversions


LEAD = "先看看 😀 \uff5c\u2581 "  # a fullwidth bar and a ▁ outside any marker
MULTI_BYTE = LEAD + written("deepseek", [("apply_patch", {"input": PATCH})]) + " 好了 ✓"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(1, 7), data=st.data())
def test_bytes_split_anywhere_give_the_same_response(size: int, data: st.DataObject) -> None:
    """Markers with fullwidth characters, CJK and emoji, the body's bytes cut anywhere
    (inside a marker, inside a multi-byte character), and content in chunks of ``size``."""
    body = sse_body(answer(MULTI_BYTE, size=size))
    whole, conversions = through_sse([body])
    cuts = sorted(data.draw(st.sets(st.integers(1, len(body) - 1), max_size=40)))
    bounds = [0, *cuts, len(body)]
    split, split_conversions = through_sse([body[a:b] for a, b in itertools.pairwise(bounds)])
    assert split["output"] == whole["output"]
    assert split_conversions == conversions
    assert [summarize(item) for item in whole["output"]] == [
        ("message", LEAD),
        ("custom_tool_call", None, "apply_patch", PATCH),
        ("message", "好了 ✓"),
    ]


def test_bytes_one_at_a_time() -> None:
    body = sse_body(answer(MULTI_BYTE, size=2))
    whole, _ = through_sse([body])
    split, _ = through_sse([body[i : i + 1] for i in range(len(body))])
    assert split["output"] == whole["output"]
    assert [item["type"] for item in split["output"]] == ["message", "custom_tool_call", "message"]
