"""recover_custom_input: every wrapper shape a model writes for a freeform tool.

The grammars are Codex's own, verbatim (codex-client.md §2.2 apply_patch, §2.4 exec).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.protocol import CustomTool
from toolwire.translate import RecoveredInput, custom_input, recover_custom_input

APPLY_PATCH_GRAMMAR = (
    'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\nend_patch: "*** End Patch" LF?\n\n'
    "hunk: add_hunk | delete_hunk | update_hunk\n"
    'add_hunk: "*** Add File: " filename LF add_line+\ndelete_hunk: "*** Delete File: " filename LF\n'
    'update_hunk: "*** Update File: " filename LF change_move? change?\n\nfilename: /(.+)/\n'
    'add_line: "+" /(.*)/ LF -> line\n\nchange_move: "*** Move to: " filename LF\n'
    "change: (change_context | change_line)+ eof_line?\n"
    'change_context: ("@@" | "@@ " /(.+)/) LF\nchange_line: ("+" | "-" | " ") /(.*)/ LF\n'
    'eof_line: "*** End of File" LF\n\n%import common.LF\n'
)
EXEC_GRAMMAR = (
    "\nstart: pragma_source | plain_source\npragma_source: PRAGMA_LINE NEWLINE SOURCE\n"
    "plain_source: SOURCE\n\nPRAGMA_LINE: /[ \\t]*\\/\\/ @exec:[^\\r\\n]*/\nNEWLINE: /\\r?\\n/\n"
    "SOURCE: /[\\s\\S]+/\n"
)
EXEC_DESCRIPTION = (
    "Run JavaScript code to orchestrate/compose tool calls\n"
    "- Evaluates the provided JavaScript code in a fresh V8 isolate as an async module."
)

APPLY_PATCH = CustomTool.model_validate(
    {
        "type": "custom",
        "name": "apply_patch",
        "description": "The `apply_patch` tool can be used to edit files. This is a FREEFORM tool, so do not wrap the patch in JSON.",
        "format": {"type": "grammar", "syntax": "lark", "definition": APPLY_PATCH_GRAMMAR},
    }
)
EXEC = CustomTool.model_validate(
    {
        "type": "custom",
        "name": "exec",
        "description": EXEC_DESCRIPTION,
        "format": {"type": "grammar", "syntax": "lark", "definition": EXEC_GRAMMAR},
    }
)
# Codex test fixtures replace the long description with a placeholder: the grammar's
# ``@exec`` pragma still identifies the code-mode tool.
EXEC_PLACEHOLDER_DESCRIPTION = EXEC.model_copy(
    update={"description": "<codex description, 13147 chars>"}
)
PLAIN = CustomTool.model_validate({"type": "custom", "name": "note"})
DIGITS = CustomTool.model_validate(
    {
        "type": "custom",
        "name": "digits",
        "format": {"type": "grammar", "syntax": "regex", "definition": r"\d+"},
    }
)

PATCH = (
    "*** Begin Patch\n*** Add File: hello.txt\n+Hello world\n+\n"
    '*** Update File: src/app.py\n@@ def greet():\n-print("Hi")\n+print("Hello, world!")\n'
    "*** Delete File: obsolete.txt\n*** End Patch\n"
)


def js_for(arguments: dict[str, object]) -> str:
    call = json.dumps(arguments, separators=(",", ":"))
    return (
        f"const result = await tools.exec_command({call});\n"
        'text(typeof result === "string" ? result : JSON.stringify(result));'
    )


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param(json.dumps({"input": PATCH}), RecoveredInput(PATCH, None), id="wrapper"),
        pytest.param(
            json.dumps({"input": PATCH, "extra": 1}),
            RecoveredInput(PATCH, None),
            id="wrapper-with-extra-field",
        ),
        pytest.param(
            json.dumps({"patch": PATCH}),
            RecoveredInput(PATCH, "custom input unwrapped from 'patch'"),
            id="single-string-field",
        ),
        pytest.param(
            json.dumps(PATCH),
            RecoveredInput(PATCH, "custom input was a JSON string"),
            id="json-string",
        ),
        pytest.param(PATCH, RecoveredInput(PATCH, "custom input was raw text"), id="raw-text"),
        pytest.param(
            "```diff\n" + PATCH + "```",
            RecoveredInput(PATCH, "custom input was raw text; markdown fences stripped"),
            id="raw-fenced",
        ),
        pytest.param(
            json.dumps({"input": "```\n" + PATCH + "```\n"}),
            RecoveredInput(PATCH, "markdown fences stripped"),
            id="wrapped-fenced",
        ),
        pytest.param(
            '{"input": "' + PATCH.replace('"', '\\"') + '"}',
            RecoveredInput(PATCH, None),
            id="raw-newlines-in-json-string",
        ),
        pytest.param(
            json.dumps({"input": PATCH})[:-1] + ", ",
            RecoveredInput(PATCH, "custom input recovered from a broken JSON wrapper"),
            id="broken-wrapper",
        ),
        pytest.param(
            json.dumps({"input": "\n\n" + PATCH + "\n  "}),
            RecoveredInput(PATCH.rstrip("\n"), "surrounding whitespace trimmed"),
            id="surrounding-whitespace",
        ),
    ],
)
def test_apply_patch_shapes(arguments: str, expected: RecoveredInput) -> None:
    assert recover_custom_input(arguments, APPLY_PATCH) == expected


def test_apply_patch_not_matching_grammar_returns_the_first_candidate() -> None:
    assert recover_custom_input('{"input": "not a patch"}', APPLY_PATCH) == RecoveredInput(
        "not a patch", None
    )


@pytest.mark.parametrize(
    "tool", [EXEC, EXEC_PLACEHOLDER_DESCRIPTION], ids=["described", "grammar-only"]
)
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param('{"input": "text(1)"}', RecoveredInput("text(1)", None), id="wrapper"),
        pytest.param(
            '{"cmd": "pwd"}',
            RecoveredInput(js_for({"cmd": "pwd"}), "legacy exec JSON rewritten"),
            id="cmd",
        ),
        pytest.param(
            '{"cmd": "ls", "workdir": "/tmp"}',
            RecoveredInput(js_for({"cmd": "ls", "workdir": "/tmp"}), "legacy exec JSON rewritten"),
            id="cmd-workdir",
        ),
        pytest.param(
            '{"command": "echo hi", "cwd": "/srv"}',
            RecoveredInput(
                js_for({"cmd": "echo hi", "workdir": "/srv"}), "legacy exec JSON rewritten"
            ),
            id="command-string",
        ),
        pytest.param(
            '{"command": ["bash", "-lc", "ls -la"]}',
            RecoveredInput(js_for({"cmd": "ls -la"}), "legacy exec JSON rewritten"),
            id="command-argv-shell",
        ),
        pytest.param(
            '{"command": ["ls", "my dir"]}',
            RecoveredInput(js_for({"cmd": "ls 'my dir'"}), "legacy exec JSON rewritten"),
            id="command-argv",
        ),
        pytest.param(
            '{"input": "{\\"cmd\\": \\"pwd\\"}"}',
            RecoveredInput(js_for({"cmd": "pwd"}), "legacy exec JSON rewritten"),
            id="legacy-inside-wrapper",
        ),
        pytest.param(
            '{"input": {"cmd": "pwd"}}',
            RecoveredInput(js_for({"cmd": "pwd"}), "legacy exec JSON rewritten"),
            id="legacy-object-inside-wrapper",
        ),
        pytest.param(
            '{"code": "text(2)"}',
            RecoveredInput("text(2)", "custom input unwrapped from 'code'"),
            id="code",
        ),
        pytest.param(
            "text(3)", RecoveredInput("text(3)", "custom input was raw text"), id="raw-js"
        ),
        pytest.param(
            '{"input": "```js\\ntext(4)\\n```"}',
            RecoveredInput("text(4)\n", "markdown fences stripped"),
            id="fenced",
        ),
        pytest.param(
            '{"input": "// @exec: {\\"yield_time_ms\\": 10}\\ntext(5)"}',
            RecoveredInput('// @exec: {"yield_time_ms": 10}\ntext(5)', None),
            id="pragma",
        ),
    ],
)
def test_exec_shapes(tool: CustomTool, arguments: str, expected: RecoveredInput) -> None:
    assert recover_custom_input(arguments, tool) == expected


def test_legacy_shapes_are_only_rewritten_for_code_mode_exec() -> None:
    assert recover_custom_input('{"cmd": "pwd"}', PLAIN) == RecoveredInput(
        "pwd", "custom input unwrapped from 'cmd'"
    )
    other_exec = CustomTool.model_validate(
        {"type": "custom", "name": "exec", "description": "Runs SQL."}
    )
    assert recover_custom_input('{"cmd": "pwd"}', other_exec).text == "pwd"


def test_legacy_exec_keeps_unicode_and_known_fields_only() -> None:
    recovered = recover_custom_input('{"cmd": "echo é", "tty": true, "bogus": 1}', EXEC)
    assert recovered.text == js_for({"cmd": "echo é", "tty": True}).replace("\\u00e9", "é")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"input": "12"}', RecoveredInput("12", None)),
        ('{"value": "34"}', RecoveredInput("34", "custom input unwrapped from 'value'")),
        ('{"input": " 56 "}', RecoveredInput("56", "surrounding whitespace trimmed")),
        ('{"input": "abc"}', RecoveredInput("abc", None)),  # nothing matches: the first candidate
    ],
)
def test_regex_grammar(arguments: str, expected: RecoveredInput) -> None:
    assert recover_custom_input(arguments, DIGITS) == expected


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("", RecoveredInput("", None)),
        ("[1, 2]", RecoveredInput("[1, 2]", "custom input was raw JSON")),
        (
            '{"a": "x", "b": "y"}',
            RecoveredInput('{"a": "x", "b": "y"}', "custom input was raw JSON"),
        ),
        (
            "```\nkeep\n```",
            RecoveredInput("keep\n", "custom input was raw text; markdown fences stripped"),
        ),
    ],
)
def test_plain_text_tool(arguments: str, expected: RecoveredInput) -> None:
    assert recover_custom_input(arguments, PLAIN) == expected


@pytest.mark.parametrize(
    "definition",
    ["start: (", "start: /(/", "start: x\nx: /a*/\n"],
    ids=["syntax-error", "bad-regex", "zero-width-terminal-rule"],
)
def test_broken_grammar_is_not_checked(definition: str) -> None:
    tool = CustomTool.model_validate(
        {
            "type": "custom",
            "name": "t",
            "format": {"type": "grammar", "syntax": "lark", "definition": definition},
        }
    )
    assert recover_custom_input('{"input": "anything"}', tool) == RecoveredInput("anything", None)
    bad_regex = CustomTool.model_validate(
        {
            "type": "custom",
            "name": "t",
            "format": {"type": "grammar", "syntax": "regex", "definition": "("},
        }
    )
    assert recover_custom_input('{"input": "x"}', bad_regex) == RecoveredInput("x", None)


def test_parsers_are_cached_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(custom_input, "_PARSERS", {})
    recover_custom_input(json.dumps({"input": PATCH}), APPLY_PATCH)
    parser = custom_input._PARSERS[APPLY_PATCH_GRAMMAR]
    assert parser is not None
    recover_custom_input(json.dumps({"input": PATCH}), APPLY_PATCH)
    assert custom_input._PARSERS[APPLY_PATCH_GRAMMAR] is parser
    for number in range(custom_input._MAX_CACHED_PARSERS + 5):
        custom_input._lark_parser(f'start: "a{number}"\n')
    assert len(custom_input._PARSERS) == custom_input._MAX_CACHED_PARSERS
    assert APPLY_PATCH_GRAMMAR not in custom_input._PARSERS  # the oldest went first


def test_deep_nesting_does_not_raise() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert recover_custom_input(deep, PLAIN) == RecoveredInput(deep, "custom input was raw text")


@settings(max_examples=200, deadline=None)
@given(arguments=st.text(), tool=st.sampled_from([APPLY_PATCH, EXEC, PLAIN, DIGITS]))
def test_never_raises(arguments: str, tool: CustomTool) -> None:
    recovered = recover_custom_input(arguments, tool)
    assert isinstance(recovered.text, str)


@settings(max_examples=100, deadline=None)
@given(text=st.text())
def test_the_wrapper_round_trips_any_text_for_an_unconstrained_tool(text: str) -> None:
    assert recover_custom_input(json.dumps({"input": text}), PLAIN) == RecoveredInput(text, None)
