"""Recover a custom (freeform) tool's raw input from the function-call arguments a model wrote.

A Chat backend knows only JSON-argument functions, so a custom tool such as Codex's
``apply_patch`` or code-mode ``exec`` is offered upstream as a function taking
``{"input": "<raw text>"}``. Models get that wrapper wrong in a handful of ways;
``recover_custom_input`` undoes each of them and never raises:

* ``{"input": "..."}``: the normal case, no conversion;
* a JSON object with one string field under another key (``{"patch": "..."}``);
* a JSON-encoded string (``"\\"*** Begin Patch ...\\""``);
* raw text that is not JSON at all (the model ignored the wrapper);
* any of the above wrapped in one markdown code fence;
* for the code-mode ``exec`` tool (JavaScript), a legacy shell call such as
  ``{"cmd": "pwd", "workdir": "/tmp"}`` or ``{"command": ["bash", "-lc", "ls"]}``,
  rewritten into JavaScript that runs ``tools.exec_command`` and prints its result.

When the tool declares a grammar (Lark or a regex), the candidates are checked against
it and the first one that matches wins; otherwise, or if none matches, the first
candidate does. Compiled Lark parsers are cached by grammar text.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

import lark
from lark.exceptions import LarkError

from toolwire.protocol import CustomTool, GrammarFormat

__all__ = ["RecoveredInput", "recover_custom_input"]


@dataclass(frozen=True, slots=True)
class RecoveredInput:
    """The raw input for the client, and what was done to get it (None: nothing)."""

    text: str
    conversion: str | None


def recover_custom_input(arguments: str, tool: CustomTool) -> RecoveredInput:
    """The raw input a model meant to give ``tool``, from the arguments it wrote."""
    candidates = _candidates(arguments, tool)
    grammar = tool.format if isinstance(tool.format, GrammarFormat) else None
    if grammar is not None:
        for candidate in candidates:
            if _matches(grammar, candidate.text):
                return candidate
    return candidates[0]


# ---------------------------------------------------------------- candidates


def _candidates(arguments: str, tool: CustomTool) -> list[RecoveredInput]:
    """Every plausible reading of ``arguments``, the likeliest first."""
    exec_tool = _is_code_mode_exec(tool)
    unwrapped = _unwrap(arguments, exec_tool)
    candidates: list[RecoveredInput] = []
    for candidate in unwrapped:
        fenced = _strip_fence(candidate.text)
        if fenced is not None:
            candidates.append(_also(candidate, fenced, "markdown fences stripped"))
        candidates.append(candidate)
    # Only a grammar can tell these apart from the first candidate, so they come last.
    for candidate in list(candidates):
        trimmed = candidate.text.strip("\r\n\t ")
        if trimmed and trimmed != candidate.text:
            candidates.append(_also(candidate, trimmed, "surrounding whitespace trimmed"))
            candidates.append(_also(candidate, trimmed + "\n", "surrounding whitespace trimmed"))
    unique: dict[str, RecoveredInput] = {}
    for candidate in candidates:
        unique.setdefault(candidate.text, candidate)
    return list(unique.values())


def _unwrap(arguments: str, exec_tool: bool) -> list[RecoveredInput]:
    """The readings of the JSON wrapper (or of its absence), the likeliest first."""
    value = _loads(arguments)
    if value is _NOT_JSON:
        raw = RecoveredInput(arguments, None if not arguments else "custom input was raw text")
        partial = _broken_wrapper(arguments)
        if partial is None:
            return [raw]
        return [
            _inner(partial, exec_tool, "custom input recovered from a broken JSON wrapper"),
            raw,
        ]
    if isinstance(value, str):
        return [_inner(value, exec_tool, "custom input was a JSON string")]
    if not isinstance(value, dict):
        return [RecoveredInput(arguments, "custom input was raw JSON")]
    if exec_tool:
        legacy = _legacy_exec(value)
        if legacy is not None:
            return [RecoveredInput(legacy, "legacy exec JSON rewritten")]
    inner = value.get("input")
    if isinstance(inner, str):
        return [_inner(inner, exec_tool, None)]
    if exec_tool and isinstance(inner, dict):
        legacy = _legacy_exec(inner)
        if legacy is not None:
            return [RecoveredInput(legacy, "legacy exec JSON rewritten")]
    strings = [(key, field) for key, field in value.items() if isinstance(field, str)]
    if len(value) == 1 and len(strings) == 1:
        key, field = strings[0]
        return [_inner(field, exec_tool, f"custom input unwrapped from '{key}'")]
    return [RecoveredInput(arguments, "custom input was raw JSON")]


def _inner(text: str, exec_tool: bool, conversion: str | None) -> RecoveredInput:
    """A string taken out of the wrapper; for ``exec``, itself possibly a legacy call."""
    if exec_tool and text.lstrip().startswith("{"):
        value = _loads(text)
        if isinstance(value, dict):
            legacy = _legacy_exec(value)
            if legacy is not None:
                return RecoveredInput(legacy, "legacy exec JSON rewritten")
    return RecoveredInput(text, conversion)


def _also(candidate: RecoveredInput, text: str, conversion: str) -> RecoveredInput:
    joined = conversion if candidate.conversion is None else f"{candidate.conversion}; {conversion}"
    return RecoveredInput(text, joined)


_NOT_JSON: Any = object()


def _loads(text: str) -> Any:
    """``text`` as JSON; raw control characters inside strings are tolerated. ``_NOT_JSON`` if not."""
    try:
        return json.loads(text, strict=False)
    except (ValueError, RecursionError):
        return _NOT_JSON


_WRAPPER_START = re.compile(r'\A\s*\{\s*"input"\s*:\s*"')
_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*')


def _broken_wrapper(text: str) -> str | None:
    """The ``input`` string of a wrapper that is not valid JSON (truncated, trailing junk)."""
    start = _WRAPPER_START.match(text)
    if start is None:
        return None
    body = _STRING_BODY.match(text, start.end())
    assert body is not None  # the pattern matches the empty string
    encoded = body.group(0)
    for end in range(len(encoded), max(len(encoded) - 6, -1), -1):
        # A truncated escape (``\u12``) at the end is dropped.
        value = _loads('"' + encoded[:end] + '"')
        if isinstance(value, str):
            return value
    return None


_FENCE = re.compile(r"\A\s*```[^\n`]*\n(?P<body>.*?)\n?```\s*\Z", re.DOTALL)


def _strip_fence(text: str) -> str | None:
    """The body of ``text`` if all of it is one markdown code fence."""
    match = _FENCE.match(text)
    if match is None or "```" in match.group("body"):
        return None
    return match.group("body") + ("\n" if text.rstrip().endswith("\n```") else "")


# ---------------------------------------------------------------- code-mode exec


def _is_code_mode_exec(tool: CustomTool) -> bool:
    """Codex's code-mode ``exec``: a custom tool named exec that takes JavaScript."""
    if tool.name != "exec":
        return False
    definition = tool.format.definition if isinstance(tool.format, GrammarFormat) else ""
    described = f"{tool.description or ''}\n{definition}".lower()
    return "javascript" in described or "@exec" in described


