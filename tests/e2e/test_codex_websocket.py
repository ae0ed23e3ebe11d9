"""The real Codex CLI 0.171.0 through its built-in provider: Responses over WebSocket.

Codex configured as most users configure it for a proxy: a ``config.toml`` whose only
provider setting is ``openai_base_url`` (and the key in ``CODEX_API_KEY``). Codex then
opens a WebSocket to ``/v1/responses`` first, prewarms it (``generate: false``) and
continues each response with ``previous_response_id`` and only the new items; a refused
or broken WebSocket makes it print "Falling back from WebSockets to HTTPS transport"
and retry over HTTP, so every test checks that it never did.

The tool scenarios are those ``test_codex.py`` runs for the custom provider (V1
function tools, the freeform ``apply_patch``, V2 code-mode ``exec``, namespaces,
``tool_search``, parallel calls, images, reasoning, errors), asserted on their real
effects the same way, with its helpers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.test_codex import (
    EXEC_JS,
    FINAL,
    JSON,
    PATCH,
    V1,
    V1_PLUS,
    V2,
    call,
    declared,
    only_tool_text,
    report,
    text_of,
    tool_messages,
    until_tool_result,
)
from tests.fixtures.codex.capture import tiny_png
from tests.support.chat_upstream import Call, ChatUpstream, Cut, HttpError, Text, ToolCalls
from tests.support.codex import CodexResult, run_codex
from tests.support.gateway import GatewayProcess

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("npm") is None, reason="needs node/npm to install Codex"),
]

CODEX_WEBSOCKET_VERSION = "0.171.0"
FALLBACK = "Falling back from WebSockets"


def codex(gateway: GatewayProcess, model: str, cwd: Path, prompt: str = "Do the task.") -> CodexResult:
    return run_codex(
        base_url=gateway.base_url, model=model, prompt=prompt, cwd=cwd,
        builtin=True, version=CODEX_WEBSOCKET_VERSION,
    )


def log_mark(gateway: GatewayProcess) -> int:
    """Where the gateway's log ends now: what follows is this test's."""
    return len(gateway.log())


def exchanges_since(gateway: GatewayProcess, mark: int) -> list[JSON]:
    """The exchange log lines (one per response) written since ``mark``."""
    return [json.loads(line.split("toolwire.exchange: ", 1)[1])
            for line in gateway.log()[mark:].splitlines() if "toolwire.exchange: " in line]


def over_websocket(
    gateway: GatewayProcess, result: CodexResult, mark: int, *, continued: int = 1, errors: int = 0
) -> None:
    """Codex spoke to the gateway over a WebSocket and never fell back to HTTP; at least
    ``continued`` of its requests continued the one before from the connection (only
    their new items sent), and ``errors`` of them were answered with an error."""
    assert FALLBACK not in result.stdout + result.stderr, result.stderr[-3000:]
    since = gateway.log()[mark:]
    assert '"WebSocket /v1/responses" [accepted]' in since, since[-3000:]
    exchanges = exchanges_since(gateway, mark)
    assert sum("previous_response_id" in line for line in exchanges) >= continued, exchanges
    assert len([line for line in exchanges if line["outcome"] == "error"]) == errors, exchanges


def tool_turn(gateway: GatewayProcess, upstream: ChatUpstream, model: str, cwd: Path) -> JSON:
    """A turn that calls tools and then answers FINAL; the follow-up chat request."""
    mark = log_mark(gateway)
    result = codex(gateway, model, cwd)
    assert result.returncode == 0 and result.last_message == FINAL, report(result, upstream)
    over_websocket(gateway, result, mark, continued=2)  # the prewarm, continued, then the follow-up
    requests = upstream.chat_requests
    assert len(requests) == 2, report(result, upstream)
    follow_up: JSON = requests[1]
    return follow_up


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
    gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path, model: str, expected_tools: set[str]
) -> None:
    upstream.enqueue(Text("Hello over the WebSocket."))
    mark = log_mark(gateway)
    result = codex(gateway, model, tmp_path, prompt="Say hello.")
    assert result.returncode == 0, report(result, upstream)
    assert result.last_message == "Hello over the WebSocket."
    over_websocket(gateway, result, mark)
    [request] = upstream.chat_requests  # the prewarm asked nothing upstream
    assert expected_tools <= set(declared(request))
    assert "Say hello." in text_of(request["messages"][-1]["content"])


def test_exec_command_runs(gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path) -> None:
    upstream.responder = until_tool_result(
        lambda request: ToolCalls([call(request, "exec_command", cmd="echo toolwire-$((6*7))")])
    )
    follow_up = tool_turn(gateway, upstream, V1, tmp_path)
    assert "toolwire-42" in only_tool_text(follow_up)
    # The follow-up came as a continuation (previous_response_id and only the new items),
    # yet the backend saw the whole conversation: the user's prompt, the call, its output.
    roles = [message["role"] for message in follow_up["messages"]]
    assert roles[-2:] == ["assistant", "tool"] and "user" in roles, roles


def test_apply_patch_creates_file(gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path) -> None:
    upstream.responder = until_tool_result(lambda request: ToolCalls([call(request, "apply_patch", input=PATCH)]))
    follow_up = tool_turn(gateway, upstream, V1_PLUS, tmp_path)
    assert (tmp_path / "greeting.txt").read_text() == "hello from apply_patch\n"
    assert "greeting.txt" in only_tool_text(follow_up)


def test_parallel_calls_run_and_pair_up(gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path) -> None:
    upstream.responder = until_tool_result(
        lambda request: ToolCalls(
            [call(request, "exec_command", cmd="echo parallel-$((40+2))"), call(request, "apply_patch", input=PATCH)]
        )
    )
    follow_up = tool_turn(gateway, upstream, V1_PLUS, tmp_path)
    assert (tmp_path / "greeting.txt").read_text() == "hello from apply_patch\n"
    messages = follow_up["messages"]
    [at] = [i for i, message in enumerate(messages) if message["role"] == "assistant"]
    calls = messages[at]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["exec_command", "apply_patch"]
    by_id = {message["tool_call_id"]: text_of(message["content"]) for message in messages[at + 1 : at + 3]}
    assert set(by_id) == {c["id"] for c in calls} and len(tool_messages(follow_up)) == 2
    assert "parallel-42" in by_id[calls[0]["id"]]
    assert "greeting.txt" in by_id[calls[1]["id"]]


def test_code_mode_exec_runs_javascript(gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path) -> None:
    upstream.responder = until_tool_result(lambda request: ToolCalls([call(request, "exec", input=EXEC_JS)]))
    follow_up = tool_turn(gateway, upstream, V2, tmp_path)
    assert "js-ok" in only_tool_text(follow_up)


def test_namespaced_tool_runs(gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path) -> None:
    upstream.responder = until_tool_result(lambda request: ToolCalls([call(request, "list_agents")]))
    follow_up = tool_turn(gateway, upstream, V2, tmp_path)
    output = only_tool_text(follow_up)
    assert "unsupported call" not in output
    assert json.loads(output)["agents"], output


def test_tool_search_loads_tools(gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path) -> None:
    upstream.responder = until_tool_result(
        lambda request: ToolCalls([call(request, "tool_search", query="agents", limit=2)])
    )
    follow_up = tool_turn(gateway, upstream, V1_PLUS, tmp_path)
    loaded = set(declared(follow_up)) - set(declared(upstream.chat_requests[0]))
    assert 1 <= len(loaded) <= 2, declared(follow_up)
    assert all(name.startswith("multi_agent_v1__") for name in loaded), loaded
    assert all(name in only_tool_text(follow_up) for name in loaded)


def test_view_image_reaches_upstream_as_image(gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path) -> None:
    (tmp_path / "pixel.png").write_bytes(tiny_png())
    upstream.responder = until_tool_result(lambda request: ToolCalls([call(request, "view_image", path="pixel.png")]))
    follow_up = tool_turn(gateway, upstream, V1, tmp_path)
    messages = follow_up["messages"]
    last_tool = max(i for i, message in enumerate(messages) if message["role"] == "tool")
    images = [
        part["image_url"]["url"]
        for message in messages[last_tool + 1 :]
        if message["role"] == "user" and isinstance(message["content"], list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]
    assert len(images) == 1 and images[0].startswith("data:image/png;base64,"), messages[last_tool:]


def test_reasoning_is_passed_back(gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path) -> None:
    upstream.responder = until_tool_result(
        lambda request: ToolCalls([call(request, "exec_command", cmd="ls")], reasoning="I should list files")
    )
    follow_up = tool_turn(gateway, upstream, V1, tmp_path)
    [assistant] = [m for m in follow_up["messages"] if m["role"] == "assistant"]
    assert assistant["tool_calls"] and assistant.get("reasoning_content") == "I should list files", assistant


def test_an_upstream_error_reaches_the_user(gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path) -> None:
    """A 400 from the backend is a WebSocket error event with status 400: Codex shows its
    message and ends the turn, without retrying and without leaving the WebSocket."""
    upstream.responder = lambda _request: HttpError(
        400, {"error": {"message": "the model refuses this request", "type": "invalid_request_error"}}
    )
    mark = log_mark(gateway)
    result = codex(gateway, V1, tmp_path)
    assert result.returncode != 0, report(result, upstream)
    assert "the model refuses this request" in result.stdout + result.stderr, report(result, upstream)
    over_websocket(gateway, result, mark, errors=1)
    assert len(upstream.chat_requests) == 1


def test_a_cut_stream_is_retried_on_the_websocket_and_runs_nothing(
    gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path
) -> None:
    """Cut inside a tool call's arguments: ``response.failed`` (retryable for Codex), so
    Codex sends the request again on the same WebSocket; the half call never ran.

    (A failure that persists makes Codex spend its retries on the WebSocket and then fall
    back to HTTP, as its retry policy says, whatever the server: not tested here.)
    """
    upstream.enqueue(Cut(after_chunks=4, reply=ToolCalls([Call("exec_command", '{"cmd": "touch cut-marker"}')])))
    upstream.responder = lambda _request: Text(FINAL)
    mark = log_mark(gateway)
    result = codex(gateway, V1, tmp_path)
    assert result.returncode == 0 and result.last_message == FINAL, report(result, upstream)
    assert not (tmp_path / "cut-marker").exists()
    over_websocket(gateway, result, mark)
    assert len(upstream.chat_requests) == 2  # the cut request, and its retry (Codex's first retry is silent)
