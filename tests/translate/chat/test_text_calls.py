"""TextCallRecognizer: tool calls written into text, in each family's format, streaming.

Tables of what models write (literal, as their chat templates print calls) and what
must come out; the cases that must stay text, exactly as they came; and properties: any
way of splitting the text (inside markers, inside multi-byte characters' neighbours,
one character at a time) gives the same signals, and text is held back only while it
could still begin a marker.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.text_calls import STYLES, family_of, written
from toolwire.protocol import parse_request
from toolwire.tools import ToolCatalog
from toolwire.translate import UpstreamToolTable
from toolwire.translate._calls import CallFragment
from toolwire.translate.chat._chunks import Text
from toolwire.translate.chat.text_calls import (
    FAMILIES,
    TextCallRecognizer,
    families_for,
    offered_tools,
)

JSON = dict[str, Any]

EXEC_COMMAND = {
    "type": "function",
    "name": "exec_command",
    "description": "Runs a command.",
    "parameters": {
        "type": "object",
        "properties": {
            "cmd": {"type": "string"},
            "yield_time_ms": {"type": "number"},
            "tty": {"type": "boolean"},
            "env": {"type": "object"},
            "workdir": {"type": ["string", "null"]},
        },
        "required": ["cmd"],
    },
}
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files."}
COLLABORATION = {
    "type": "namespace",
    "name": "collaboration",
    "description": "Sub-agents.",
    "tools": [
        {"type": "function", "name": "list_agents", "parameters": {"type": "object", "properties": {}}},
        {
            "type": "function",
            "name": "send_message",
            "parameters": {
                "type": "object",
                "properties": {"to": {"type": "integer"}, "text": {"type": "string"}},
            },
        },
    ],
}
TOOLS = [EXEC_COMMAND, APPLY_PATCH, COLLABORATION]
REQUEST = parse_request({"model": "m", "input": "hi", "tools": TOOLS})
OFFERED = offered_tools(UpstreamToolTable(ToolCatalog.from_request(REQUEST)))

DS_BEGIN, DS_END = "<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581calls\u2581end\uff5c>"
DS_CALL, DS_CALL_END = "<\uff5ctool\u2581call\u2581begin\uff5c>", "<\uff5ctool\u2581call\u2581end\uff5c>"
DS_SEP = "<\uff5ctool\u2581sep\uff5c>"
PATCH = "*** Begin Patch\n*** Add File: a.txt\n+héllo 世界\n*** End Patch\n"

Signal = tuple[Any, ...]


def signals(out: list[Text | CallFragment]) -> list[Signal]:
    """The signals as comparable tuples, adjacent texts joined, arguments parsed."""
    found: list[Signal] = []
    for signal in out:
        if isinstance(signal, Text):
            if found and found[-1][0] == "text":
                found[-1] = ("text", found[-1][1] + signal.text)
            elif signal.text:
                found.append(("text", signal.text))
        else:
            assert signal.index is None and signal.native_input is None
            found.append(("call", signal.name, json.loads(signal.arguments), signal.upstream_id))
    return found


def recognize(pieces: list[str], families: frozenset[str] = frozenset(FAMILIES)) -> list[Signal]:
    recognizer = TextCallRecognizer(OFFERED, families)
    out: list[Text | CallFragment] = []
    for piece in pieces:
        out += recognizer.feed(piece)
    return signals(out + recognizer.flush())


def call(name: str, call_id: str | None = None, **arguments: Any) -> Signal:
    return ("call", name, arguments, call_id)


def text(value: str) -> Signal:
    return ("text", value)


# ---------------------------------------------------------------- what the models write

RECOGNIZED: list[tuple[str, str, list[Signal]]] = [
    # After an inline code span that a run of two backticks opens and one closes
    (
        "after-a-code-span",
        'a``b` <tool_call>{"name": "exec_command", "arguments": {"cmd": "ls"}}</tool_call>',
        [text("a``b` "), call("exec_command", cmd="ls")],
    ),
    # A string ending in an escaped backslash ends at the quote after it
    (
        "hermes-backslash-before-the-closing-quote",
        '<tool_call>{"name": "exec_command", "arguments": {"cmd": "dir C:\\\\", "workdir": "}\\"x\\\\\\""}}</tool_call>Done.',
        [call("exec_command", cmd="dir C:\\", workdir='}"x\\"'), text("Done.")],
    ),
    # A backtick, what could begin a marker, a backtick: two spans, however it is cut
    (
        "between-code-spans",
        'x `<tool_c`y <tool_call>{"name": "exec_command", "arguments": {"cmd": "ls"}}</tool_call>',
        [text("x `<tool_c`y "), call("exec_command", cmd="ls")],
    ),
    # Hermes / Qwen 2.5-3
    (
        "hermes",
        '<tool_call>\n{"name": "exec_command", "arguments": {"cmd": "ls -la"}}\n</tool_call>',
        [call("exec_command", cmd="ls -la")],
    ),
    (
        "hermes-parallel-and-text",
        'Let me look.\n<tool_call>\n{"name": "exec_command", "arguments": {"cmd": "ls"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "collaboration__list_agents", "arguments": {}}\n</tool_call>\n',
        [text("Let me look.\n"), call("exec_command", cmd="ls"), call("collaboration__list_agents")],
    ),
    (
        "hermes-arguments-as-a-string",
        '<tool_call>{"name": "exec_command", "arguments": "{\\"cmd\\": \\"pwd\\"}"}</tool_call>',
        [call("exec_command", cmd="pwd")],
    ),
    (
        "hermes-parameters-key-and-a-list",
        '<tool_call>[{"name": "exec_command", "parameters": {"cmd": "a"}}, {"name": "list_agents"}]</tool_call>',
        [call("exec_command", cmd="a"), call("list_agents")],
    ),
    (
        "hermes-closing-tag-missing-at-the-end",
        '<tool_call>\n{"name": "exec_command", "arguments": {"cmd": "ls"}}\n</tool_',
        [call("exec_command", cmd="ls")],
    ),
    (
        "hermes-markers-inside-a-string",
        '<tool_call>{"name": "apply_patch", "arguments": {"input": "</tool_call> <tool_call> [TOOL_CALLS]"}}</tool_call>',
        [call("apply_patch", input="</tool_call> <tool_call> [TOOL_CALLS]")],
    ),
    # Qwen3-Coder: raw values converted by the schema
    (
        "qwen3-coder-whose-close-tag-never-came",  # at the end of the answer: the call is whole
        "<tool_call>\n<function=list_agents>\n</function>",
        [call("list_agents")],
    ),
    (
        "qwen3-coder-compact",
        "<tool_call><function=exec_command><parameter=cmd>ls</parameter></function></tool_call>",
        [call("exec_command", cmd="ls")],
    ),
    (
        "qwen3-coder-false-in-any-case",
        "<tool_call><function=exec_command><parameter=cmd>ls</parameter><parameter=tty>FALSE</parameter>"
        "</function></tool_call>",
        [call("exec_command", cmd="ls", tty=False)],
    ),
    (
        "qwen3-coder",
        "<tool_call>\n<function=exec_command>\n<parameter=cmd>\nls -la\n</parameter>\n"
        "<parameter=yield_time_ms>\n1500\n</parameter>\n<parameter=tty>\nTrue\n</parameter>\n"
        '<parameter=env>\n{"A": "1"}\n</parameter>\n<parameter=workdir>\nnull\n</parameter>\n'
        "</function>\n</tool_call>",
        [call("exec_command", cmd="ls -la", yield_time_ms=1500, tty=True, env={"A": "1"}, workdir="null")],
    ),
    (
        "qwen3-coder-raw-patch",
        f"<tool_call>\n<function=apply_patch>\n<parameter=input>\n{PATCH}\n</parameter>\n</function>\n</tool_call>\n",
        [call("apply_patch", input=PATCH)],
    ),
    (
        "qwen3-coder-a-value-that-is-not-its-type-stays-text",
        "<tool_call>\n<function=collaboration__send_message>\n<parameter=to>\nbob\n</parameter>\n"
        "<parameter=text>\n42\n</parameter>\n</function>\n</tool_call>",
        [call("collaboration__send_message", to="bob", text="42")],
    ),
    (
        "qwen3-coder-no-parameters",
        "<tool_call>\n<function=list_agents>\n</function>\n</tool_call>",
        [call("list_agents")],
    ),
    # GLM 4.5-4.6 (and 4.7's compact form)
    (
        "glm45",
        "<tool_call>exec_command\n<arg_key>cmd</arg_key>\n<arg_value>ls</arg_value>\n"
        "<arg_key>yield_time_ms</arg_key>\n<arg_value>250</arg_value>\n</tool_call>",
        [call("exec_command", cmd="ls", yield_time_ms=250)],
    ),
    (
        "glm47-compact",
        "<tool_call>collaboration__send_message<arg_key>to</arg_key><arg_value>7</arg_value>"
        "<arg_key>text</arg_key><arg_value>hi there</arg_value></tool_call>",
        [call("collaboration__send_message", to=7, text="hi there")],
    ),
    ("glm45-no-arguments", "<tool_call>list_agents</tool_call>", [call("list_agents")]),
    (
        "glm45-name-on-its-own-line",
        "<tool_call>\nexec_command\n<arg_key>cmd</arg_key>\n<arg_value>ls</arg_value>\n</tool_call>",
        [call("exec_command", cmd="ls")],
    ),
    # the separator's text inside a value is part of the value
    (
        "deepseek-separator-inside-a-value",
        f'{DS_BEGIN}{DS_CALL}exec_command{DS_SEP}{{"cmd": "echo {DS_SEP}"}}{DS_CALL_END}{DS_END}',
        [call("exec_command", cmd=f"echo {DS_SEP}")],
    ),
    # Mistral
    (
        "mistral-v13",
        '[TOOL_CALLS]exec_command[ARGS]{"cmd": "ls"}[TOOL_CALLS]list_agents[ARGS]{}',
        [call("exec_command", cmd="ls"), call("list_agents")],
    ),
    (
        "mistral-v11-call-id",
        '[TOOL_CALLS]exec_command[CALL_ID]abcDEF123[ARGS]{"cmd": "ls"}',
        [call("exec_command", "abcDEF123", cmd="ls")],
    ),
    (
        "mistral-legacy-list",
        '[TOOL_CALLS] [{"name": "exec_command", "arguments": {"cmd": "ls"}, "id": "xyzXYZ789"}, '
        '{"name": "list_agents", "arguments": {}}]',
        [call("exec_command", "xyzXYZ789", cmd="ls"), call("list_agents")],
    ),
    (
        "mistral-legacy-ids-that-are-none",
        '[TOOL_CALLS] [{"name": "exec_command", "arguments": "  ", "id": ""}, {"name": "list_agents", "id": 5}]',
        [call("exec_command"), call("list_agents")],
    ),
    (
        "mistral-text-after",
        'Sure.[TOOL_CALLS]exec_command[ARGS]{"cmd": "echo }"}} and more',
        [text("Sure."), call("exec_command", cmd="echo }"), text("} and more")],
    ),
    (
        "mistral-repeated-call-id-kept-once",
        '[TOOL_CALLS]exec_command[CALL_ID]abcDEF123[ARGS]{"cmd": "a"}'
        '[TOOL_CALLS]exec_command[CALL_ID]abcDEF123[ARGS]{"cmd": "b"}',
        [call("exec_command", "abcDEF123", cmd="a"), call("exec_command", cmd="b")],
    ),
    # DeepSeek
    (
        "deepseek-v3.1",
        f'{DS_BEGIN}{DS_CALL}exec_command{DS_SEP}{{"cmd": "ls"}}{DS_CALL_END}'
        f'{DS_CALL}list_agents{DS_SEP}{{}}{DS_CALL_END}{DS_END}',
        [call("exec_command", cmd="ls"), call("list_agents")],
    ),
    (
        "deepseek-v3-fenced",
        f'I will run it.\n\n{DS_BEGIN}{DS_CALL}function{DS_SEP}exec_command\n```json\n{{"cmd": "ls"}}\n```'
        f"{DS_CALL_END}{DS_END}",
        [text("I will run it.\n\n"), call("exec_command", cmd="ls")],
    ),
    (
        "deepseek-section-end-missing-at-the-end",
        f'{DS_BEGIN}{DS_CALL}exec_command{DS_SEP}{{"cmd": "ls"}}{DS_CALL_END}\n',
        [call("exec_command", cmd="ls")],
    ),
    # Kimi K2
    (
        "kimi-k2",
        '<|tool_calls_section_begin|><|tool_call_begin|>functions.exec_command:0<|tool_call_argument_begin|>'
        '{"cmd": "ls"}<|tool_call_end|><|tool_call_begin|>functions.collaboration__list_agents:1'
        "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
        [call("exec_command", cmd="ls"), call("collaboration__list_agents")],
    ),
    (
        "kimi-k2-singular-section-markers",
        "<|tool_call_section_begin|> <|tool_call_begin|> list_agents:0 <|tool_call_argument_begin|> {} "
        "<|tool_call_end|> <|tool_call_section_end|>",
        [call("list_agents")],
    ),
    # Around the calls
    (
        "text-after-a-call-starts-without-the-space",
        '<tool_call>{"name": "list_agents", "arguments": {}}</tool_call>\n\n  Done — 完成 😀',
        [call("list_agents"), text("Done — 完成 😀")],
    ),
    (
        "space-before-a-call-at-the-start-is-dropped",
        '  \n<tool_call>{"name": "list_agents", "arguments": {}}</tool_call>',
        [call("list_agents")],
    ),
    (
        "families-mixed-in-one-answer",
        '<tool_call>{"name": "list_agents", "arguments": {}}</tool_call>\n'
        '[TOOL_CALLS]exec_command[ARGS]{"cmd": "ls"}',
        [call("list_agents"), call("exec_command", cmd="ls")],
    ),
    (
        "a-stray-backtick-is-code-only-to-the-end-of-its-line",
        'A stray ` here\n<tool_call>{"name": "list_agents", "arguments": {}}</tool_call>',
        [text("A stray ` here\n"), call("list_agents")],
    ),
    (
        "a-closed-code-fence-before-a-call",
        'Here:\n```sh\nls\n```\n<tool_call>{"name": "exec_command", "arguments": {"cmd": "ls"}}</tool_call>',
        [text("Here:\n```sh\nls\n```\n"), call("exec_command", cmd="ls")],
    ),
]

STAYS_TEXT: list[tuple[str, str]] = [
    # Blocks that hold no call at all
    ("hermes-empty-list", "<tool_call>[]</tool_call> and no more"),
    ("mistral-empty-list", "[TOOL_CALLS] [] and no more"),
    ("mistral-list-of-what-is-not-a-call", "[TOOL_CALLS] [1, 2] and no more"),
    # Nothing but space: held while a call could follow it, then given as it came
    ("only-space", " \n\t "),
    ("space-then-prose", "\n\n  Hello."),
    # Prose that explains the syntax
    (
        "hermes-placeholder",
        'Call tools as <tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>.',
    ),
    ("tags-in-prose", "Wrap each call in <tool_call></tool_call> tags, then stop."),
    ("qwen3-coder-placeholder", "<tool_call>\n<function=example_function_name>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>"),
    ("glm-placeholder", "<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}</arg_value>\n</tool_call>"),
    ("mistral-prose", "The [TOOL_CALLS] token starts a call; [ARGS] starts its arguments."),
    ("deepseek-prose", f"DeepSeek opens calls with {DS_BEGIN} and closes them with {DS_END}."),
    ("kimi-prose", "Kimi writes <|tool_calls_section_begin|> first, then <|tool_call_begin|>functions.NAME:IDX."),
    # A tool that was not offered
    ("hermes-unknown-tool", '<tool_call>\n{"name": "delete_everything", "arguments": {}}\n</tool_call>'),
    ("qwen3-coder-unknown-tool", "<tool_call>\n<function=rm>\n<parameter=path>\n/\n</parameter>\n</function>\n</tool_call>"),
    ("glm-unknown-tool", "<tool_call>rm\n<arg_key>path</arg_key>\n<arg_value>/</arg_value>\n</tool_call>"),
    ("mistral-unknown-tool", '[TOOL_CALLS]rm[ARGS]{"path": "/"}'),
    ("mistral-legacy-unknown-tool", '[TOOL_CALLS] [{"name": "rm", "arguments": {}}]'),
    ("deepseek-unknown-tool", f'{DS_BEGIN}{DS_CALL}rm{DS_SEP}{{"path": "/"}}{DS_CALL_END}{DS_END}'),
    ("kimi-unknown-tool", '<|tool_calls_section_begin|><|tool_call_begin|>functions.rm:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>'),
    (
        "deepseek-one-unknown-tool-keeps-the-whole-section-text",
        f'{DS_BEGIN}{DS_CALL}exec_command{DS_SEP}{{"cmd": "ls"}}{DS_CALL_END}'
        f"{DS_CALL}rm{DS_SEP}{{}}{DS_CALL_END}{DS_END}",
    ),
    # Arguments that do not parse
    ("hermes-bad-json", '<tool_call>{"name": "exec_command", "arguments": {"cmd": ls}}</tool_call>'),
    ("hermes-arguments-not-an-object", '<tool_call>{"name": "exec_command", "arguments": [1]}</tool_call>'),
    ("hermes-mismatched-brackets", '<tool_call>{"name": "exec_command", "arguments": {"cmd": "ls"]}}</tool_call>'),
    ("hermes-escaped-quotes", '<tool_call>{"name": "exec_command", "arguments": {"cmd": "echo \\\\\\"}"]}</tool_call>'),
    ("mistral-bad-json", '[TOOL_CALLS]exec_command[ARGS]{"cmd": ls}'),
    ("deepseek-arguments-not-json", f"{DS_BEGIN}{DS_CALL}exec_command{DS_SEP}ls -la{DS_CALL_END}{DS_END}"),
    ("deepseek-arguments-a-json-string", f'{DS_BEGIN}{DS_CALL}exec_command{DS_SEP}"{{}}"{DS_CALL_END}{DS_END}'),
    # V3's fenced form is read only after the head "function"
    ("deepseek-fence-after-a-name", f"{DS_BEGIN}{DS_CALL}exec_command{DS_SEP}exec_command\n```json\n{{}}\n```{DS_CALL_END}{DS_END}"),
    ("deepseek-function-without-a-fence", f"{DS_BEGIN}{DS_CALL}function{DS_SEP}exec_command ls{DS_CALL_END}{DS_END}"),
    ("kimi-no-index", '<|tool_calls_section_begin|><|tool_call_begin|>functions.exec_command:<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>'),
    # Inside markdown code
    ("fenced-example", 'For example:\n```\n<tool_call>{"name": "exec_command", "arguments": {"cmd": "ls"}}</tool_call>\n```\nThat is all.'),
    ("inline-code", 'Write `<tool_call>{"name": "list_agents", "arguments": {}}</tool_call>` to call it.'),
    ("inline-code-mid-span", 'Write `a call like <tool_call>{"name": "list_agents", "arguments": {}}</tool_call>` to call.'),
    # Unfinished
    ("never-closed", '<tool_call>\n{"name": "exec_command", "arguments": {"cmd": "ls"'),
    ("section-with-no-call", f"{DS_BEGIN}{DS_END}"),
    ("a-bracket-at-the-end", "See [the docs]"),
    ("a-lone-opener-prefix", "x <tool_cal"),
    # A GLM call cut short at each of its stages, at the end of the answer
    ("glm-cut-in-its-name", "<tool_call>exec_comm"),
    ("glm-cut-in-a-key", "<tool_call>exec_command\n<arg_key>cm"),
    ("glm-cut-in-a-value-tag", "<tool_call>exec_command\n<arg_key>cmd</arg_key>\n<arg_va"),
    ("glm-cut-in-a-value", "<tool_call>exec_command\n<arg_key>cmd</arg_key>\n<arg_value>l"),
    ("glm-cut-in-its-close", "<tool_call>exec_command\n<arg_key>cmd</arg_key>\n<arg_value>ls</arg_value>\n</tool_ca"),
]


def test_the_names_a_model_may_call_each_tool_by_and_the_parameters_it_sees() -> None:
    run = {"type": "function", "name": "run", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}
    tools = [
        {"type": "function", "name": "bare"},  # no parameters: an empty schema
        {"type": "custom", "name": "apply_patch"},
        {"type": "namespace", "name": "one", "description": "", "tools": [run]},
        {"type": "namespace", "name": "two", "description": "", "tools": [{**run, "parameters": {"type": "object"}}]},
        {"type": "namespace", "name": "solo", "description": "", "tools": [{"type": "function", "name": "only"}]},
    ]
    table = UpstreamToolTable(ToolCatalog.from_request(parse_request({"model": "m", "input": "hi", "tools": tools})))
    raw_input = {"type": "object", "properties": {"input": {"type": "string"}}}
    assert offered_tools(table) == {
        "bare": {},
        "apply_patch": raw_input,
        "one__run": run["parameters"],
        "two__run": {"type": "object"},
        "solo__only": {},
        # A tool's own or dotted name, when only one tool has it ("run" is two tools' name).
        "one.run": run["parameters"],
        "two.run": {"type": "object"},
        "only": {},
        "solo.only": {},
    }


@pytest.mark.parametrize(
    "piece",
    [
        "<tool_call>\n<div>not a function</div>\n",  # a tag that is no <function=
        "<tool_call>\n<function=no_tool_is_named_like_this",  # a name no offered tool begins with
    ],
)
def test_a_qwen3_coder_block_that_cannot_be_a_call_is_text_at_once(piece: str) -> None:
    assert released_at_once(piece).startswith("<tool_call>")


def released_at_once(piece: str) -> str:
    """The text a recognizer passes on from ``piece`` alone, the stream not ended."""
    recognizer = TextCallRecognizer(OFFERED, frozenset(FAMILIES))
    return "".join(out.text for out in recognizer.feed(piece) if isinstance(out, Text))


@pytest.mark.parametrize(
    "piece",
    [
        '<tool_call>{"name": "rm_rf", "arg',  # no tool's name begins so
        '<tool_call>\n{"name": "rm_rf", ',  # the same after a line break
        '<tool_call>{"name": "exec", "argu',  # a whole name, though a tool's name begins with it
    ],
)
def test_a_hermes_call_naming_no_tool_is_text_at_once(piece: str) -> None:
    assert released_at_once(piece).startswith("<tool_call>")


def test_an_unknown_text_call_setting_names_the_known_ones() -> None:
    with pytest.raises(ValueError) as refused:
        families_for("bogus")
    assert str(refused.value) == f"unknown tool_call_text 'bogus' (known: auto, off, {', '.join(FAMILIES)})"


@pytest.mark.parametrize(
    "piece",
    [
        "[TOOL_CALLS]exec_command[ANOTHER]abc",  # neither [ARGS] nor [CALL_ID] after the name
        "[TOOL_CALLS]exec_command[CALL_ID]not an id!",  # no id has spaces or "!"
        "[TOOL_CALLS]rm_r",  # no tool's name begins so
    ],
)
def test_a_mistral_call_that_cannot_be_one_is_text_at_once(piece: str) -> None:
    assert released_at_once(piece).startswith("[TOOL_CALLS]")


def test_a_hermes_call_on_its_way_is_waited_on() -> None:
    assert released_at_once('<tool_call>{"name": "exec_comm') == ""


KIMI_CALL = "<|tool_calls_section_begin|><|tool_call_begin|>"


@pytest.mark.parametrize(
    "head",
    [
        "functions.exec:",  # an index begun: the name is whole, and no tool is named exec
        "functions.exec command",  # no tool name has a space
        "xyz",  # no tool's name begins so
        "functions.rm:0<|tool_call_argument_begin|>{",  # whole, with its index: rm is no tool
        "<|tool_call_argument_begin|>{",  # no name at all
    ],
)
def test_a_kimi_call_whose_head_cannot_name_a_tool_is_text_at_once(head: str) -> None:
    assert released_at_once(KIMI_CALL + head).startswith(KIMI_CALL)


@pytest.mark.parametrize("head", ["functions.exec_com", "functions.exec_command:", "functions.exec_command:0<|tool_call_argument_begin|>{"])
def test_a_kimi_call_on_its_way_is_waited_on(head: str) -> None:
    assert released_at_once(KIMI_CALL + head) == ""


def test_a_kimi_section_followed_by_what_is_no_call_is_text_at_once() -> None:
    section = KIMI_CALL + 'functions.list_agents:0<|tool_call_argument_begin|>{}<|tool_call_end|>'
    assert released_at_once(section + "and then some prose").startswith("<|tool_calls_section_begin|>")


def test_a_section_whose_end_never_came_is_read_at_the_end_and_named_by_its_family() -> None:
    recognizer = TextCallRecognizer(OFFERED, frozenset(FAMILIES))
    out = recognizer.feed(KIMI_CALL + "functions.list_agents:0<|tool_call_argument_begin|>{}<|tool_call_end|>")
    out += recognizer.flush()
    assert signals(out) == [call("list_agents")] and recognizer.recognized == ["kimi_k2"]


def test_a_glm_call_whose_value_does_not_open_is_text_at_once() -> None:
    """What can no longer be a call is passed on as it streams, not held to the end."""
    recognizer = TextCallRecognizer(OFFERED, frozenset(FAMILIES))
    released = recognizer.feed("<tool_call>exec_command\n<arg_key>cmd</arg_key>\nls -la\n")
    assert "".join(piece.text for piece in released if isinstance(piece, Text)).startswith("<tool_call>exec_command")


def test_a_glm_name_streamed_with_a_space_after_it_is_waited_on() -> None:
    """Space after a name that may still be a tool's is not the end of the call."""
    pieces = ["<tool_call>exec_command ", "\n<arg_key>cmd</arg_key>\n<arg_value>ls</arg_value>\n</tool_call>"]
    assert recognize(pieces) == [call("exec_command", cmd="ls")]


