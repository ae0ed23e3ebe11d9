"""The real Codex CLI through the real gateway, in front of the scripted Messages API.

Codex -> ``toolwire serve --preset anthropic`` -> ``MessagesUpstream``, for every
scenario ``test_codex.py`` runs against a Chat backend. The upstream enforces the
Messages API's rules (a broken one is a 400 that fails the turn), so a turn that ends
with FINAL also proves the follow-up request was valid: each ``tool_use`` answered by
its ``tool_result`` first in the next user message, thinking sent back unchanged.
Assertions are on real effects: what Codex ran (files, command output in the follow-up
``tool_result``) and what the upstream received.

Models pick Codex's tool protocol: ``gpt-5.4`` plain function tools (V1), ``gpt-5.5`` adds
the freeform ``apply_patch`` and ``tool_search``, ``gpt-5.6-terra`` declares namespaces in
an ``additional_tools`` input item (V2: code-mode ``exec``, ``collaboration``).
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.codex.capture import tiny_png
from tests.support.codex import CodexResult, run_codex
from tests.support.gateway import GatewayProcess
from tests.support.messages_upstream import (
    Answer,
    Cut,
    HttpError,
    MessagesUpstream,
    Redacted,
    Reply,
    Responder,
    Said,
    Search,
    Thinking,
    Use,
    sign,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("npm") is None, reason="needs node/npm to install Codex"),
]

JSON = dict[str, Any]
FINAL = "All done here."
V1, V1_PLUS, V2 = "gpt-5.4", "gpt-5.5", "gpt-5.6-terra"


# --------------------------------------------------------------------------- helpers


def declared(request: JSON) -> list[str]:
    return [tool["name"] for tool in request.get("tools") or []]


def tool(request: JSON, name: str) -> str:
    """The upstream name of the declared tool ``name`` (bare or ``<namespace>__name``)."""
    matches = [flat for flat in declared(request) if flat == name or flat.endswith("__" + name)]
    if len(matches) != 1:
        raise LookupError(f"tool {name!r} is not declared exactly once upstream: {declared(request)}")
    return matches[0]


def use(request: JSON, name: str, **arguments: Any) -> Use:
    return Use(tool(request, name), arguments)


def blocks(message: JSON) -> list[JSON]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def tool_results(request: JSON) -> list[JSON]:
    return [block for message in request["messages"] for block in blocks(message) if block["type"] == "tool_result"]


def result_text(result: JSON) -> str:
    content = result.get("content")
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content or [] if block.get("type") == "text")


def until_tool_result(first_turn: Callable[[JSON], Reply]) -> Responder:
    """Answer ``first_turn(request)`` until a tool result is in the conversation, then FINAL."""

    def respond(request: JSON) -> Reply:
        if tool_results(request):
            return Answer([Said(FINAL)])
        return first_turn(request)

    return respond


def report(result: CodexResult, upstream: MessagesUpstream) -> str:
    requests = upstream.message_requests
    return (
        f"codex exit {result.returncode}, last message {result.last_message!r}\n"
        f"stderr (tail):\n{result.stderr[-3000:]}\n"
        f"{len(requests)} request(s); tools of the first: {declared(requests[0]) if requests else []}\n"
        f"tool results of the last: {tool_results(requests[-1]) if requests else None}"
    )


def codex(
    gateway: GatewayProcess, model: str, cwd: Path, prompt: str = "Do the task.", extra_config: str = ""
) -> CodexResult:
    return run_codex(base_url=gateway.base_url, model=model, prompt=prompt, cwd=cwd, extra_config=extra_config)


def tool_turn(
    gateway: GatewayProcess, upstream: MessagesUpstream, model: str, cwd: Path, extra_config: str = ""
) -> JSON:
    """Run a turn that calls tools and then answers FINAL; return the follow-up request."""
    result = codex(gateway, model, cwd, extra_config=extra_config)
    requests = upstream.message_requests
    assert result.returncode == 0 and result.last_message == FINAL, report(result, upstream)
    assert len(requests) == 2, report(result, upstream)
    follow_up: JSON = requests[1]
    return follow_up


def only_result_text(request: JSON) -> str:
    [result] = tool_results(request)
    return result_text(result)


# --------------------------------------------------------------------------- scenarios


@pytest.mark.parametrize(
    ("model", "expected_tools"),
    [
        (V1, {"exec_command", "view_image"}),
        (V1_PLUS, {"exec_command", "apply_patch", "tool_search"}),
        (V2, {"functions__exec", "collaboration__list_agents"}),
    ],
    ids=[V1, V1_PLUS, V2],
)
def test_plain_answer(
    anthropic_gateway: GatewayProcess,
    messages_upstream: MessagesUpstream,
    tmp_path: Path,
    model: str,
    expected_tools: set[str],
) -> None:
    messages_upstream.enqueue(Answer([Said("Hello from the scripted Messages API.")]))
    result = codex(anthropic_gateway, model, tmp_path, prompt="Say hello.")
    assert result.returncode == 0, report(result, messages_upstream)
    assert result.last_message == "Hello from the scripted Messages API."
    [request] = messages_upstream.message_requests
    assert expected_tools <= set(declared(request))
    assert "Say hello." in json.dumps(request["messages"][-1])
    assert request["system"] and request["max_tokens"] > 0
    # Codex's long prompt is cached: breakpoints on the tools, the system and the turn.
    assert "cache_control" in request["tools"][-1] or "cache_control" in request["tools"][-2]
    assert "cache_control" in request["system"][-1]
    assert "cache_control" in blocks(request["messages"][-1])[-1]


def test_exec_command_runs(anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream, tmp_path: Path) -> None:
    messages_upstream.responder = until_tool_result(
        lambda request: Answer([use(request, "exec_command", cmd="echo toolwire-$((6*7))")])
    )
    follow_up = tool_turn(anthropic_gateway, messages_upstream, V1, tmp_path)
    assert "toolwire-42" in only_result_text(follow_up)


PATCH = "*** Begin Patch\n*** Add File: greeting.txt\n+hello from apply_patch\n*** End Patch\n"


def test_apply_patch_creates_file(
    anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream, tmp_path: Path
) -> None:
    messages_upstream.responder = until_tool_result(lambda request: Answer([use(request, "apply_patch", input=PATCH)]))
    follow_up = tool_turn(anthropic_gateway, messages_upstream, V1_PLUS, tmp_path)
    assert (tmp_path / "greeting.txt").read_text() == "hello from apply_patch\n"
    assert "greeting.txt" in only_result_text(follow_up)


def test_parallel_calls_run_and_pair_up(
    anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream, tmp_path: Path
) -> None:
    messages_upstream.responder = until_tool_result(
        lambda request: Answer(
            [
                Said("Running both."),
                use(request, "exec_command", cmd="echo parallel-$((40+2))"),
                use(request, "apply_patch", input=PATCH),
            ]
        )
    )
    follow_up = tool_turn(anthropic_gateway, messages_upstream, V1_PLUS, tmp_path)
    assert (tmp_path / "greeting.txt").read_text() == "hello from apply_patch\n"
    messages = follow_up["messages"]
    [at] = [i for i, message in enumerate(messages) if message["role"] == "assistant"]
    uses = [block for block in blocks(messages[at]) if block["type"] == "tool_use"]
    assert [block["name"] for block in uses] == ["exec_command", "apply_patch"]
    results = blocks(messages[at + 1])[:2]
    assert [result["tool_use_id"] for result in results] == [block["id"] for block in uses]
    assert "parallel-42" in result_text(results[0])
    assert "greeting.txt" in result_text(results[1])


EXEC_JS = "const r = await tools.exec_command({cmd: 'echo js-$(echo ok)'});\ntext(JSON.stringify(r));\n"


def test_code_mode_exec_runs_javascript(
    anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream, tmp_path: Path
) -> None:
    messages_upstream.responder = until_tool_result(lambda request: Answer([use(request, "exec", input=EXEC_JS)]))
    follow_up = tool_turn(anthropic_gateway, messages_upstream, V2, tmp_path)
    assert "js-ok" in only_result_text(follow_up)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"cmd": "echo legacy-$(echo ok)"}, "legacy-ok"),
        ({"input": "```javascript\n" + EXEC_JS.replace("js-", "fenced-") + "```"}, "fenced-ok"),
    ],
    ids=["legacy-cmd", "markdown-fence"],
)
def test_code_mode_exec_repairs_arguments(
    anthropic_gateway: GatewayProcess,
    messages_upstream: MessagesUpstream,
    tmp_path: Path,
    arguments: JSON,
    expected: str,
) -> None:
    messages_upstream.responder = until_tool_result(lambda request: Answer([use(request, "exec", **arguments)]))
    follow_up = tool_turn(anthropic_gateway, messages_upstream, V2, tmp_path)
    assert expected in only_result_text(follow_up)


def test_namespaced_tool_runs(anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream, tmp_path: Path) -> None:
    messages_upstream.responder = until_tool_result(lambda request: Answer([use(request, "list_agents")]))
    follow_up = tool_turn(anthropic_gateway, messages_upstream, V2, tmp_path)
    output = only_result_text(follow_up)
    assert "unsupported call" not in output
    assert json.loads(output)["agents"], output


def test_tool_search_loads_tools(anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream, tmp_path: Path) -> None:
    messages_upstream.responder = until_tool_result(
        lambda request: Answer([use(request, "tool_search", query="agents", limit=2)])
    )
    follow_up = tool_turn(anthropic_gateway, messages_upstream, V1_PLUS, tmp_path)
    loaded = set(declared(follow_up)) - set(declared(messages_upstream.message_requests[0]))
    assert 1 <= len(loaded) <= 2, declared(follow_up)
    assert all(name.startswith("multi_agent_v1__") for name in loaded), loaded
    output = only_result_text(follow_up)
    assert all(name in output for name in loaded), output


def test_view_image_reaches_upstream_inside_its_tool_result(
    anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream, tmp_path: Path
) -> None:
    (tmp_path / "pixel.png").write_bytes(tiny_png())
    messages_upstream.responder = until_tool_result(lambda request: Answer([use(request, "view_image", path="pixel.png")]))
    follow_up = tool_turn(anthropic_gateway, messages_upstream, V1, tmp_path)
    [result] = tool_results(follow_up)
    images = [block for block in result["content"] if block["type"] == "image"]
    assert len(images) == 1, result
    source = images[0]["source"]
    assert source["type"] == "base64" and source["media_type"] == "image/png"
    assert base64.b64decode(source["data"]).startswith(b"\x89PNG\r\n\x1a\n")


def test_thinking_goes_back_unchanged_with_its_signature(
    anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream, tmp_path: Path
) -> None:
    """Thinking, redacted thinking, then a call: the follow-up's assistant turn starts with
    both blocks exactly as the API sent them (the upstream checks every signature)."""
    thought = 'I should list files; "quotes", a \\ backslash and é survive.'
    messages_upstream.responder = until_tool_result(
        lambda request: Answer([Thinking(thought), Redacted(), use(request, "exec_command", cmd="ls")])
    )
    follow_up = tool_turn(
        anthropic_gateway, messages_upstream, V1, tmp_path, extra_config='model_reasoning_effort = "medium"'
    )
    first = messages_upstream.message_requests[0]
    assert first["thinking"]["type"] == "enabled" and first["thinking"]["budget_tokens"] < first["max_tokens"]
    [assistant] = [m for m in follow_up["messages"] if m["role"] == "assistant"]
    content = blocks(assistant)
    assert content[0] == {"type": "thinking", "thinking": thought, "signature": sign(thought)}
    assert content[1] == {"type": "redacted_thinking", "data": Redacted().data}
    assert content[2]["type"] == "tool_use"
    assert follow_up["thinking"]["type"] == "enabled"


def test_live_web_search_runs_on_the_backend(
    anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream, tmp_path: Path
) -> None:
    """With ``web_search = "live"`` Codex declares a hosted web search; the anthropic preset
    runs it as Anthropic's server tool, and Codex shows the search it made."""
    messages_upstream.enqueue(Answer([Search("toolwire gateway", ["https://example.org/toolwire"]), Said(FINAL)]))
    result = codex(anthropic_gateway, V1, tmp_path, prompt="Search the web.", extra_config='web_search = "live"')
    assert result.returncode == 0 and result.last_message == FINAL, report(result, messages_upstream)
    [request] = messages_upstream.message_requests
    assert {"type": "web_search_20250305", "name": "web_search"} in request["tools"]
    assert "web search: toolwire gateway" in result.stderr


