"""The real Codex CLI through the real gateway, in front of the scripted Chat upstream.

Every scenario runs on ``CODEX_VERSION`` (0.171.0); a handful (the smoke section at the
end) also on the older versions in ``SMOKE_CODEX_VERSIONS`` (0.169.0).

Codex -> ``toolwire serve`` -> ``ChatUpstream``. Each test scripts the upstream with a
responder that calls tools on the first chat request and answers ``FINAL`` once a tool
result is in the conversation, then asserts on real effects: what Codex did (files,
command output in the follow-up chat request) and what the upstream received next.
Codex exits 0 with an empty last message when it silently drops a malformed item, so
exit codes alone prove nothing (see tests/fixtures/codex/README.md).

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

import orjson
import pytest

from tests.fixtures.codex.capture import tiny_png
from tests.support.chat_upstream import (
    Call,
    ChatUpstream,
    Cut,
    HttpError,
    Raw,
    Reply,
    ReplyContext,
    Responder,
    Text,
    ToolCalls,
    stream_payloads,
)
from tests.support.codex import CODEX_VERSION, SMOKE_CODEX_VERSIONS, CodexResult, run_codex
from tests.support.gateway import GatewayProcess

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("npm") is None, reason="needs node/npm to install Codex"),
]

JSON = dict[str, Any]
FINAL = "All done here."
V1, V1_PLUS, V2 = "gpt-5.4", "gpt-5.5", "gpt-5.6-terra"


@pytest.fixture(params=["openai", "ollama"])
def chat(upstream: ChatUpstream, request: pytest.FixtureRequest) -> ChatUpstream:
    """The scripted upstream, streaming in each style in turn."""
    upstream.style = request.param
    return upstream


# --------------------------------------------------------------------------- helpers


def declared(request: JSON) -> list[str]:
    """The flat tool names a chat request declares."""
    return [tool["function"]["name"] for tool in request.get("tools") or []]


def tool(request: JSON, name: str) -> str:
    """The flat upstream name of the declared tool ``name`` (bare or ``<namespace>__name``)."""
    matches = [flat for flat in declared(request) if flat == name or flat.endswith("__" + name)]
    if len(matches) != 1:
        raise LookupError(
            f"tool {name!r} is not declared exactly once upstream: {declared(request)}"
        )
    return matches[0]


def call(request: JSON, name: str, **arguments: Any) -> Call:
    return Call(tool(request, name), json.dumps(arguments))


def until_tool_result(first_turn: Callable[[JSON], Reply]) -> Responder:
    """Answer ``first_turn(request)`` until a tool result is in the conversation, then FINAL."""

    def respond(request: JSON) -> Reply:
        if any(message["role"] == "tool" for message in request["messages"]):
            return Text(FINAL)
        return first_turn(request)

    return respond


def text_of(content: Any) -> str:
    """A chat message's content as text (a string, or the text of its parts)."""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def tool_messages(request: JSON) -> list[JSON]:
    return [message for message in request["messages"] if message["role"] == "tool"]


def report(result: CodexResult, upstream: ChatUpstream) -> str:
    """What to read when a test fails: Codex's output and what the upstream saw."""
    requests = upstream.chat_requests
    tools = declared(requests[0]) if requests else []
    return (
        f"codex exit {result.returncode}, last message {result.last_message!r}\n"
        f"stderr (tail):\n{result.stderr[-3000:]}\n"
        f"{len(requests)} chat request(s); upstream tools of the first: {tools}\n"
        f"tool messages of the last: {tool_messages(requests[-1]) if requests else None}"
    )


def codex(
    gateway: GatewayProcess,
    model: str,
    cwd: Path,
    prompt: str = "Do the task.",
    version: str = CODEX_VERSION,
) -> CodexResult:
    return run_codex(base_url=gateway.base_url, model=model, prompt=prompt, cwd=cwd, version=version)