@pytest.mark.parametrize(("content", "expected"), [pytest.param(c, e, id=i) for i, c, e in RECOGNIZED])
def test_calls_are_recognized(content: str, expected: list[Signal]) -> None:
    assert recognize([content]) == expected


@pytest.mark.parametrize("content", [pytest.param(c, id=i) for i, c in STAYS_TEXT])
def test_what_is_not_a_call_stays_text_exactly(content: str) -> None:
    assert recognize([content]) == [text(content)]


ALL_CASES = [content for _, content, _ in RECOGNIZED] + [content for _, content in STAYS_TEXT]


@pytest.mark.parametrize("content", [pytest.param(c, id=str(n)) for n, c in enumerate(ALL_CASES)])
def test_every_single_split_and_one_character_at_a_time_give_the_same(content: str) -> None:
    whole = recognize([content])
    assert recognize(list(content)) == whole
    for cut in range(1, len(content)):
        assert recognize([content[:cut], content[cut:]]) == whole, cut


def pieces_of(draw: st.DrawFn, content: str, max_cuts: int = 12) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(1, max(len(content) - 1, 1)), max_size=max_cuts)))
    bounds = [0, *[c for c in cuts if c < len(content)], len(content)]
    return [content[a:b] for a, b in itertools.pairwise(bounds) if a < b]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=st.sampled_from(ALL_CASES), data=st.data())
