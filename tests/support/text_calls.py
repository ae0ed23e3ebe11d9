"""Tool calls written into text the way each model family writes them, for tests.

``written(style, calls)`` renders ``[(name, arguments), ...]`` as the model of that
style would write them into its answer, following the models' chat templates (the
test tables in tests/translate/test_text_calls.py hold literal examples beside these).
A scripted upstream sends the result as plain ``content`` with ``finish_reason: "stop"``,
as a model server without a tool parser does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["STYLES", "WrittenCall", "family_of", "written"]

WrittenCall = tuple[str, dict[str, Any]]

DS_CALLS_BEGIN = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
DS_CALLS_END = "<\uff5ctool\u2581calls\u2581end\uff5c>"
DS_CALL_BEGIN = "<\uff5ctool\u2581call\u2581begin\uff5c>"
DS_CALL_END = "<\uff5ctool\u2581call\u2581end\uff5c>"
DS_SEP = "<\uff5ctool\u2581sep\uff5c>"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _raw(value: Any) -> str:
    """A raw parameter value as the templates print it: strings as they are, else JSON."""
    return value if isinstance(value, str) else _json(value)


def _hermes(calls: Sequence[WrittenCall]) -> str:
    return "".join(
        f"<tool_call>\n{_json({'name': name, 'arguments': arguments})}\n</tool_call>\n"
        for name, arguments in calls
    )


def _qwen3_coder(calls: Sequence[WrittenCall]) -> str:
    def one(name: str, arguments: dict[str, Any]) -> str:
        parameters = "".join(
            f"<parameter={key}>\n{_raw(value)}\n</parameter>\n" for key, value in arguments.items()
        )
        return f"<tool_call>\n<function={name}>\n{parameters}</function>\n</tool_call>\n"

    return "".join(one(name, arguments) for name, arguments in calls)


def _glm45(calls: Sequence[WrittenCall]) -> str:
    def one(name: str, arguments: dict[str, Any]) -> str:
        pairs = "".join(
            f"<arg_key>{key}</arg_key>\n<arg_value>{_raw(value)}</arg_value>\n"
            for key, value in arguments.items()
        )
        return f"<tool_call>{name}\n{pairs}</tool_call>\n"

    return "".join(one(name, arguments) for name, arguments in calls)


def _mistral(calls: Sequence[WrittenCall]) -> str:
    return "".join(f"[TOOL_CALLS]{name}[ARGS]{_json(arguments)}" for name, arguments in calls)


def _mistral_v11(calls: Sequence[WrittenCall]) -> str:
    return "".join(
        f"[TOOL_CALLS]{name}[CALL_ID]{'abcDEF12' + str(n)}[ARGS]{_json(arguments)}"
        for n, (name, arguments) in enumerate(calls)
    )


def _mistral_legacy(calls: Sequence[WrittenCall]) -> str:
    return "[TOOL_CALLS] " + _json([{"name": name, "arguments": arguments} for name, arguments in calls])


def _deepseek(calls: Sequence[WrittenCall]) -> str:
    inner = "".join(
        f"{DS_CALL_BEGIN}{name}{DS_SEP}{_json(arguments)}{DS_CALL_END}" for name, arguments in calls
    )
    return DS_CALLS_BEGIN + inner + DS_CALLS_END


def _deepseek_v3(calls: Sequence[WrittenCall]) -> str:
    inner = "".join(
        f"{DS_CALL_BEGIN}function{DS_SEP}{name}\n```json\n{_json(arguments)}\n```{DS_CALL_END}"
        for name, arguments in calls
    )
    return DS_CALLS_BEGIN + inner + DS_CALLS_END


def _kimi_k2(calls: Sequence[WrittenCall]) -> str:
    inner = "".join(
        f"<|tool_call_begin|>functions.{name}:{n}<|tool_call_argument_begin|>{_json(arguments)}<|tool_call_end|>"
        for n, (name, arguments) in enumerate(calls)
    )
    return "<|tool_calls_section_begin|>" + inner + "<|tool_calls_section_end|>"


_WRITERS: dict[str, Callable[[Sequence[WrittenCall]], str]] = {
    "hermes": _hermes,
    "qwen3_coder": _qwen3_coder,
    "glm45": _glm45,
    "mistral": _mistral,
    "mistral_v11": _mistral_v11,
    "mistral_legacy": _mistral_legacy,
    "deepseek": _deepseek,
    "deepseek_v3": _deepseek_v3,
    "kimi_k2": _kimi_k2,
}
STYLES = tuple(_WRITERS)
"""Every way of writing; several styles can belong to one family (``family_of``)."""


def family_of(style: str) -> str:
    """The ``tool_call_text`` family that reads ``style``."""
    return style.split("_v")[0].removesuffix("_legacy")


def written(style: str, calls: Sequence[WrittenCall]) -> str:
    return _WRITERS[style](calls)