def tool_turn(
    gateway: GatewayProcess, upstream: ChatUpstream, model: str, cwd: Path, version: str = CODEX_VERSION
) -> JSON:
    """Run a turn that calls tools and then answers FINAL; return the follow-up chat request."""
    result = codex(gateway, model, cwd, version=version)
    requests = upstream.chat_requests
    assert result.returncode == 0 and result.last_message == FINAL, report(result, upstream)
    assert len(requests) == 2, report(result, upstream)
    follow_up: JSON = requests[1]
    return follow_up


def only_tool_text(request: JSON) -> str:
    [message] = tool_messages(request)
    return text_of(message["content"])


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
    gateway: GatewayProcess,
    chat: ChatUpstream,
    tmp_path: Path,
    model: str,
    expected_tools: set[str],
) -> None:
    chat.enqueue(Text("Hello from the scripted upstream."))
    result = codex(gateway, model, tmp_path, prompt="Say hello.")
    assert result.returncode == 0, report(result, chat)
    assert result.last_message == "Hello from the scripted upstream."
    [request] = chat.chat_requests
    assert expected_tools <= set(declared(request))
    assert "Say hello." in text_of(request["messages"][-1]["content"])


def test_exec_command_runs(gateway: GatewayProcess, chat: ChatUpstream, tmp_path: Path) -> None:
    chat.responder = until_tool_result(
        lambda request: ToolCalls([call(request, "exec_command", cmd="echo toolwire-$((6*7))")])
    )
    follow_up = tool_turn(gateway, chat, V1, tmp_path)
    assert "toolwire-42" in only_tool_text(follow_up)


PATCH = "*** Begin Patch\n*** Add File: greeting.txt\n+hello from apply_patch\n*** End Patch\n"


def test_apply_patch_creates_file(
    gateway: GatewayProcess, chat: ChatUpstream, tmp_path: Path
) -> None:
    chat.responder = until_tool_result(
        lambda request: ToolCalls([call(request, "apply_patch", input=PATCH)])
    )
    follow_up = tool_turn(gateway, chat, V1_PLUS, tmp_path)
    assert (tmp_path / "greeting.txt").read_text() == "hello from apply_patch\n"
    assert "greeting.txt" in only_tool_text(follow_up)


def test_parallel_calls_run_and_pair_up(
    gateway: GatewayProcess, chat: ChatUpstream, tmp_path: Path
) -> None:
    chat.responder = until_tool_result(
        lambda request: ToolCalls(
            [
                call(request, "exec_command", cmd="echo parallel-$((40+2))"),
                call(request, "apply_patch", input=PATCH),
            ]
        )
    )
    follow_up = tool_turn(gateway, chat, V1_PLUS, tmp_path)
    assert (tmp_path / "greeting.txt").read_text() == "hello from apply_patch\n"

    messages = follow_up["messages"]
    [at] = [i for i, message in enumerate(messages) if message["role"] == "assistant"]
    calls = messages[at]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["exec_command", "apply_patch"]
    outputs = messages[at + 1 : at + 3]
    assert [message["role"] for message in outputs] == ["tool", "tool"]
    assert len(tool_messages(follow_up)) == 2
    by_id = {message["tool_call_id"]: text_of(message["content"]) for message in outputs}
    assert set(by_id) == {c["id"] for c in calls}
    assert "parallel-42" in by_id[calls[0]["id"]]
    assert "greeting.txt" in by_id[calls[1]["id"]]


# Each command prints its marker through $(...): the marker is never in the call itself,
# so finding it in a tool result proves the command ran (not that an error echoed it).
EXEC_JS = (
    "const r = await tools.exec_command({cmd: 'echo js-$(echo ok)'});\ntext(JSON.stringify(r));\n"
)


def test_code_mode_exec_runs_javascript(
    gateway: GatewayProcess, chat: ChatUpstream, tmp_path: Path
) -> None:
    chat.responder = until_tool_result(
        lambda request: ToolCalls([call(request, "exec", input=EXEC_JS)])
    )
    follow_up = tool_turn(gateway, chat, V2, tmp_path)
    assert "js-ok" in only_tool_text(follow_up)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"cmd": "echo legacy-$(echo ok)"}, "legacy-ok"),
        ({"input": "```javascript\n" + EXEC_JS.replace("js-", "fenced-") + "```"}, "fenced-ok"),
    ],
    ids=["legacy-cmd", "markdown-fence"],
)
def test_code_mode_exec_repairs_arguments(
    gateway: GatewayProcess, chat: ChatUpstream, tmp_path: Path, arguments: JSON, expected: str
) -> None:
    chat.responder = until_tool_result(
        lambda request: ToolCalls([call(request, "exec", **arguments)])
    )
    follow_up = tool_turn(gateway, chat, V2, tmp_path)
    assert expected in only_tool_text(follow_up)