def test_any_split_gives_the_same(content: str, data: st.DataObject) -> None:
    assert recognize(pieces_of(data.draw, content)) == recognize([content])


# ---------------------------------------------------------------- generated calls

_PROSE = st.text(alphabet="abcxyz <[|{}\n\uff5c\u2581é中😀", max_size=30)
_VALUES = st.text(alphabet='ab "\\\n{}[]<>|/`\uff5c\u2581é中😀', max_size=20)
_GENERATED_TOOLS = {
    "exec_command": st.fixed_dictionaries({"cmd": _VALUES}, optional={"yield_time_ms": st.integers(0, 10**6)}),
    "apply_patch": st.fixed_dictionaries({"input": _VALUES}),
    "collaboration__send_message": st.fixed_dictionaries({"to": st.integers(0, 99), "text": _VALUES}),
    "list_agents": st.just({}),
}


@st.composite
def generated_calls(draw: st.DrawFn) -> list[tuple[str, dict[str, Any]]]:
    names = draw(st.lists(st.sampled_from(sorted(_GENERATED_TOOLS)), min_size=1, max_size=3))
    return [(name, draw(_GENERATED_TOOLS[name])) for name in names]


def _raw_safe(style: str, calls: list[tuple[str, dict[str, Any]]]) -> bool:
    """Raw values (Qwen3-Coder, GLM) cannot hold their own closing tag: a model cannot
    write those either."""
    if style not in ("qwen3_coder", "glm45"):
        return True
    return not any(
        isinstance(value, str) and "</" in value for _, arguments in calls for value in arguments.values()
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    style=st.sampled_from(STYLES),
    calls=generated_calls(),
    before=_PROSE,
    after=_PROSE,
    data=st.data(),
)
def test_generated_calls_between_prose(
    style: str, calls: list[tuple[str, dict[str, Any]]], before: str, after: str, data: st.DataObject
) -> None:
    """Prose (with marker-like characters), calls in ``style``, prose; split anywhere."""
    if not _raw_safe(style, calls):
        return
    content = before + written(style, calls) + after
    expected: list[Signal] = [text(before)] if before.strip() else []
    ids = iter(f"abcDEF12{n}" for n in range(len(calls))) if style == "mistral_v11" else itertools.repeat(None)
    expected += [call(name, next(ids), **arguments) for name, arguments in calls]
    if after.strip():
        expected.append(text(after.lstrip()))
    assert recognize([content]) == expected
    assert recognize(pieces_of(data.draw, content, max_cuts=20)) == expected
    only_its_family = frozenset({family_of(style)})
    assert recognize([content], only_its_family) == expected


