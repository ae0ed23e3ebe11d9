"""How model families write tool calls into text: one small parser per family.

A model server without a tool parser (vLLM without ``--tool-call-parser``, llama.cpp
without a tool template, ...) passes the model's call syntax through as ``content``.
Each parser here reads the text after one opening marker and answers with a verdict
(``_text_call_reader``: more text needed, not a call, or the block found), and
``OPENERS`` lists the markers with their parsers.

The formats (vLLM's and llama.cpp's parsers read the same ones):

===============  ===============================================================
``hermes``       ``<tool_call>{"name": N, "arguments": {...}}</tool_call>``
                 (``parameters`` for ``arguments``, or a list of such objects)
``qwen3_coder``  ``<tool_call><function=N><parameter=K>raw</parameter></function></tool_call>``
``glm45``        ``<tool_call>N<arg_key>K</arg_key><arg_value>raw</arg_value></tool_call>``
``mistral``      ``[TOOL_CALLS]N[ARGS]{...}`` (``[CALL_ID]id`` before ``[ARGS]`` in v11),
                 older ``[TOOL_CALLS][{"name": N, "arguments": {...}}]``
``deepseek``     ``<|tool▁calls▁begin|><|tool▁call▁begin|>N<|tool▁sep|>{...}<|tool▁call▁end|>
                 <|tool▁calls▁end|>``, the bars being U+FF5C (fullwidth); V3/R1 write
                 ``function<|tool▁sep|>N`` and the arguments in a fenced ```` ```json ```` block
``kimi_k2``      ``<|tool_calls_section_begin|><|tool_call_begin|>functions.N:0
                 <|tool_call_argument_begin|>{...}<|tool_call_end|><|tool_calls_section_end|>``
===============  ===============================================================

Raw parameter values (Qwen3-Coder, GLM) are converted by the tool's JSON schema: a
string parameter keeps the text, any other type is read as JSON (a value that does not
read stays text, so the client can tell the model what is wrong).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from ._text_call_reader import (
    JSON,
    MORE,
    NOT_A_CALL,
    Found,
    Opener,
    Pending,
    Reader,
    TextCall,
    Verdict,
    call_from_json,
    converted,
    json_value,
    property_schema,
    skip_space,
    starts,
    text_call,
)

# ---------------------------------------------------------------- <tool_call>: Hermes, Qwen3-Coder, GLM

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
_FIRST_NAME = re.compile(r'\{\s*"name"\s*:\s*"([^"\\]*)(")?')


def parse_tool_call_tag(body: str, reader: Reader, at_end: bool) -> Verdict:
    """After ``<tool_call>``: JSON (Hermes), ``<function=`` (Qwen3-Coder) or a name (GLM)."""
    pos = skip_space(body, 0)
    if pos == len(body):
        return MORE
    first = body[pos]
    if first in "{[":
        return _hermes(body, pos, reader, at_end) if "hermes" in reader.families else NOT_A_CALL
    if first == "<":
        if "qwen3_coder" in reader.families:
            return _qwen3_coder(body, pos, reader, at_end)
        return NOT_A_CALL
    return _glm(body, pos, reader) if "glm45" in reader.families else NOT_A_CALL


def _close_tag(body: str, pos: int, at_end: bool) -> int | Pending:
    """The end of ``</tool_call>`` after ``pos`` (and space); at the end, a missing one."""
    pos = skip_space(body, pos)
    start = starts(body, pos, TOOL_CALL_CLOSE)
    if start == "yes":
        return pos + len(TOOL_CALL_CLOSE)
    if start == "partial":
        return len(body) if at_end else MORE
    return NOT_A_CALL


def _hermes(body: str, pos: int, reader: Reader, at_end: bool) -> Verdict:
    end = reader.json_end(body, pos)
    if end is None:
        first = _FIRST_NAME.match(body, pos)
        if first is not None:
            name = first.group(1)
            named = name in reader.offered if first.group(2) else reader.could_name(name)
            if not named:
                return NOT_A_CALL
        return MORE
    if end < 0:
        return NOT_A_CALL
    close = _close_tag(body, end, at_end)
    if isinstance(close, Pending):
        return close
    value = json_value(body[pos:end])
    objects = value if isinstance(value, list) else [value]
    calls: list[TextCall] = []
    for entry in objects:
        if not isinstance(entry, dict):
            return NOT_A_CALL
        arguments = entry.get("arguments", entry.get("parameters"))
        call = text_call(reader, entry.get("name"), arguments)
        if call is None:
            return NOT_A_CALL
        calls.append(call)
    return Found(tuple(calls), close, "hermes") if calls else NOT_A_CALL


_FUNCTION = "<function="
_PARAMETER, _PARAMETER_CLOSE = "<parameter=", "</parameter>"
_FUNCTION_CLOSE = "</function>"


def _qwen3_coder(body: str, pos: int, reader: Reader, at_end: bool) -> Verdict:
    start = starts(body, pos, _FUNCTION)
    if start != "yes":
        return MORE if start == "partial" else NOT_A_CALL
    pos += len(_FUNCTION)
    name_end = body.find(">", pos)
    if name_end < 0:
        return MORE if reader.could_name(body[pos:].strip()) else NOT_A_CALL
    name = body[pos:name_end].strip()
    parameters = reader.offered.get(name)
    if parameters is None:
        return NOT_A_CALL
    arguments: JSON = {}
    pos = name_end + 1
    while True:
        pos = skip_space(body, pos)
        if body.startswith(_PARAMETER, pos):
            key_end = body.find(">", pos)
            value_end = body.find(_PARAMETER_CLOSE, key_end) if key_end >= 0 else -1
            if value_end < 0:
                return MORE
            key = body[pos + len(_PARAMETER) : key_end].strip()
            raw = body[key_end + 1 : value_end]
            raw = raw[1:] if raw.startswith("\n") else raw
            raw = raw[:-1] if raw.endswith("\n") else raw
            arguments[key] = converted(raw, property_schema(parameters, key))
            pos = value_end + len(_PARAMETER_CLOSE)
            continue
        closing = starts(body, pos, _FUNCTION_CLOSE)
        if closing == "yes":
            close = _close_tag(body, pos + len(_FUNCTION_CLOSE), at_end)
            if isinstance(close, Pending):
                return close
            call = TextCall(name, orjson.dumps(arguments).decode())
            return Found((call,), close, "qwen3_coder")
        if closing == "partial" or starts(body, pos, _PARAMETER) == "partial":
            return MORE
        return NOT_A_CALL


_NAME_END = re.compile(r"[<\n]")
_ARG_KEY, _ARG_KEY_CLOSE = "<arg_key>", "</arg_key>"
_ARG_VALUE, _ARG_VALUE_CLOSE = "<arg_value>", "</arg_value>"


def _glm(body: str, pos: int, reader: Reader) -> Verdict:
    stop = _NAME_END.search(body, pos)
    if stop is None:
        return MORE if reader.could_name(body[pos:].rstrip()) else NOT_A_CALL
    name = body[pos : stop.start()].strip()
    parameters = reader.offered.get(name)
    if parameters is None:
        return NOT_A_CALL
    arguments: JSON = {}
    pos = stop.start()
    while True:
        pos = skip_space(body, pos)
        if body.startswith(_ARG_KEY, pos):
            key_end = body.find(_ARG_KEY_CLOSE, pos)
            if key_end < 0:
                return MORE
            key = body[pos + len(_ARG_KEY) : key_end].strip()
            pos = skip_space(body, key_end + len(_ARG_KEY_CLOSE))
            opening = starts(body, pos, _ARG_VALUE)
            if opening != "yes":
                return MORE if opening == "partial" else NOT_A_CALL
            value_end = body.find(_ARG_VALUE_CLOSE, pos)
            if value_end < 0:
                return MORE
            raw = body[pos + len(_ARG_VALUE) : value_end]
            arguments[key] = converted(raw, property_schema(parameters, key))
            pos = value_end + len(_ARG_VALUE_CLOSE)
            continue
        closing = starts(body, pos, TOOL_CALL_CLOSE)
        if closing == "yes":
            call = TextCall(name, orjson.dumps(arguments).decode())
            return Found((call,), pos + len(TOOL_CALL_CLOSE), "glm45")
        if closing == "partial" or starts(body, pos, _ARG_KEY) == "partial":
            return MORE
        return NOT_A_CALL


# ---------------------------------------------------------------- [TOOL_CALLS]: Mistral

MISTRAL_OPEN = "[TOOL_CALLS]"
_ARGS, _CALL_ID = "[ARGS]", "[CALL_ID]"
_MISTRAL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MISTRAL_ID_SO_FAR = re.compile(r"[A-Za-z0-9_-]{0,64}(?:\[A?R?G?S?)?")  # an id, maybe "[ARGS" begun


def parse_mistral(body: str, reader: Reader, at_end: bool) -> Verdict:
    """After ``[TOOL_CALLS]``: ``N[ARGS]{...}`` (v11+, maybe ``[CALL_ID]id``) or a JSON list."""
    pos = skip_space(body, 0)
    if pos == len(body):
        return MORE
    if body[pos] == "[":
        end = reader.json_end(body, pos)
        if end is None:
            return MORE
        value = json_value(body[pos:end]) if end > 0 else None
        if not isinstance(value, list) or not value:
            return NOT_A_CALL
        calls = [
            text_call(reader, e.get("name"), e.get("arguments"), e.get("id")) if isinstance(e, dict) else None
            for e in value
        ]
        if any(call is None for call in calls):
            return NOT_A_CALL
        return Found(tuple(c for c in calls if c is not None), end, "mistral")
    bracket = body.find("[", pos)
    if bracket < 0:
        return MORE if reader.could_name(body[pos:]) else NOT_A_CALL
    name = body[pos:bracket]
    if name not in reader.offered:
        return NOT_A_CALL
    call_id: str | None = None
    marker = starts(body, bracket, _ARGS)
    if marker == "yes":
        pos = bracket + len(_ARGS)
    else:
        with_id = starts(body, bracket, _CALL_ID)
        if "partial" in (marker, with_id):
            return MORE
        if with_id == "no":
            return NOT_A_CALL
        id_start = bracket + len(_CALL_ID)
        id_end = body.find(_ARGS, id_start)
        if id_end < 0:
            return MORE if _MISTRAL_ID_SO_FAR.fullmatch(body, id_start) else NOT_A_CALL
        call_id = body[id_start:id_end].strip()
        if not _MISTRAL_ID.fullmatch(call_id):
            return NOT_A_CALL
        pos = id_end + len(_ARGS)
    pos = skip_space(body, pos)
    if pos == len(body):
        return MORE
    if body[pos] != "{":
        return NOT_A_CALL
    end = reader.json_end(body, pos)
    if end is None:
        return MORE
    call = call_from_json(reader, name, body[pos:end], call_id) if end > 0 else None
    return Found((call,), end, "mistral") if call is not None else NOT_A_CALL


# ---------------------------------------------------------------- sections: DeepSeek, Kimi K2


@dataclass(frozen=True, slots=True)
class _Section:
    """A block of calls between section markers, each call ``begin head sep arguments end``."""

    family: str
    call_begin: str
    separator: str
    call_end: str
    section_ends: tuple[str, ...]
    head_fits: Callable[[str, Reader, bool], bool]  # (head, reader, complete)
    read_call: Callable[[str, str, Reader], TextCall | None]  # (head, after separator)

    def parse(self, body: str, reader: Reader, at_end: bool) -> Verdict:
        calls: list[TextCall] = []
        pos = 0
        while True:
            pos = skip_space(body, pos)
            ends = [starts(body, pos, marker) for marker in self.section_ends]
            if "yes" in ends:
                marker = self.section_ends[ends.index("yes")]
                return Found(tuple(calls), pos + len(marker), self.family) if calls else NOT_A_CALL
            begin = starts(body, pos, self.call_begin)
            if begin != "yes":
                if at_end and calls and "partial" in ends:  # only the section's end is missing
                    return Found(tuple(calls), len(body), self.family)
                return MORE if not at_end and "partial" in (begin, *ends) else NOT_A_CALL
            pos += len(self.call_begin)
            end = body.find(self.call_end, pos)
            if end < 0:
                return NOT_A_CALL if at_end or not self._head_could_be(body, pos, reader) else MORE
            separator = body.find(self.separator, pos, end)
            if separator < 0:
                return NOT_A_CALL
            head = body[pos:separator].strip()
            call = self.read_call(head, body[separator + len(self.separator) : end], reader)
            if call is None:
                return NOT_A_CALL
            calls.append(call)
            pos = end + len(self.call_end)

    @property
    def endings(self) -> tuple[str, ...]:
        """A call or the section ends only with these."""
        return (self.call_end, *self.section_ends)

    def _head_could_be(self, body: str, pos: int, reader: Reader) -> bool:
        """Whether an unfinished call's head (what names the tool) could still fit."""
        separator = body.find(self.separator, pos)
        if separator >= 0:
            return self.head_fits(body[pos:separator].strip(), reader, True)
        head = body[pos:]
        for cut in range(min(len(self.separator) - 1, len(head)), 0, -1):
            if self.separator.startswith(head[-cut:]) and self.head_fits(
                head[:-cut].strip(), reader, True
            ):
                return True
        return self.head_fits(head.strip(), reader, False)


