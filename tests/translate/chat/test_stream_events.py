"""``ChatStreamTranslator``, event by event: a Chat stream with every kind of delta written
out, and every Responses event a client reads from it (``tests.translate.streams``), in
order; ``<think>`` tags split out of the content wherever the chunks cut them; a whole
completion read as the chunk that would have carried it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.translate.streams import (
    BEGUN,
    custom_call,
    custom_call_events,
    function_call,
    function_call_events,
    item_added,
    item_done,
    lifecycle,
    output_text,
    part_event,
    readable,
    reasoning_events,
    reasoning_text,
)
from toolwire.translate import completion_chunks

from .test_stream import chunk, finish, run, summarize, usage_chunk

JSON = dict[str, Any]
PATCH = "*** Begin Patch\n*** End Patch\n"
EVERY_DELTA = [
    chunk(role="assistant", content=""),
    chunk(reasoning_content="Think"),
    chunk(reasoning=" more."),
    chunk(content="Hi "),
    chunk(content="there."),
    chunk(refusal="I won't."),
    chunk(refusal=""),
    chunk(content="Back."),
    chunk(tool_calls=[{"index": 0, "id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]),
    chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"city":'}}]),
    chunk(tool_calls=[{"index": 0, "function": {"arguments": '"Oslo"}'}}]),
    chunk(tool_calls=[{"index": 1, "id": "call_b", "type": "function", "function": {"name": "apply_patch", "arguments": '{"input":"*** Begin Patch\\n*** End Patch\\n"}'}}]),
    chunk(tool_calls=[{"index": 2, "id": "call_c", "type": "function", "function": {"name": "tool_search", "arguments": {"query": "q"}}}]),
    chunk(tool_calls=[{"index": 3, "id": "call_d", "type": "custom", "custom": {"name": "apply_patch", "input": PATCH}}]),
    chunk(function_call={"name": "exec_command", "arguments": '{"cmd":"ls"}'}),
    finish("tool_calls"),
    usage_chunk(10, 20, prompt_tokens_details={"cached_tokens": 4}, completion_tokens_details={"reasoning_tokens": 3}),
]
THOUGHT = {
    "id": "rs#1",
    "type": "reasoning",
    "status": "completed",
    "summary": [],
    "content": [reasoning_text("Think more.")],
    "encrypted_content": {"sealed": "Think more."},
}
REFUSAL = {"type": "refusal", "refusal": "I won't."}
MESSAGE = {
    "id": "msg#1",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [output_text("Hi there."), REFUSAL, output_text("Back.")],
}
WEATHER = function_call("fc#1", "call_a", "get_weather", '{"city":"Oslo"}')
PATCHED = custom_call("ctc#1", "call_b", "apply_patch", PATCH)
SEARCHED = {"id": "tsc#1", "type": "tool_search_call", "status": "completed", "call_id": "call_c", "execution": "client", "arguments": {"query": "q"}}
NATIVE = custom_call("ctc#2", "call_d", "apply_patch", PATCH)
LEGACY = function_call("fc#2", "call#1", "exec_command", '{"cmd":"ls"}')
USAGE = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0},
    "output_tokens": 20,
    "output_tokens_details": {"reasoning_tokens": 3},
    "total_tokens": 30,
}


def text_events(index: int, content_index: int, deltas: list[str]) -> list[JSON]:
    where = {"item_id": "msg#1", "output_index": index, "content_index": content_index}
    text = "".join(deltas)
    return [
        part_event("added", "msg#1", index, output_text(""), content_index),
        *({"type": "response.output_text.delta", **where, "delta": delta, "logprobs": []} for delta in deltas),
        {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
        part_event("done", "msg#1", index, output_text(text), content_index),
    ]


def test_every_kind_of_delta_in_one_stream() -> None:
    result = run(EVERY_DELTA)
    where = {"item_id": "msg#1", "output_index": 1, "content_index": 1}
    assert readable(result.events) == [
        *BEGUN,
        *reasoning_events(THOUGHT, 0, ["Think", " more."]),
        item_added(1, {"id": "msg#1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}),
        *text_events(1, 0, ["Hi ", "there."]),
        part_event("added", "msg#1", 1, {"type": "refusal", "refusal": ""}, 1),
        {"type": "response.refusal.delta", **where, "delta": "I won't."},
        {"type": "response.refusal.done", **where, "refusal": "I won't."},
        part_event("done", "msg#1", 1, REFUSAL, 1),
        *text_events(1, 2, ["Back."]),
        item_done(1, MESSAGE),
        *function_call_events(WEATHER, 2, ['{"city":', '"Oslo"}']),
        *custom_call_events(PATCHED, 3, [PATCH]),
        item_added(4, {**SEARCHED, "status": "in_progress", "arguments": {}}),
        item_done(4, SEARCHED),
        *custom_call_events(NATIVE, 5, [PATCH]),
        *function_call_events(LEGACY, 6, ['{"cmd":"ls"}']),
        lifecycle("completed", "completed", [THOUGHT, MESSAGE, WEATHER, PATCHED, SEARCHED, NATIVE, LEGACY], usage=USAGE),
    ]
    assert result.translator.conversions == ["custom apply_patch restored", "custom apply_patch restored"]


@pytest.mark.parametrize(
    ("contents", "output", "split"),
    [
        (["<think>a</think>\n\nanswer"], [("reasoning", "a"), ("message", "answer")], True),
        (["<thi", "nk>a</th", "ink>\n\nans", "wer"], [("reasoning", "a"), ("message", "answer")], True),
        (["<think>ab<", "/think>c"], [("reasoning", "ab"), ("message", "c")], True),
        (["\n<think>a</think>b"], [("reasoning", "a"), ("message", "b")], True),
        (["<think>a</think>", "\n\n", "b"], [("reasoning", "a"), ("message", "b")], True),
        (["<think>a</think>"], [("reasoning", "a")], True),
        (["<think>unclosed"], [("reasoning", "unclosed")], True),
        (["<think>ab</thi"], [("reasoning", "ab</thi")], True),
        (["<think>a</think><think>b</think>c"], [("reasoning", "a"), ("message", "<think>b</think>c")], True),
        (["\n\n  ", "Hello"], [("message", "  Hello")], False),
        (["Hi <think>x</think>"], [("message", "Hi <think>x</think>")], False),
        (["<th"], [("message", "<th")], False),
        (["   "], [], False),
    ],
)
def test_think_tags_are_split_out_wherever_the_chunks_cut_them(contents: list[str], output: list[tuple[str, str]], split: bool) -> None:
    result = run([chunk(role="assistant", content=""), *(chunk(content=part) for part in contents), finish("stop")])
    assert [summarize(item) for item in result.translator.response["output"]] == output
    assert result.translator.conversions == (["think tags split into reasoning"] if split else [])


def test_a_whole_completion_is_the_chunk_that_would_have_carried_it() -> None:
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {"index": 1, "message": {"role": "assistant", "content": "other"}, "finish_reason": "stop"},
            {"index": 0, "message": {"role": "assistant", "content": "x", "tool_calls": [{"id": "c", "function": {}}, "junk"]}, "finish_reason": "stop"},
        ],
        "usage": {"prompt_tokens": 1},
    }
    assert completion_chunks(completion) == [
        {
            "object": "chat.completion.chunk",
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": "x", "tool_calls": [{"index": 0, "id": "c", "function": {}}, "junk"]}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 1},
        }
    ]
    assert completion_chunks({"usage": {"prompt_tokens": 1}, "choices": "none"}) == [{"object": "chat.completion.chunk", "usage": {"prompt_tokens": 1}}]
    assert completion_chunks({"choices": [{"index": 0, "message": "junk"}]}) == [
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": None}]}
    ]
    assert completion_chunks({"choices": [{"message": {}}], "usage": "junk"}) == [
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": None}]}
    ]
    assert completion_chunks({"choices": []}) == []
    assert completion_chunks({"error": {"message": "boom"}}) == [{"error": {"message": "boom"}}]
    assert completion_chunks({"object": "error", "message": "boom"}) == [{"error": {"object": "error", "message": "boom"}}]


def tool_call(**fields: Any) -> JSON:
    return chunk(tool_calls=[fields])


@pytest.mark.parametrize(
    ("chunks", "output"),
    [
        (
            # Keyed by id only: a later fragment of the first call goes back to it.
            [
                tool_call(id="A", function={"name": "exec_command", "arguments": '{"cmd":'}),
                tool_call(id="B", function={"name": "get_weather", "arguments": '{"city":"Oslo"}'}),
                tool_call(id="A", function={"arguments": '"ls"}'}),
            ],
            [("function_call", None, "exec_command", '{"cmd":"ls"}'), ("function_call", None, "get_weather", '{"city":"Oslo"}')],
        ),
        (
            # Neither index nor id: a name starts a call, a nameless fragment continues the last.
            [
                tool_call(function={"name": "exec_command", "arguments": '{"cmd":'}),
                tool_call(function={"arguments": '"ls"}'}),
                tool_call(function={"name": "get_weather", "arguments": '{"city":'}),
                tool_call(function={"arguments": '"Oslo"}'}),
            ],
            [("function_call", None, "exec_command", '{"cmd":"ls"}'), ("function_call", None, "get_weather", '{"city":"Oslo"}')],
        ),
        (
            # ... even when the call before it never finished its arguments.
            [
                tool_call(function={"name": "exec_command", "arguments": '{"cmd":'}),
                tool_call(function={"name": "get_weather", "arguments": '{"city":"Oslo"}'}),
            ],
            [("function_call", None, "exec_command", '{"cmd":'), ("function_call", None, "get_weather", '{"city":"Oslo"}')],
        ),
    ],
    ids=["by-id-only", "by-order-only", "a-name-after-an-unfinished-call"],
)
def test_calls_without_an_index(chunks: list[JSON], output: list[tuple[Any, ...]]) -> None:
    response = run([*chunks, finish("tool_calls")]).translator.response
    assert [summarize(item) for item in response["output"]] == output


@pytest.mark.parametrize(
    ("chunks", "output", "call_ids"),
    [
        (
            # No ids, one index: a name after whole JSON arguments starts the next call.
            [
                tool_call(index=0, function={"name": "exec_command", "arguments": '{"cmd":"ls"} '}),
                tool_call(index=0, function={"name": "get_weather", "arguments": '{"city":"Oslo"}'}),
            ],
            [("function_call", None, "exec_command", '{"cmd":"ls"} '), ("function_call", None, "get_weather", '{"city":"Oslo"}')],
            None,
        ),
        (
            # Ids that differ at one index are two calls, however the first one's arguments end.
            [
                tool_call(index=0, id="A", function={"name": "exec_command", "arguments": '{"cmd":'}),
                tool_call(index=0, id="B", function={"name": "get_weather", "arguments": '{"city":"Oslo"}'}),
            ],
            [("function_call", None, "exec_command", '{"cmd":'), ("function_call", None, "get_weather", '{"city":"Oslo"}')],
            ["A", "B"],
        ),
        (
            # A native custom call in pieces, then a function call at the same index.
            [
                tool_call(index=0, id="n1", type="custom", custom={"name": "apply_patch", "input": "*** Begin"}),
                tool_call(index=0, custom={"input": " Patch\n*** End Patch\n"}),
                tool_call(index=0, id="n2", type="function", function={"name": "get_weather", "arguments": '{"city":"Oslo"}'}),
            ],
            [("custom_tool_call", None, "apply_patch", "*** Begin Patch\n*** End Patch\n"), ("function_call", None, "get_weather", '{"city":"Oslo"}')],
            ["n1", "n2"],
        ),
        (
            # A native custom call naming a function tool: its input wrapped as the arguments.
            [
                tool_call(index=0, id="n3", type="custom", custom={"name": "exec_command", "input": "ls"}),
                tool_call(index=0, custom={"input": " -la"}),
            ],
            [("function_call", None, "exec_command", '{"input":"ls -la"}')],
            ["n3"],
        ),
        (
            # A native custom call, then a function call at the same index, no ids at all: a
            # native call's input is whole at every point, so the name starts another call.
            [
                tool_call(index=0, type="custom", custom={"name": "apply_patch", "input": "*** Begin Patch\n"}),
                tool_call(index=0, type="function", function={"name": "get_weather", "arguments": '{"city":"Oslo"}'}),
            ],
            [("custom_tool_call", None, "apply_patch", "*** Begin Patch\n"), ("function_call", None, "get_weather", '{"city":"Oslo"}')],
            None,
        ),
        (
            # Arguments that are a whole JSON array, then a name at the same index: another call.
            [
                tool_call(index=0, function={"name": "exec_command", "arguments": "[1, 2]"}),
                tool_call(index=0, function={"name": "get_weather", "arguments": '{"city":"Oslo"}'}),
            ],
            [("function_call", None, "exec_command", "[1, 2]"), ("function_call", None, "get_weather", '{"city":"Oslo"}')],
            None,
        ),
        (
            # The name repeated on every delta, the arguments so far ending in "}" inside a
            # string: not whole JSON yet, so the same call goes on.
            [
                tool_call(index=0, function={"name": "exec_command", "arguments": '{"cmd": "echo }'}),
                tool_call(index=0, function={"name": "exec_command", "arguments": ' done"}'}),
            ],
            [("function_call", None, "exec_command", '{"cmd": "echo } done"}')],
            None,
        ),
    ],
    ids=[
        "same-index-no-ids", "same-index-new-id", "native-custom-in-pieces", "native-custom-naming-a-function",
        "native-custom-then-a-name-no-ids", "a-whole-array-then-a-name", "a-brace-inside-a-string",
    ],
)
def test_calls_sharing_an_index(chunks: list[JSON], output: list[tuple[Any, ...]], call_ids: list[str] | None) -> None:
    result = run([*chunks, finish("tool_calls")])
    response = result.translator.response
    assert [summarize(item) for item in response["output"]] == output
    if call_ids is not None:
        assert [item["call_id"] for item in response["output"]] == call_ids


def test_a_stream_cut_before_its_finish_reason_fails_with_the_usage_so_far() -> None:
    result = run([chunk(content="partial"), usage_chunk(3, 4)], end=None)
    result.translator.finish(ended_cleanly=False)
    response = result.translator.response
    assert (response["status"], response["output"]) == ("failed", [])
    assert response["usage"] == {
        "input_tokens": 3,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 4,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 7,
    }


@pytest.mark.parametrize("then", [chunk(content="Done."), chunk(reasoning_content="Thinking again.")])
def test_calls_waiting_when_text_or_reasoning_comes_are_sent_completed(then: JSON) -> None:
    chunks = [
        tool_call(index=0, function={"name": "exec_command", "arguments": '{"cmd":'}),
        tool_call(index=1, function={"name": "get_weather", "arguments": '{"city":"Oslo"}'}),  # waits behind index 0
        then,
        finish("stop"),
    ]
    output = run(chunks).translator.response["output"]
    calls = [item for item in output if item["type"] == "function_call"]
    assert [(c["name"], c["status"]) for c in calls] == [("exec_command", "completed"), ("get_weather", "completed")]


def test_a_call_keeps_the_first_name_it_was_given() -> None:
    chunks = [
        tool_call(index=0, function={"name": "exec_command", "arguments": '{"cmd":'}),
        tool_call(index=1, function={"name": "get_weather", "arguments": '{"city":'}),  # waits behind index 0
        tool_call(index=1, function={"name": "exec_command", "arguments": '"Oslo"}'}),  # mid-call: not another call
        tool_call(index=0, function={"arguments": '"ls"}'}),
        finish("tool_calls"),
    ]
    output = run(chunks).translator.response["output"]
    assert [summarize(item) for item in output] == [
        ("function_call", None, "exec_command", '{"cmd":"ls"}'),
        ("function_call", None, "get_weather", '{"city":"Oslo"}'),
    ]