@pytest.mark.parametrize("style", STYLES)
def test_a_family_not_read_stays_text(style: str) -> None:
    content = written(style, [("exec_command", {"cmd": "ls"})])
    others = frozenset(FAMILIES) - {family_of(style)}
    assert recognize([content], others) == [text(content)]


# ---------------------------------------------------------------- holding back


def _held(prose: str, openers: tuple[str, ...]) -> int:
    """How much of ``prose``'s end could still begin a marker: the longest such end."""
    for length in range(min(len(prose), max(map(len, openers))), 0, -1):
        if any(opener.startswith(prose[-length:]) and opener != prose[-length:] for opener in openers):
            return length
    return 0


OPENERS = (
    "<tool_call>",
    "[TOOL_CALLS]",
    DS_BEGIN,
    "<|tool_calls_section_begin|>",
    "<|tool_call_section_begin|>",
)
_MARKERISH = st.text(alphabet="ab <[|_tolcsTOLCSAeginb\uff5c\u2581\n", min_size=1, max_size=40)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prose=_MARKERISH.filter(lambda p: not p[0].isspace()), data=st.data())
def test_text_is_held_back_only_while_it_could_begin_a_marker(prose: str, data: st.DataObject) -> None:
    if any(opener in prose for opener in OPENERS):
        return
    recognizer = TextCallRecognizer(OFFERED)
    out: list[Text | CallFragment] = []
    fed = ""
    for piece in pieces_of(data.draw, prose):
        out += recognizer.feed(piece)
        fed += piece
        passed = "".join(signal.text for signal in out if isinstance(signal, Text))
        assert passed == fed[: len(fed) - _held(fed, OPENERS)]
    out += recognizer.flush()
    assert signals(out) == [text(prose)]