def test_namespaced_tool_runs(gateway: GatewayProcess, chat: ChatUpstream, tmp_path: Path) -> None:
    chat.responder = until_tool_result(lambda request: ToolCalls([call(request, "list_agents")]))
    follow_up = tool_turn(gateway, chat, V2, tmp_path)
    output = only_tool_text(follow_up)
    assert "unsupported call" not in output
    assert json.loads(output)["agents"], output


def test_tool_search_loads_tools(
    gateway: GatewayProcess, chat: ChatUpstream, tmp_path: Path
) -> None:
    chat.responder = until_tool_result(
        lambda request: ToolCalls([call(request, "tool_search", query="agents", limit=2)])
    )
    follow_up = tool_turn(gateway, chat, V1_PLUS, tmp_path)
    # gpt-5.5 defers its multi-agent tools: the search loads (up to `limit` of) them, the
    # follow-up declares them upstream, and the tool message lists them by those names.
    loaded = set(declared(follow_up)) - set(declared(chat.chat_requests[0]))
    assert 1 <= len(loaded) <= 2, declared(follow_up)
    assert all(name.startswith("multi_agent_v1__") for name in loaded), loaded
    output = only_tool_text(follow_up)
    assert all(name in output for name in loaded), output


def test_view_image_reaches_upstream_as_image(
    gateway: GatewayProcess, chat: ChatUpstream, tmp_path: Path
) -> None:
    (tmp_path / "pixel.png").write_bytes(tiny_png())
    chat.responder = until_tool_result(
        lambda request: ToolCalls([call(request, "view_image", path="pixel.png")])
    )
    follow_up = tool_turn(gateway, chat, V1, tmp_path)
    messages = follow_up["messages"]
    last_tool = max(i for i, message in enumerate(messages) if message["role"] == "tool")
    images = [
        part["image_url"]["url"]
        for message in messages[last_tool + 1 :]
        if message["role"] == "user" and isinstance(message["content"], list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]
    prefix = "data:image/png;base64,"
    assert len(images) == 1 and images[0].startswith(prefix), messages[last_tool:]
    assert base64.b64decode(images[0][len(prefix) :]).startswith(b"\x89PNG\r\n\x1a\n")


def test_reasoning_is_passed_back(
    gateway: GatewayProcess, chat: ChatUpstream, tmp_path: Path
) -> None:
    chat.responder = until_tool_result(
        lambda request: ToolCalls(
            [call(request, "exec_command", cmd="ls")], reasoning="I should list files"
        )
    )
    follow_up = tool_turn(gateway, chat, V1, tmp_path)
    [assistant] = [m for m in follow_up["messages"] if m["role"] == "assistant"]
    assert assistant["tool_calls"]
    # The gateway's default profile (toolwire.translate GENERIC) sends reasoning_content.
    assert assistant.get("reasoning_content") == "I should list files", assistant


OVERLOADED = {"error": {"message": "model overloaded: try later", "type": "server_error"}}


@pytest.mark.parametrize(
    "status",
    # Codex 0.169.0 shows any HTTP 500 only as "We're currently experiencing high demand"
    # (body dropped) but prints the body of a 502/503/504; the gateway answers an
    # upstream 500 with 502, so the user sees the upstream's message in every case.
    [500, 502, 503],
)
def test_upstream_5xx_message_reaches_the_user(
    gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path, status: int
) -> None:
    upstream.responder = lambda _request: HttpError(status, OVERLOADED)
    result = codex(gateway, V1, tmp_path)
    assert result.returncode != 0, report(result, upstream)
    assert "model overloaded: try later" in result.stdout + result.stderr, report(result, upstream)


@pytest.mark.parametrize("waiting", ["pinging", "silent"])
def test_a_model_server_reading_a_long_prompt_keeps_codex_waiting(
    gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path, waiting: str
) -> None:
    """A model server reads a long prompt for 28 s, pinging (``: ping``, as llama.cpp does)
    or silent (as vLLM and Ollama are). Codex's idle timer counts events, not comments: set
    to 20 s here, it would end the turn unless the gateway told it ``response.in_progress``
    (at each ping, at most every 10 s; after each 15 s of silence). One request,
    answered: no retry, no error."""
    frames = [b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in stream_payloads(Text(FINAL), ReplyContext())]
    pings = [piece for _ in range(28) for piece in (b": ping\n\n", 1.0)] if waiting == "pinging" else [28.0]
    upstream.enqueue(Raw([*pings, *frames, b"data: [DONE]\n\n"]))
    result = run_codex(
        base_url=gateway.base_url,
        model=V1,
        prompt="Say it.",
        cwd=tmp_path,
        provider_settings="stream_idle_timeout_ms = 20000",
    )
    assert result.returncode == 0 and result.last_message == FINAL, report(result, upstream)
    assert len(upstream.chat_requests) == 1, report(result, upstream)


def error_lines(result: CodexResult) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("ERROR")]


