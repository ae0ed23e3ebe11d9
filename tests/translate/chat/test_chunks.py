"""What a Chat stream's pieces are read as, whatever a server writes into them: a tool-call
delta entry (``call_fragment``) and the usage (``map_usage``)."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.translate._calls import CallFragment
from toolwire.translate.chat._chunks import call_fragment, map_usage


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ({"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}, CallFragment(0, "c1", "f", "{}")),
        # Ollama sends the arguments object itself
        ({"index": 1, "function": {"name": "f", "arguments": {"a": [1]}}}, CallFragment(1, None, "f", '{"a":[1]}')),
        # a later delta: no name, no id
        ({"index": 0, "function": {"arguments": '"x"}'}}, CallFragment(0, None, None, '"x"}')),
        # what is not of its type is no value at all
        ({"index": True, "id": "", "function": {"name": "", "arguments": 5}}, CallFragment(None, None, None, "")),
        ({"index": "0", "id": 7, "function": {"name": 3}}, CallFragment(None, None, None, "")),
        ({"index": 0}, CallFragment(0, None, None, "")),
        # a native custom call: its input raw
        ({"index": 0, "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin"}},
         CallFragment(0, None, "apply_patch", "", "*** Begin")),
        ({"index": 0, "custom": {"input": 5}}, CallFragment(0, None, None, "", "")),
    ],
)
def test_call_fragments(entry: dict[str, Any], fragment: CallFragment) -> None:
    assert call_fragment(entry) == fragment


def test_usage_counts_that_are_not_counts_are_zero() -> None:
    usage = {"prompt_tokens": -3, "completion_tokens": 2.9, "total_tokens": True,
             "prompt_tokens_details": {"cached_tokens": "5"}, "completion_tokens_details": {"reasoning_tokens": -1}}  # fmt: skip
    assert map_usage(usage) == {
        "input_tokens": 0,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 2,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 0,
    }


def test_message_content_as_parts_keeps_the_text_of_text_parts_only() -> None:
    from toolwire.translate.chat._chunks import content_text

    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "text": "not this"}, "raw", {"type": "output_text", "text": "b"},
             {"type": "text", "text": 5}]  # fmt: skip
    assert content_text(parts) == "ab"
    assert (content_text("plain"), content_text(None)) == ("plain", "")


def test_think_tags_split_reasoning_from_the_answer() -> None:
    from toolwire.translate.chat._chunks import Reasoning, Text, ThinkTagSplitter

    no_tags = ThinkTagSplitter()
    assert no_tags.decode("\nXenon is a gas") == [Text("Xenon is a gas")]  # only line breaks are dropped
    tagged = ThinkTagSplitter()
    assert tagged.decode("<think>") == []  # no reasoning yet: nothing, not an empty piece
    assert tagged.decode("plan") == [Reasoning("plan")]
    assert tagged.decode("</think>\n\nanswer") == [Text("answer")]


def test_think_tags_when_something_other_than_content_comes() -> None:
    from toolwire.translate.chat._chunks import Reasoning, Text, ThinkTagSplitter

    cut = ThinkTagSplitter()
    assert cut.decode("<think>plan") == [Reasoning("plan")] and cut.flush() == []
    assert cut.decode("<think>again") == [Text("<think>again")]  # one think block, at the start only
    empty = ThinkTagSplitter()
    assert empty.decode("<think>") == [] and empty.flush() == []  # no empty reasoning piece
    begun = ThinkTagSplitter()
    assert begun.decode(" \n<thi") == []  # it may still be <think>
    assert begun.flush() == [Text(" \n<thi")]  # it was not: only leading line breaks would go
    assert begun.decode("more") == [Text("more")]
    line = ThinkTagSplitter()
    assert line.decode("\n<thi") == [] and line.flush() == [Text("<thi")]


@pytest.mark.parametrize(
    ("delta", "reasoning"),
    [
        ({"reasoning_content": "a"}, "a"),
        ({"reasoning": "b"}, "b"),  # vLLM, Ollama
        ({"reasoning_content": "", "reasoning": "b"}, "b"),
        ({"reasoning_content": 5, "reasoning": "b"}, "b"),
        ({"reasoning_content": 5, "reasoning": 6}, ""),
        ({}, ""),
    ],
)
def test_reasoning_from_either_field(delta: dict[str, Any], reasoning: str) -> None:
    from toolwire.translate.chat._chunks import reasoning_text

    assert reasoning_text(delta) == reasoning


def responses_usage(input_tokens: int, cached: int, written: int, output: int, reasoning: int, total: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": total,
    }


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        pytest.param(
            {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
             "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 30},
             "completion_tokens_details": {"reasoning_tokens": 12}},
            responses_usage(100, 60, 30, 20, 12, 120), id="every-detail",
        ),
        pytest.param(
            {"prompt_tokens": 100, "completion_tokens": 20, "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36},
            responses_usage(100, 64, 0, 20, 0, 120), id="deepseek-cache-hits-and-no-total",
        ),
        pytest.param(
            {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120, "prompt_cache_hit_tokens": 64,
             "prompt_tokens_details": {"cached_tokens": 50}},
            responses_usage(100, 50, 0, 20, 0, 120), id="the-openai-detail-first",
        ),
        pytest.param(
            {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
             "prompt_tokens_details": ["cached_tokens", 60], "completion_tokens_details": "12 reasoning"},
            responses_usage(100, 0, 0, 20, 0, 120), id="details-that-are-not-objects",
        ),
        pytest.param(
            {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
             "prompt_tokens_details": None, "completion_tokens_details": None},
            responses_usage(100, 0, 0, 20, 0, 120), id="null-details",
        ),
        pytest.param(  # orjson reads 2**64 as a float, 2**64 - 1 as an integer: neither can be written back
            {"prompt_tokens": 1.8446744073709552e19, "completion_tokens": 2**64 - 1,
             "prompt_tokens_details": {"cached_tokens": 2**64 - 1}},
            responses_usage(10**12, 10**12, 0, 10**12, 0, 2 * 10**12), id="hostile-counts-are-clamped",
        ),
    ],
)  # fmt: skip
def test_usage_details_as_each_server_sends_them(usage: dict[str, Any], expected: dict[str, Any]) -> None:
    assert map_usage(usage) == expected