def test_inside_code_nothing_is_held() -> None:
    recognizer = TextCallRecognizer(OFFERED)
    assert signals(recognizer.feed("```\n<tool_ca")) == [text("```\n<tool_ca")]
    assert signals(recognizer.feed("ll>{}")) == [text("ll>{}")]


def test_a_block_is_decided_as_soon_as_it_cannot_be_a_call() -> None:
    recognizer = TextCallRecognizer(OFFERED)
    assert signals(recognizer.feed("<tool_call>x")) == [text("<tool_call>x")]  # no tool name starts so
    recognizer = TextCallRecognizer(OFFERED)
    assert signals(recognizer.feed("<tool_call>e")) == []  # "e" could begin exec_command
    assert signals(recognizer.feed("xit")) == [text("<tool_call>exit")]


@pytest.mark.parametrize("style", STYLES)
def test_a_long_call_comes_out_with_the_chunk_that_ends_it(style: str) -> None:
    """Not at the end of the answer: the call is decided as soon as its text is whole."""
    patch = "".join(f'+print("line {n}", {{x}}) <b>\n' for n in range(200))
    content = written(style, [("apply_patch", {"input": patch})] * 2)
    recognizer = TextCallRecognizer(OFFERED)
    calls_by_chunk = []
    for start in range(0, len(content), 5):
        out = recognizer.feed(content[start : start + 5])
        calls_by_chunk.append(sum(isinstance(signal, CallFragment) for signal in out))
    assert sum(calls_by_chunk) == 2, "both calls are out before the answer ends"
    assert recognizer.flush() == []


