"""The generation fields of a Messages request (``anthropic/_fields``): what is sent, and
what the operator is told was lost or reshaped (the warnings and conversions a log shows).
"""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.errors import RequestError

from .test_request import translate

JSON = dict[str, Any]
CACHED = "cache_control breakpoints on tools, system and the latest turn"
THOUGHT = "reasoning.effort sent as a thinking budget"
NOT_FORWARDED = "request fields not forwarded (no Messages API equivalent): "


def generation_fields(body: JSON) -> JSON:
    return {key: value for key, value in body.items() if key not in ("model", "messages", "system", "tools")}


@pytest.mark.parametrize(
    ("request_fields", "sent", "warnings", "conversions"),
    [
        ({}, {"max_tokens": 64000}, [], [CACHED]),
        ({"temperature": 1.0, "stream": True}, {"max_tokens": 64000, "temperature": 1.0, "stream": True}, [], [CACHED]),
        ({"temperature": 1.5}, {"max_tokens": 64000, "temperature": 1.0}, [], ["temperature lowered to 1", CACHED]),
        ({"top_p": 0.5}, {"max_tokens": 64000, "top_p": 0.5}, [], [CACHED]),
        (
            {"temperature": 0.5, "top_p": 0.9, "reasoning": {"effort": "low"}},
            {"max_tokens": 64000, "thinking": {"type": "enabled", "budget_tokens": 2048}},
            [NOT_FORWARDED + "temperature (not allowed with thinking), top_p (below 0.95 is not allowed with thinking)"],
            [THOUGHT, CACHED],
        ),
        (
            {"top_p": 0.95, "reasoning": {"effort": "low"}},
            {"max_tokens": 64000, "thinking": {"type": "enabled", "budget_tokens": 2048}, "top_p": 0.95},
            [],
            [THOUGHT, CACHED],
        ),
        (
            {"reasoning": {"effort": "unheard-of", "summary": "auto", "context": "all_turns", "generate_summary": "x"}},
            {"max_tokens": 64000, "thinking": {"type": "enabled", "budget_tokens": 8192}},
            [NOT_FORWARDED + "reasoning.generate_summary"],
            [THOUGHT, CACHED],
        ),
        ({"reasoning": {"effort": "xhigh"}}, {"max_tokens": 64000, "thinking": {"type": "enabled", "budget_tokens": 32000}}, [], [THOUGHT, CACHED]),
        ({"reasoning": {"effort": "none"}}, {"max_tokens": 64000}, [], [CACHED]),
        ({"reasoning": {"summary": "auto"}}, {"max_tokens": 64000}, [], [CACHED]),
        # The budget leaves max_tokens room and is at least the API's minimum, 1024.
        ({"max_output_tokens": 2048, "reasoning": {"effort": "high"}}, {"max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024}}, [], [THOUGHT, CACHED]),
        ({"max_output_tokens": 2049, "reasoning": {"effort": "high"}}, {"max_tokens": 2049, "thinking": {"type": "enabled", "budget_tokens": 1025}}, [], [THOUGHT, CACHED]),
        (
            {"max_output_tokens": 2047, "reasoning": {"effort": "high"}, "temperature": 0.3},
            {"max_tokens": 2047, "temperature": 0.3},
            ["reasoning not enabled: max_tokens 2047 leaves no room for a thinking budget"],
            [CACHED],
        ),
        (
            {
                "text": {"format": {"type": "json_schema", "name": "x", "schema": {}}, "verbosity": "low"},
                "truncation": "auto",
                "top_logprobs": 2,
                "background": False,
                "store": True,
                "metadata": {"a": "b"},
                "user": "u",
                "service_tier": "auto",
                "include": ["reasoning.encrypted_content"],
                "prompt_cache_key": "k",
            },
            {"max_tokens": 64000},
            [NOT_FORWARDED + "text.format (json_schema), text.verbosity, top_logprobs, truncation"],
            [CACHED],
        ),
        ({"text": {"format": {"type": "text"}, "verbosity": None}, "truncation": "disabled"}, {"max_tokens": 64000}, [], [CACHED]),
    ],
    ids=[
        "nothing",
        "temperature-at-the-maximum",
        "temperature-lowered",
        "top_p",
        "sampling-dropped-with-thinking",
        "top_p-0.95-kept-with-thinking",
        "unknown-effort-is-medium",
        "xhigh",
        "effort-none",
        "summary-only",
        "smallest-budget",
        "budget-below-max-tokens",
        "no-room-for-thinking",
        "lost-fields",
        "defaults-not-lost",
    ],
)
def test_generation_fields(request_fields: JSON, sent: JSON, warnings: list[str], conversions: list[str]) -> None:
    translated = translate({"input": "hi", **request_fields})
    assert generation_fields(translated.body) == sent
    assert translated.warnings == warnings
    assert translated.conversions == conversions


def test_a_text_format_that_is_not_an_object_is_a_request_error() -> None:
    with pytest.raises(RequestError) as raised:
        translate({"input": "hi", "text": {"format": "json"}})
    assert (raised.value.message, raised.value.param) == ("Invalid 'text.format': expected an object.", "text.format")


@pytest.mark.parametrize(
    ("model", "max_tokens"),
    [
        ("claude-opus-4-1", 32000),  # "claude-opus-4" only
        ("claude-opus-4-5-20251101", 64000),  # the longer prefix wins
        ("claude-3-haiku-20240307", 4096),
        ("claude-3-7-sonnet-latest", 64000),
    ],
)
def test_the_longest_model_prefix_gives_the_default_max_tokens(model: str, max_tokens: int) -> None:
    assert translate({"input": "hi"}, model=model).body["max_tokens"] == max_tokens