DEEPSEEK_OPEN = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
_DEEPSEEK_FENCED = re.compile(r"\s*(\S+)\s*```[A-Za-z]*[ \t]*\n?(.*?)\s*```\s*", re.DOTALL)


def _deepseek_head_fits(head: str, reader: Reader, complete: bool) -> bool:
    if complete:
        return head in reader.offered or head == "function"
    return "function".startswith(head) or reader.could_name(head)


def _deepseek_call(head: str, after: str, reader: Reader) -> TextCall | None:
    """V3.1+: ``N<sep>{...}``; V3/R1: ``function<sep>N`` and a fenced JSON block."""
    if head != "function" or after.lstrip().startswith("{"):
        return call_from_json(reader, head, after)
    fenced = _DEEPSEEK_FENCED.fullmatch(after)
    return call_from_json(reader, fenced.group(1), fenced.group(2)) if fenced else None


DEEPSEEK = _Section(
    family="deepseek",
    call_begin="<\uff5ctool\u2581call\u2581begin\uff5c>",
    separator="<\uff5ctool\u2581sep\uff5c>",
    call_end="<\uff5ctool\u2581call\u2581end\uff5c>",
    section_ends=("<\uff5ctool\u2581calls\u2581end\uff5c>",),
    head_fits=_deepseek_head_fits,
    read_call=_deepseek_call,
)