@pytest.mark.parametrize("status", [500, 529])
def test_upstream_error_message_reaches_the_user(
    anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream, tmp_path: Path, status: int
) -> None:
    messages_upstream.responder = lambda _request: HttpError(status, "overloaded_error", "Claude is overloaded: try later")
    result = codex(anthropic_gateway, V1, tmp_path)
    assert result.returncode != 0, report(result, messages_upstream)
    assert "Claude is overloaded: try later" in result.stdout + result.stderr, report(result, messages_upstream)


def test_cut_stream_fails_the_turn(anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream, tmp_path: Path) -> None:
    messages_upstream.enqueue(Cut(after_events=4))
    result = codex(anthropic_gateway, V1, tmp_path)
    assert result.returncode != 0, report(result, messages_upstream)
    assert any("stream" in line for line in result.stderr.splitlines() if line.startswith("ERROR")), report(
        result, messages_upstream
    )


def test_cut_mid_tool_call_runs_nothing(
    anthropic_gateway: GatewayProcess, messages_upstream: MessagesUpstream, tmp_path: Path
) -> None:
    """The cut falls inside the call's input_json_delta fragments."""
    messages_upstream.enqueue(
        Cut(after_events=6, reply=Answer([Use("exec_command", {"cmd": "touch cut-marker"})]))
    )
    result = codex(anthropic_gateway, V1, tmp_path)
    assert result.returncode != 0, report(result, messages_upstream)
    assert not (tmp_path / "cut-marker").exists()
    assert len(messages_upstream.message_requests) == 1