def test_cut_stream_fails_the_turn(
    gateway: GatewayProcess, chat: ChatUpstream, tmp_path: Path
) -> None:
    chat.enqueue(Cut(after_chunks=3))
    result = codex(gateway, V1, tmp_path)
    assert result.returncode != 0, report(result, chat)
    assert any("stream" in line for line in error_lines(result)), report(result, chat)


def test_cut_mid_tool_call_runs_nothing(
    gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path
) -> None:
    """openai style: the cut falls inside the call's argument fragments."""
    upstream.enqueue(
        Cut(after_chunks=4, reply=ToolCalls([Call("exec_command", '{"cmd": "touch cut-marker"}')]))
    )
    result = codex(gateway, V1, tmp_path)
    assert result.returncode != 0, report(result, upstream)
    assert not (tmp_path / "cut-marker").exists()
    assert len(upstream.chat_requests) == 1


# --------------------------------------------------------------------------- older Codex

smoke_versions = pytest.mark.parametrize("version", SMOKE_CODEX_VERSIONS)


@smoke_versions
def test_smoke_plain_answer(gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path, version: str) -> None:
    upstream.enqueue(Text("Hello from the scripted upstream."))
    result = codex(gateway, V1, tmp_path, prompt="Say hello.", version=version)
    assert (result.returncode, result.last_message) == (0, "Hello from the scripted upstream."), report(result, upstream)


@smoke_versions
def test_smoke_exec_command_runs(gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path, version: str) -> None:
    upstream.responder = until_tool_result(
        lambda request: ToolCalls([call(request, "exec_command", cmd="echo toolwire-$((6*7))")])
    )
    assert "toolwire-42" in only_tool_text(tool_turn(gateway, upstream, V1, tmp_path, version))


@smoke_versions
def test_smoke_apply_patch_creates_file(gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path, version: str) -> None:
    upstream.responder = until_tool_result(lambda request: ToolCalls([call(request, "apply_patch", input=PATCH)]))
    tool_turn(gateway, upstream, V1_PLUS, tmp_path, version)
    assert (tmp_path / "greeting.txt").read_text() == "hello from apply_patch\n"


@smoke_versions
def test_smoke_code_mode_exec_runs_javascript(
    gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path, version: str
) -> None:
    upstream.responder = until_tool_result(lambda request: ToolCalls([call(request, "exec", input=EXEC_JS)]))
    assert "js-ok" in only_tool_text(tool_turn(gateway, upstream, V2, tmp_path, version))


@smoke_versions
def test_smoke_namespaced_tool_runs(gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path, version: str) -> None:
    upstream.responder = until_tool_result(lambda request: ToolCalls([call(request, "list_agents")]))
    output = only_tool_text(tool_turn(gateway, upstream, V2, tmp_path, version))
    assert json.loads(output)["agents"], output