KIMI_OPENS = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
_KIMI_PREFIX = "functions."
_KIMI_HEAD = re.compile(r"(?:functions\.)?([^:\s]+)(?::(\d*))?")


def _kimi_name(head: str) -> tuple[str, bool] | None:
    """``functions.N:0`` (or ``N:0``, ``N``) -> (N, whether the index is complete)."""
    match = _KIMI_HEAD.fullmatch(head)
    if match is None:
        return None
    return match.group(1), match.group(2) != ""


def _kimi_head_fits(head: str, reader: Reader, complete: bool) -> bool:
    if not complete and (not head or _KIMI_PREFIX.startswith(head)):
        return True
    read = _kimi_name(head)
    if read is None:
        return False
    name, index_complete = read
    if complete:
        return name in reader.offered and index_complete
    return name in reader.offered if ":" in head else reader.could_name(name)


def _kimi_call(head: str, after: str, reader: Reader) -> TextCall | None:
    read = _kimi_name(head)
    if read is None or not read[1]:
        return None
    return call_from_json(reader, read[0], after)


KIMI = _Section(
    family="kimi_k2",
    call_begin="<|tool_call_begin|>",
    separator="<|tool_call_argument_begin|>",
    call_end="<|tool_call_end|>",
    section_ends=("<|tool_calls_section_end|>", "<|tool_call_section_end|>"),
    head_fits=_kimi_head_fits,
    read_call=_kimi_call,
)


# ---------------------------------------------------------------- the openers

OPENERS: tuple[Opener, ...] = (
    Opener(
        TOOL_CALL_OPEN,
        frozenset({"hermes", "qwen3_coder", "glm45"}),
        parse_tool_call_tag,
        (TOOL_CALL_CLOSE,),
    ),
    Opener(MISTRAL_OPEN, frozenset({"mistral"}), parse_mistral, ("}", "]")),
    Opener(DEEPSEEK_OPEN, frozenset({"deepseek"}), DEEPSEEK.parse, DEEPSEEK.endings),
    *(Opener(marker, frozenset({"kimi_k2"}), KIMI.parse, KIMI.endings) for marker in KIMI_OPENS),
)
"""Every opening marker; the recogniser looks only for those of the families it reads."""
