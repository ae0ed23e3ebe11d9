"""Calls written into the text, one table row per way a model family writes them: the
calls come out in order, with the ids the model gave (Mistral v11's ``[CALL_ID]``) or
fresh ones, and the log names the family each call was recovered from.
"""

from __future__ import annotations

import pytest

from tests.support.text_calls import STYLES, family_of, written

from .test_stream_text_calls import answer, stream, summarize


@pytest.mark.parametrize("style", STYLES)
def test_two_calls_in_each_style(style: str) -> None:
    response, machine = stream(answer(written(style, [("exec_command", {"cmd": "ls"}), ("get_weather", {"city": "Oslo"})])))
    assert [summarize(item) for item in response["output"]] == [
        ("function_call", None, "exec_command", '{"cmd":"ls"}'),
        ("function_call", None, "get_weather", '{"city":"Oslo"}'),
    ]
    assert machine.conversions == [f"tool call recovered from {family_of(style)} text"] * 2
    call_ids = [item["call_id"] for item in response["output"]]
    if style == "mistral_v11":
        assert call_ids == ["abcDEF120", "abcDEF121"]
    else:
        assert all(call_id.startswith("call_") and len(call_id) == 29 for call_id in call_ids) and len(set(call_ids)) == 2
