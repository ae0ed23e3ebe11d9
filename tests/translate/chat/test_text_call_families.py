"""Calls written into the text, one table row per way a model family writes them: the
calls come out in order, with the ids the model gave (Mistral v11's ``[CALL_ID]``) or
fresh ones, and the log names the family each call was recovered from.
"""

from __future__ import annotations

import pytest

from tests.support.text_calls import STYLES, family_of, written

from .test_stream import BODY
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


TYPED = {
    "type": "function",
    "name": "typed",
    "parameters": {
        "type": "object",
        "properties": {
            "i": {"type": "integer"},
            "n": {"type": "number"},
            "b": {"type": "boolean"},
            "z": {"type": "null"},
            "o": {"type": "object"},
            "a": {"type": "array"},
            "any": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "one": {"oneOf": [{"type": "boolean"}, {"type": "array"}]},
            "list": {"type": ["integer", "null"]},
            "s": {"type": "string"},
            "uuid": {"type": "uuid"},
            "nested": {"anyOf": [{"oneOf": [{"type": "number"}]}]},
            "junk": "not a schema",
        },
    },
}
UNDESCRIBED = {"type": "function", "name": "undescribed", "parameters": {"type": "object", "properties": "none"}}


def qwen3_coder(name: str, parameters: list[tuple[str, str]]) -> str:
    written = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in parameters)
    return f"<tool_call>\n<function={name}>\n{written}</function>\n</tool_call>"


@pytest.mark.parametrize(
    ("name", "parameters", "arguments"),
    [
        (
            "typed",
            [
                ("i", "42"), ("n", "2.5"), ("b", "TRUE"), ("z", "null"), ("o", '{"k": 1}'), ("a", "[1, 2]"), ("any", "7"),
                ("one", "false"), ("list", "null"), ("s", "42"), ("uuid", "abc"), ("nested", "3.5"), ("junk", "1"), ("extra", "5"),
            ],
            '{"i":42,"n":2.5,"b":true,"z":null,"o":{"k":1},"a":[1,2],"any":7,"one":false,"list":null,"s":"42","uuid":"abc","nested":3.5,"junk":"1","extra":"5"}',
        ),
        (
            "typed",
            [
                ("i", "4.5"), ("n", "true"), ("b", "yes"), ("z", "0"), ("o", "[1]"), ("a", '{"k":1}'), ("any", "x"),
                ("one", "1"), ("list", "true"), ("nested", '"s"'),
            ],
            '{"i":"4.5","n":"true","b":"yes","z":"0","o":"[1]","a":"{\\"k\\":1}","any":"x","one":"1","list":"true","nested":"\\"s\\""}',
        ),
        ("undescribed", [("x", "1")], '{"x":"1"}'),
    ],
    ids=["each-type-read", "what-does-not-fit-stays-text", "no-properties"],
)
def test_a_written_parameter_is_read_as_its_declared_type(name: str, parameters: list[tuple[str, str]], arguments: str) -> None:
    response, _ = stream(answer(qwen3_coder(name, parameters)), {**BODY, "tools": [TYPED, UNDESCRIBED]})
    [call] = response["output"]
    assert (call["name"], call["arguments"]) == (name, arguments)
