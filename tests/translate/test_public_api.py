"""``toolwire.translate``'s public namespace is pinned, and the only way in.

Changing ``__all__`` or a pinned call signature must be deliberate; no module outside
``translate/`` (the rest of the package, the benchmark) imports one of its submodules.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest

import toolwire.translate
from toolwire.translate import (
    GENERIC,
    MESSAGES_PRESETS,
    AnswerTranslator,
    ChatStreamTranslator,
    MessagesStreamTranslator,
    ResponsesStreamRestorer,
    downgrade_request,
    translate_messages_request,
    translate_request,
)

ROOT = Path(__file__).resolve().parents[2]
TRANSLATE_ALL = [
    "ANTHROPIC_VERSION",
    "GENERIC",
    "MESSAGES_PRESETS",
    "PRESETS",
    "WHOLE_ANSWER_STREAMED",
    "AnswerTranslator",
    "BackendProfile",
    "ChatStreamTranslator",
    "DowngradedRequest",
    "DowngradedTool",
    "DowngradedToolTable",
    "MessagesProfile",
    "MessagesStreamTranslator",
    "RecoveredInput",
    "ResponsesCapabilities",
    "ResponsesEventWriter",
    "ResponsesStreamRestorer",
    "StreamEnd",
    "StreamOutcome",
    "StreamState",
    "ToolCallText",
    "TranslatedMessages",
    "TranslatedRequest",
    "UpstreamTool",
    "UpstreamToolTable",
    "WrittenAnswer",
    "complete_response",
    "complete_usage",
    "completion_chunks",
    "decide_stream_end",
    "downgrade_request",
    "dumps_event",
    "flat_name",
    "open_reasoning",
    "open_reasoning_blocks",
    "recover_custom_input",
    "seal_reasoning",
    "translate_completion",
    "translate_messages_request",
    "translate_request",
    "upstream_call_id",
]


def test_all_is_pinned() -> None:
    assert sorted(toolwire.translate.__all__) == sorted(TRANSLATE_ALL)
    assert len(set(toolwire.translate.__all__)) == len(toolwire.translate.__all__)


def test_every_name_in_all_exists() -> None:
    assert [name for name in toolwire.translate.__all__ if not hasattr(toolwire.translate, name)] == []


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from toolwire.translate import *", namespace)
    assert sorted(set(namespace) - {"__builtins__"}) == sorted(TRANSLATE_ALL)


KEYWORD, POSITIONAL = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD
REQUIRED = inspect.Parameter.empty


@pytest.mark.parametrize(
    ("function", "parameters"),
    [
        (
            translate_request,
            [("request", POSITIONAL, REQUIRED), ("profile", POSITIONAL, GENERIC), ("model", KEYWORD, None)],
        ),
        (
            ChatStreamTranslator,
            [
                ("request", POSITIONAL, REQUIRED),
                ("tools", POSITIONAL, REQUIRED),
                ("response_id", KEYWORD, REQUIRED),
                ("created_at", KEYWORD, REQUIRED),
                ("model", KEYWORD, REQUIRED),
                ("tool_call_text", KEYWORD, "auto"),
            ],
        ),
        (
            downgrade_request,
            [("request", POSITIONAL, REQUIRED), ("capabilities", POSITIONAL, REQUIRED), ("model", KEYWORD, None)],
        ),
        (
            ResponsesStreamRestorer,
            [
                ("downgraded", POSITIONAL, REQUIRED),
                ("response_id", KEYWORD, REQUIRED),
                ("created_at", KEYWORD, REQUIRED),
                ("model", KEYWORD, None),
            ],
        ),
        (
            translate_messages_request,
            [
                ("request", POSITIONAL, REQUIRED),
                ("profile", POSITIONAL, MESSAGES_PRESETS["anthropic"]),
                ("model", KEYWORD, None),
            ],
        ),
        (
            MessagesStreamTranslator,
            [
                ("request", POSITIONAL, REQUIRED),
                ("tools", POSITIONAL, REQUIRED),
                ("response_id", KEYWORD, REQUIRED),
                ("created_at", KEYWORD, REQUIRED),
                ("model", KEYWORD, REQUIRED),
            ],
        ),
    ],
    ids=[
        "translate_request",
        "ChatStreamTranslator",
        "downgrade_request",
        "ResponsesStreamRestorer",
        "translate_messages_request",
        "MessagesStreamTranslator",
    ],
)
def test_call_signatures_are_kept(function: Any, parameters: list[tuple[str, Any, Any]]) -> None:
    found = [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]
    assert found == parameters


@pytest.mark.parametrize("machine", [ChatStreamTranslator, ResponsesStreamRestorer, MessagesStreamTranslator])
def test_every_machine_is_an_answer_translator(machine: type) -> None:
    wanted = {
        name
        for name, member in vars(AnswerTranslator).items()
        # "ǁ" marks the copies mutmut's trampolines add to a class under mutation testing
        if not name.startswith("_") and "ǁ" not in name and (callable(member) or isinstance(member, property))
    }
    assert wanted == {"finished", "response", "start", "feed", "finish", "fail", "translate_whole", "keep_alive"}
    assert all(hasattr(machine, name) for name in wanted)
    for name in ("finish", "fail"):
        keywords = {
            p.name for p in inspect.signature(getattr(machine, name)).parameters.values() if p.kind is p.KEYWORD_ONLY
        }
        expected = {p.name for p in inspect.signature(getattr(AnswerTranslator, name)).parameters.values() if p.kind is p.KEYWORD_ONLY}
        assert keywords == expected


def submodule_imports(path: Path) -> list[str]:
    """The ``toolwire.translate.<submodule>`` imports of one source file."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "toolwire.translate":
                names = [f"toolwire.translate.{alias.name}" for alias in node.names if alias.name not in TRANSLATE_ALL]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [f"{path.relative_to(ROOT)}: {name}" for name in names if name.startswith("toolwire.translate.")]
    return found


def test_nothing_outside_translate_imports_its_submodules() -> None:
    translate = ROOT / "src" / "toolwire" / "translate"
    sources = [
        path
        for path in [*(ROOT / "src" / "toolwire").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
        if translate not in path.parents
    ]
    assert len(sources) > 20
    assert [found for path in sources for found in submodule_imports(path)] == []