# Arguments of Codex's exec_command that a legacy shell call may carry over.
_EXEC_COMMAND_FIELDS = (
    "workdir",
    "tty",
    "yield_time_ms",
    "max_output_tokens",
    "shell",
    "login",
    "sandbox_permissions",
    "justification",
    "prefix_rule",
)


def _legacy_exec(value: dict[str, Any]) -> str | None:
    """JavaScript that runs the shell call ``value`` describes, or None if it is not one.

    ``{"cmd": "ls", "workdir": "/tmp"}`` (exec_command), ``{"command": "ls"}``
    (shell_command) and ``{"command": ["bash", "-lc", "ls"]}`` (the argv ``shell`` tool).
    """
    command = value.get("cmd", value.get("command"))
    if isinstance(command, list) and command and all(isinstance(part, str) for part in command):
        command = _argv_to_command(command)
    if not isinstance(command, str) or not command.strip():
        return None
    arguments: dict[str, Any] = {"cmd": command}
    if "workdir" not in value and isinstance(value.get("cwd"), str):
        arguments["workdir"] = value["cwd"]
    for field in _EXEC_COMMAND_FIELDS:
        if field in value:
            arguments[field] = value[field]
    call = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    return (
        f"const result = await tools.exec_command({call});\n"
        'text(typeof result === "string" ? result : JSON.stringify(result));'
    )


