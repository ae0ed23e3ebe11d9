"""recover_custom_input, reading by reading: which of a model's wrappers is undone, which
candidate a grammar picks, what a legacy shell call for code-mode ``exec`` becomes, and
what the tool gets when its grammar cannot be checked.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from toolwire.protocol import CustomTool
from toolwire.translate import recover_custom_input

from .test_custom_input import EXEC, PLAIN

PRINT = 'text(typeof result === "string" ? result : JSON.stringify(result));'
TRIMMED = "surrounding whitespace trimmed"
BROKEN = "custom input recovered from a broken JSON wrapper"
LEGACY = "legacy exec JSON rewritten"


def tool(tool_format: dict[str, Any] | None = None, name: str = "t") -> CustomTool:
    return CustomTool.model_validate({"type": "custom", "name": name, **({"format": tool_format} if tool_format else {})})


def regex(definition: str) -> CustomTool:
    return tool({"type": "grammar", "syntax": "regex", "definition": definition})


def lark(definition: str) -> CustomTool:
    return tool({"type": "grammar", "syntax": "lark", "definition": definition})


def shell(call: str) -> str:
    return f"const result = await tools.exec_command({call});\n{PRINT}"


@pytest.mark.parametrize(
    ("custom", "arguments", "text", "conversion"),
    [
        (tool({"type": "text"}), "  abc  ", "  abc  ", "custom input was raw text"),
        (regex("[a-z]+"), '{"input": " abc\\n"}', "abc", TRIMMED),
        (regex("[a-z]+\\n"), '{"input": "  abc  "}', "abc\n", TRIMMED),
        (regex("[a-z]+"), '{"input": "\\u000babc"}', "\x0babc", None),  # only \r \n \t and spaces are trimmed
        (regex("[a-z]+\\n"), '{"input": "abc"}', "abc", None),  # nothing to trim: no newline is added
        (regex("[a-z]+"), '{"input": "Xabc"}', "Xabc", None),  # only whitespace is trimmed, never letters
        # Too long to check against its grammar (over 200,000 characters): taken as written.
        (regex("[a-z]+"), '{"input": "abc' + " " * 200_001 + '"}', "abc" + " " * 200_001, None),
        (PLAIN, '{"patch": "x", "n": 1}', '{"patch": "x", "n": 1}', "custom input was raw JSON"),
        (PLAIN, '{"input": "{\\"cmd\\": \\"ls\\"}"}', '{"cmd": "ls"}', None),
        (PLAIN, '{"input": "\\u12', "", BROKEN),
        (PLAIN, '{"input": "abc\\u1', "abc", BROKEN),
        # Broken by more than a cut escape (at most five characters): not salvaged, passed as written.
        (PLAIN, '{"input": "abc\\x4142', '{"input": "abc\\x4142', "custom input was raw text"),
        (PLAIN, "```\na\n```\nb\n```", "```\na\n```\nb\n```", "custom input was raw text"),
        (PLAIN, "```\nabc```", "abc", "custom input was raw text; markdown fences stripped"),
        (tool(name="exec"), '{"cmd": "pwd"}', "pwd", "custom input unwrapped from 'cmd'"),
        # A grammar Lark can parse only with Earley (two rules match "xy").
        (lark('start: a | b\na: "x" "y"\nb: "x" "y"\n'), '{"input": "  xy  "}', "xy", TRIMMED),
        # Regexes that match the empty string, which Lark refuses, rewritten.
        (lark('start: "<" /[a-z]*/ ">"\n'), '{"input": "  <ab>  "}', "<ab>", TRIMMED),
        (lark('start: "<" /([a-z]*)/ ">"\n'), '{"input": "  <ab>  "}', "<ab>", TRIMMED),
    ],
)
def test_readings(custom: CustomTool, arguments: str, text: str, conversion: str | None) -> None:
    recovered = recover_custom_input(arguments, custom)
    assert (recovered.text, recovered.conversion) == (text, conversion)


@pytest.mark.parametrize(
    ("arguments", "call"),
    [
        ('{"input": "{\\"cmd\\":\\"pwd\\"}', '{"cmd":"pwd"}'),
        ('"{\\"cmd\\":\\"pwd\\"}"', '{"cmd":"pwd"}'),
        ('{"code": "{\\"cmd\\":\\"pwd\\"}"}', '{"cmd":"pwd"}'),
        ('{"input": "  {\\"cmd\\":\\"pwd\\"}"}', '{"cmd":"pwd"}'),
        ('{"cmd": "pwd", "workdir": "/a", "cwd": "/b"}', '{"cmd":"pwd","workdir":"/a"}'),
        ('{"cmd": "pwd", "cwd": "/b"}', '{"cmd":"pwd","workdir":"/b"}'),
        ('{"cmd": "é"}', '{"cmd":"é"}'),
        ('{"command": ["/usr/bin/bash", "-lc", "ls -la"]}', '{"cmd":"ls -la"}'),
        ('{"command": ["/bin/sh", "-c", "ls"]}', '{"cmd":"ls"}'),
        ('{"command": ["zsh", "-c", "ls"]}', '{"cmd":"ls"}'),
        ('{"command": ["bash", "-lc", "ls", "extra"]}', '{"cmd":"bash -lc ls extra"}'),
        ('{"command": ["python", "-c", "print(1)"]}', '{"cmd":"python -c \'print(1)\'"}'),
        ('{"command": ["bash", "-x", "ls"]}', '{"cmd":"bash -x ls"}'),
    ],
)
def test_a_legacy_shell_call_for_code_mode_exec_becomes_javascript(arguments: str, call: str) -> None:
    recovered = recover_custom_input(arguments, EXEC)
    assert (recovered.text, recovered.conversion) == (shell(call), LEGACY)


@pytest.mark.parametrize("custom", [regex("("), lark("start: ???")], ids=["regex", "lark"])
def test_a_grammar_that_does_not_compile_accepts_the_first_reading(custom: CustomTool) -> None:
    recovered = recover_custom_input('{"input": "  x  "}', custom)
    assert (recovered.text, recovered.conversion) == ("  x  ", None)


def test_a_text_longer_than_can_be_checked_is_accepted_and_one_as_long_as_can_is_checked() -> None:
    checked = " " + "y" * 199_998 + " "
    recovered = recover_custom_input(orjson.dumps({"input": checked}).decode(), regex("y+"))
    assert (recovered.text, recovered.conversion) == ("y" * 199_998, TRIMMED)
    unchecked = checked + "y"
    recovered = recover_custom_input(orjson.dumps({"input": unchecked}).decode(), regex("y+"))
    assert (recovered.text, recovered.conversion) == (unchecked, None)
