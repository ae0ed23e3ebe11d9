"""The real Codex CLI, when the model server leaves tool calls in the text.

Codex -> ``toolwire serve`` -> ``ChatUpstream`` scripted as a server without a tool
parser: the model's calls arrive as plain ``content`` in one family's format, split into
small chunks, with ``finish_reason: "stop"``. Each scenario asserts what Codex really
did (the command's output, the file written, the sub-agent tool answering) and that the
next chat request carries the calls back as ordinary ``tool_calls`` and ``tool``
messages. Each family runs exec; the other scenarios share the families out between
them (test_text_calls.py covers every format in every way of splitting).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_codex import (
    EXEC_JS,
    FINAL,
    PATCH,
    V1,
    V1_PLUS,
    V2,
    codex,
    only_tool_text,
    report,
    text_of,
    tool,
    tool_messages,
    tool_turn,
    until_tool_result,
)
from tests.support.chat_upstream import ChatUpstream, Reply, Style, Text
from tests.support.gateway import GatewayProcess
from tests.support.text_calls import written

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("npm") is None, reason="needs node/npm to install Codex"),
]

JSON = dict[str, Any]
MARKERS = ("<tool_call>", "[TOOL_CALLS]", "\u2581", "<|tool")


@pytest.fixture
def model_server(upstream: ChatUpstream, request: pytest.FixtureRequest) -> Iterator[ChatUpstream]:
    """The scripted upstream in a wire style, with content cut into chunks of a size."""
    style, size = request.param
    upstream.style, upstream.fragment_size = style, size
    yield upstream
    upstream.fragment_size = 4


def writes(style: str, *calls: tuple[str, JSON], before: str = "") -> Callable[[JSON], Reply]:
    """A first turn that writes ``calls`` (by their declared names) into the text."""

    def first_turn(request: JSON) -> Reply:
        flat = [(tool(request, name), arguments) for name, arguments in calls]
        return Text(before + written(style, flat))

    return first_turn


def sent_back(follow_up: JSON, names: list[str]) -> JSON:
    """The assistant message of the next turn: the calls as ``tool_calls``, each answered."""
    [assistant] = [m for m in follow_up["messages"] if m["role"] == "assistant"]
    calls = assistant.get("tool_calls") or []
    assert [c["function"]["name"].split("__")[-1] for c in calls] == names, assistant
    assert not any(marker in text_of(assistant.get("content")) for marker in MARKERS), assistant
    assert sorted(m["tool_call_id"] for m in tool_messages(follow_up)) == sorted(c["id"] for c in calls)
    return dict(assistant)


def ids(cases: list[tuple[Any, ...]]) -> list[str]:
    return [f"{case[0]}-{case[1][0]}-{case[1][1]}" for case in cases]


EXEC_CASES: list[tuple[str, tuple[Style, int]]] = [
    ("hermes", ("openai", 3)),
    ("qwen3_coder", ("ollama", 5)),
    ("glm45", ("openai", 7)),
    ("mistral", ("ollama", 2)),
    ("deepseek", ("openai", 4)),
    ("kimi_k2", ("ollama", 6)),
]


@pytest.mark.parametrize(("style", "model_server"), EXEC_CASES, ids=ids(EXEC_CASES), indirect=["model_server"])
def test_exec_command_runs(gateway: GatewayProcess, model_server: ChatUpstream, tmp_path: Path, style: str) -> None:
    model_server.responder = until_tool_result(
        writes(style, ("exec_command", {"cmd": "echo text-$((6*7))"}))
    )
    follow_up = tool_turn(gateway, model_server, V1, tmp_path)
    assert "text-42" in only_tool_text(follow_up)
    sent_back(follow_up, ["exec_command"])


PATCH_CASES: list[tuple[str, tuple[Style, int]]] = [("qwen3_coder", ("openai", 4)), ("hermes", ("ollama", 3))]


@pytest.mark.parametrize(("style", "model_server"), PATCH_CASES, ids=ids(PATCH_CASES), indirect=["model_server"])
def test_freeform_apply_patch_writes_the_file(
    gateway: GatewayProcess, model_server: ChatUpstream, tmp_path: Path, style: str
) -> None:
    model_server.responder = until_tool_result(writes(style, ("apply_patch", {"input": PATCH})))
    follow_up = tool_turn(gateway, model_server, V1_PLUS, tmp_path)
    assert (tmp_path / "greeting.txt").read_text() == "hello from apply_patch\n"
    assert "greeting.txt" in only_tool_text(follow_up)
    sent_back(follow_up, ["apply_patch"])


PARALLEL_CASES: list[tuple[str, tuple[Style, int]]] = [("mistral_v11", ("openai", 5)), ("deepseek_v3", ("ollama", 4))]


@pytest.mark.parametrize(
    ("style", "model_server"), PARALLEL_CASES, ids=ids(PARALLEL_CASES), indirect=["model_server"]
)
def test_parallel_calls_run_and_pair_up(
    gateway: GatewayProcess, model_server: ChatUpstream, tmp_path: Path, style: str
) -> None:
    model_server.responder = until_tool_result(
        writes(
            style,
            ("exec_command", {"cmd": "echo parallel-$((40+2))"}),
            ("apply_patch", {"input": PATCH}),
        )
    )
    follow_up = tool_turn(gateway, model_server, V1_PLUS, tmp_path)
    assert (tmp_path / "greeting.txt").read_text() == "hello from apply_patch\n"
    assistant = sent_back(follow_up, ["exec_command", "apply_patch"])
    outputs = {m["tool_call_id"]: text_of(m["content"]) for m in tool_messages(follow_up)}
    first, second = (call["id"] for call in assistant["tool_calls"])
    assert "parallel-42" in outputs[first] and "greeting.txt" in outputs[second]


TEXT_FIRST_CASES: list[tuple[str, tuple[Style, int]]] = [("glm45", ("openai", 3)), ("kimi_k2", ("openai", 8))]
BEFORE = "I will look at the files first.\n\n"


@pytest.mark.parametrize(
    ("style", "model_server"), TEXT_FIRST_CASES, ids=ids(TEXT_FIRST_CASES), indirect=["model_server"]
)
def test_text_before_a_call_stays_text(
    gateway: GatewayProcess, model_server: ChatUpstream, tmp_path: Path, style: str
) -> None:
    model_server.responder = until_tool_result(
        writes(style, ("exec_command", {"cmd": "echo before-$((1+1))"}), before=BEFORE)
    )
    follow_up = tool_turn(gateway, model_server, V1, tmp_path)
    assert "before-2" in only_tool_text(follow_up)
    assistant = sent_back(follow_up, ["exec_command"])
    assert text_of(assistant["content"]).strip() == BEFORE.strip()


CODE_MODE_CASES: list[tuple[str, tuple[Style, int]]] = [("qwen3_coder", ("openai", 6)), ("deepseek_v3", ("openai", 3))]


@pytest.mark.parametrize(
    ("style", "model_server"), CODE_MODE_CASES, ids=ids(CODE_MODE_CASES), indirect=["model_server"]
)
def test_code_mode_exec_runs_javascript(
    gateway: GatewayProcess, model_server: ChatUpstream, tmp_path: Path, style: str
) -> None:
    model_server.responder = until_tool_result(writes(style, ("exec", {"input": EXEC_JS})))
    follow_up = tool_turn(gateway, model_server, V2, tmp_path)
    assert "js-ok" in only_tool_text(follow_up)
    sent_back(follow_up, ["exec"])


NAMESPACE_CASES: list[tuple[str, tuple[Style, int]]] = [("kimi_k2", ("openai", 4)), ("mistral_legacy", ("ollama", 7))]


@pytest.mark.parametrize(
    ("style", "model_server"), NAMESPACE_CASES, ids=ids(NAMESPACE_CASES), indirect=["model_server"]
)
def test_namespaced_tool_runs(
    gateway: GatewayProcess, model_server: ChatUpstream, tmp_path: Path, style: str
) -> None:
    model_server.responder = until_tool_result(writes(style, ("list_agents", {})))
    follow_up = tool_turn(gateway, model_server, V2, tmp_path)
    output = only_tool_text(follow_up)
    assert "unsupported call" not in output
    assert json.loads(output)["agents"], output
    sent_back(follow_up, ["list_agents"])


UNKNOWN = '<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>'


@pytest.mark.parametrize("model_server", [("openai", 3)], indirect=True)
def test_a_call_to_a_tool_not_offered_is_the_answer_text(
    gateway: GatewayProcess, model_server: ChatUpstream, tmp_path: Path
) -> None:
    model_server.enqueue(Text(UNKNOWN))
    result = codex(gateway, V1, tmp_path)
    assert result.returncode == 0 and result.last_message == UNKNOWN, report(result, model_server)
    assert len(model_server.chat_requests) == 1
    assert FINAL not in result.stdout