def _argv_to_command(argv: list[str]) -> str:
    """``["bash", "-lc", "ls -la"]`` -> ``ls -la``; any other argv is shell-quoted."""
    if (
        len(argv) == 3
        and argv[0].rsplit("/", 1)[-1] in {"bash", "sh", "zsh"}
        and argv[1] in {"-c", "-lc"}
    ):
        return argv[2]
    return shlex.join(argv)


# ---------------------------------------------------------------- grammars

_MAX_CHECKED_LENGTH = 200_000
_MAX_CACHED_PARSERS = 32
_PARSERS: dict[str, lark.Lark | None] = {}
"""Compiled Lark parsers by grammar text; None for a grammar that does not compile."""


def _matches(grammar: GrammarFormat, text: str) -> bool:
    """Whether ``text`` is in the grammar's language. An uncheckable grammar accepts all."""
    if len(text) > _MAX_CHECKED_LENGTH:
        return True
    if grammar.syntax == "regex":
        try:
            return re.fullmatch(grammar.definition, text) is not None
        except re.error:
            return True
    parser = _lark_parser(grammar.definition)
    if parser is None:
        return True
    try:
        parser.parse(text)
    except (LarkError, RecursionError):
        return False
    return True


def _lark_parser(definition: str) -> lark.Lark | None:
    if definition in _PARSERS:
        return _PARSERS[definition]
    parser = _compile(definition)
    if len(_PARSERS) >= _MAX_CACHED_PARSERS:
        _PARSERS.pop(next(iter(_PARSERS), ""), None)
    _PARSERS[definition] = parser
    return parser


def _compile(definition: str) -> lark.Lark | None:
    """LALR when the grammar allows it (fast, linear), else Earley; None if neither compiles.

    Lark refuses regexes that can match the empty string, which grammars written for
    other engines use (Codex's apply_patch: ``"+" /(.*)/ LF``); such a regex inside a
    rule is rewritten to the equivalent optional non-empty one (``(/(.+)/)?``) first.
    """
    for text in dict.fromkeys((definition, _without_empty_regexes(definition))):
        for algorithm in ("lalr", "earley"):
            try:
                return lark.Lark(text, parser=algorithm)
            except (LarkError, re.error, ValueError, TypeError, RecursionError):
                continue
    return None


# A regex literal ``/.../flags`` and a single regex atom repeated with ``*``.
_REGEX_LITERAL = re.compile(r"/((?:\\.|[^/\\\n])+)/([imslux]*)")
_STARRED_ATOM = re.compile(r"(\((?:\?:)?)?(\.|\[(?:\\.|[^\]\\])+\]|\\[A-Za-z])\*(\))?")


def _without_empty_regexes(definition: str) -> str:
    def rewrite(match: re.Match[str]) -> str:
        pattern, flags = match.group(1), match.group(2)
        starred = _STARRED_ATOM.fullmatch(pattern)
        if starred is None or bool(starred.group(1)) != bool(starred.group(3)):
            return match.group(0)
        open_group, atom, close_group = (
            starred.group(1) or "",
            starred.group(2),
            starred.group(3) or "",
        )
        return f"(/{open_group}{atom}+{close_group}/{flags})?"

    return _REGEX_LITERAL.sub(rewrite, definition)