def test_a_long_call_is_recognized_in_small_chunks() -> None:
    patch = "*** Begin Patch\n*** Add File: big.txt\n" + "".join(f"+line {n} <b>{{x}}</b>\n" for n in range(3000)) + "*** End Patch\n"
    content = written("hermes", [("apply_patch", {"input": patch})])
    pieces = [content[i : i + 4] for i in range(0, len(content), 4)]
    assert recognize(pieces) == [call("apply_patch", input=patch)]


# ---------------------------------------------------------------- the setting and the tools


def test_families_for_each_setting() -> None:
    assert families_for("auto") == frozenset(FAMILIES)
    assert families_for("off") == frozenset()
    assert families_for("glm45") == frozenset({"glm45"})
    with pytest.raises(ValueError, match="unknown tool_call_text 'qwen'"):
        families_for("qwen")


def test_offered_names_and_schemas() -> None:
    assert OFFERED["exec_command"] == EXEC_COMMAND["parameters"]
    assert OFFERED["apply_patch"]["properties"] == {"input": {"type": "string"}}
    assert OFFERED["collaboration__list_agents"] is OFFERED["list_agents"]
    assert OFFERED["collaboration.send_message"] is OFFERED["collaboration__send_message"]


def first_decided(content: str) -> int:
    """The shortest start of ``content`` that, fed at once, gives a call."""
    low, high = 1, len(content)
    while low < high:
        middle = (low + high) // 2
        if any(isinstance(s, CallFragment) for s in TextCallRecognizer(OFFERED).feed(content[:middle])):
            high = middle
        else:
            low = middle + 1
    return low


