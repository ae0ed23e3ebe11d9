"""The generation fields of a translated request (``chat/_fields``)."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.translate import BackendProfile

from .shapes import VLLM, translate

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




def test_the_effort_is_sent_whatever_reasoning_fields_come_before_it() -> None:
    translated = translate({"input": "hi", "reasoning": {"context": "all", "summary": None, "effort": "low"}})
    assert (translated.chat.get("reasoning_effort"), translated.warnings) == ("low", [])


def test_a_plain_text_format_is_the_default_and_loses_nothing() -> None:
    translated = translate({"input": "hi", "text": {"format": {"type": "text"}}})
    assert ("response_format" in translated.chat, translated.warnings) == (False, [])