@pytest.mark.parametrize("style", STYLES)
def test_a_long_call_is_out_with_the_chunk_that_completes_it_wherever_its_end_is_cut(style: str) -> None:
    """Past its head a block is read again only when an ending arrives: an ending cut
    anywhere between two chunks is still seen, and the call comes out at once."""
    patch = "".join(f"+line {n}\n" for n in range(60))
    content = written(style, [("apply_patch", {"input": patch})]) + "\nDone."
    whole = first_decided(content)
    assert whole > 300  # (past the head, where every chunk is read)
    for cut in range(whole - 40, whole):
        recognizer = TextCallRecognizer(OFFERED)
        assert not any(isinstance(s, CallFragment) for s in recognizer.feed(content[:cut]))
        out = recognizer.feed(content[cut:whole])
        assert [s.name for s in out if isinstance(s, CallFragment)] == ["apply_patch"], (style, cut)


def test_after_a_flush_the_content_starts_again() -> None:
    """Something other than content came (reasoning, a native call): space before a call
    written next is layout again, as at the start of the answer."""
    recognizer = TextCallRecognizer(OFFERED)
    out = recognizer.feed("Hi.") + recognizer.flush()
    out += recognizer.feed(" \n") + recognizer.feed('<tool_call>{"name": "exec_command", "arguments": {}}</tool_call>')
    assert signals(out + recognizer.flush()) == [text("Hi."), call("exec_command")]
    recognizer = TextCallRecognizer(OFFERED)
    out = recognizer.feed("Hi.") + recognizer.flush() + recognizer.feed(" \n") + recognizer.flush()
    assert signals(out) == [text("Hi. \n")]  # (nothing but space followed: it stays, as at the start)


def test_a_glm_call_is_read_whatever_letter_its_tool_begins_with() -> None:
    """After ``<tool_call>`` only ``{``/``[`` (Hermes) and ``<`` (Qwen3-Coder) mean another family."""
    offered = {name: {"type": "object", "properties": {"depth": {"type": "integer"}}} for name in ("Xray", "XX")}
    for name in offered:
        recognizer = TextCallRecognizer(offered)
        out = recognizer.feed(written("glm45", [(name, {"depth": 2})])) + recognizer.flush()
        assert signals(out) == [call(name, depth=2)], name


@pytest.mark.parametrize(
    ("head", "held"),
    [
        ("exec_command", True),  # the separator may come next
        ("exec_command" + DS_SEP[:4], True),  # and has begun
        ("exec_commandz", False),  # no tool is named so, and no separator has begun
        ("exec_com" + DS_SEP[:4], False),  # a separator after a name no tool has
        ("function" + DS_SEP[:3], True),  # V3/R1's "function", then the tool's name
    ],
)
def test_a_deepseek_call_whose_head_cannot_name_a_tool_is_text_at_once(head: str, held: bool) -> None:
    released = released_at_once(DS_BEGIN + DS_CALL + head)
    assert released == "" if held else released.startswith(DS_BEGIN + DS_CALL)  # (a marker's start is held)


def test_a_deepseek_call_to_a_tool_named_function_in_the_newer_format() -> None:
    """V3.1's ``name<sep>{...}`` for a tool named ``function``, space before its JSON."""
    offered = {"function": {"type": "object", "properties": {"a": {"type": "integer"}}}}
    recognizer = TextCallRecognizer(offered)
    content = DS_BEGIN + DS_CALL + "function" + DS_SEP + ' \n{"a": 1}' + DS_CALL_END + DS_END
    assert signals(recognizer.feed(content) + recognizer.flush()) == [call("function", a=1)]


HERMES_LS = '<tool_call>{"name": "exec_command", "arguments": {"cmd": "ls"}}</tool_call>'


class _FullReading(TextCallRecognizer):
    """A recognizer that never takes its fast path: every piece is read in full."""

    def passes(self, text: str) -> bool:
        return False


@pytest.mark.parametrize(
    ("pieces", "passing"),
    [
        (["Hello"], [True]),  # the content's first text, nothing held: as it is (most answers)
        (["  Hello", " world"], [True, True]),  # its leading space is text too
        (["  ", "Hello"], [False, False]),  # space alone is held; what follows is read with it
        (["\n", "\n"], [False, False]),
        (["Hi <tool", "_call> is a tag"], [False, False]),  # a marker's start is held, then read
        (["Hello", "\x00FLUSH", "again"], [True, None, True]),  # content begins again after a flush
        ([HERMES_LS, " done", " now"], [False, False, True]),  # after a call its space is dropped
    ],
)
def test_text_passes_as_it_is_exactly_when_reading_it_would_give_it_back(
    pieces: list[str], passing: list[bool | None]
) -> None:
    """``passes`` is the recognizer's fast path: where it says yes, the full reading (a
    twin fed the same) gives the text back whole, and it says yes where it can."""
    fast, read = TextCallRecognizer(OFFERED), _FullReading(OFFERED)
    for piece, passes in zip(pieces, passing, strict=True):
        if piece == "\x00FLUSH":
            assert signals(fast.flush()) == signals(read.flush())
            continue
        read_out = read.feed(piece)
        assert fast.passes(piece) is passes
        if passes:
            assert read_out == [Text(piece)]
        else:
            assert signals(fast.feed(piece)) == signals(read_out)
