"""``toolwire agent``: arguments, progress on stderr, the answer on stdout, exit codes."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from tests.support.responses_upstream import ResponsesUpstream
from toolwire.agent import (
    ScriptedResponse,
    assistant_message,
    custom_tool_call,
    function_call,
)
from toolwire.cli import agent_command

from .processes import pid_from, wait_until_stopped

app = typer.Typer()
app.command()(agent_command)


def run_agent(
    server: ResponsesUpstream, cwd: Path, *options: str, env: dict[str, str] | None = None
) -> Result:
    arguments = [
        "do the task",
        "--base-url",
        server.base_url,
        "--model",
        "m",
        "--cwd",
        str(cwd),
        *options,
    ]
    return CliRunner().invoke(app, arguments, env=env)


def test_runs_to_the_answer_with_progress_on_stderr(
    server: ResponsesUpstream, tmp_path: Path
) -> None:
    server.enqueue(
        ScriptedResponse(
            [
                assistant_message("Looking."),
                function_call("exec_command", '{"cmd": "echo hi"}', "call_1"),
            ]
        ),
        ScriptedResponse([assistant_message("The command said hi.")]),
    )
    result = run_agent(server, tmp_path, "--approval", "never")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "The command said hi."
    assert '→ exec_command [call_1] {"cmd": "echo hi"}' in result.stderr
    assert "← exec_command [call_1] ok in" in result.stderr
    assert "    Exit code: 0" in result.stderr
    assert "· assistant: Looking." in result.stderr
    body = server.bodies[0]
    assert body["model"] == "m"
    assert str(tmp_path.resolve()) in body["instructions"] and "read-only" in body["instructions"]


def test_read_only_refusals_go_to_the_model(server: ResponsesUpstream, tmp_path: Path) -> None:
    add = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\n"
    server.enqueue(
        ScriptedResponse([custom_tool_call("apply_patch", add, "call_1")]),
        ScriptedResponse([assistant_message("I was not allowed to write.")]),
    )
    result = run_agent(server, tmp_path, "--approval", "never", "--sandbox", "read-only")
    assert result.exit_code == 0, result.stderr
    assert "← apply_patch [call_1] error" in result.stderr
    assert server.bodies[1]["input"][-1]["output"].startswith("refused: read-only mode")
    assert not (tmp_path / "a.txt").exists()


def test_full_access_writes(server: ResponsesUpstream, tmp_path: Path) -> None:
    add = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\n"
    server.enqueue(
        ScriptedResponse([custom_tool_call("apply_patch", add, "call_1")]),
        ScriptedResponse([assistant_message("Written.")]),
    )
    result = run_agent(server, tmp_path, "--sandbox", "danger-full-access")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "a.txt").read_text() == "x\n"


def test_a_fatal_error_exits_1(server: ResponsesUpstream, tmp_path: Path) -> None:
    server.enqueue(ScriptedResponse([function_call("apply_patch", "{}", "call_1")]))
    result = run_agent(server, tmp_path)
    assert result.exit_code == 1
    assert "error: fatal: tool apply_patch invoked with incompatible payload" in result.stderr
    assert result.stdout == ""


def test_a_failed_response_exits_1(server: ResponsesUpstream, tmp_path: Path) -> None:
    server.enqueue(ScriptedResponse(status="failed", error_message="context_length_exceeded"))
    result = run_agent(server, tmp_path)
    assert result.exit_code == 1
    assert "error: The response failed: context_length_exceeded." in result.stderr


def test_the_api_key_comes_from_the_named_variable(
    server: ResponsesUpstream, tmp_path: Path
) -> None:
    server.enqueue(ScriptedResponse([assistant_message("ok")]))
    result = run_agent(
        server, tmp_path, "--api-key-env", "AGENT_TEST_KEY", env={"AGENT_TEST_KEY": "sk-agent"}
    )
    assert result.exit_code == 0, result.stderr
    assert server.requests[0].headers["authorization"] == "Bearer sk-agent"
    assert "sk-agent" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--api-key-env", "AGENT_TEST_UNSET_KEY"], "AGENT_TEST_UNSET_KEY, which is not set"),
        (["--approval", "sometimes"], "Invalid value for '--approval'"),
        (
            ["--base-url", "http://agent:secret-pw@127.0.0.1:80a/v1"],
            "error: --base-url: the upstream address http://127.0.0.1:80a/v1 is not a URL: its port must be",
        ),
        (["--base-url", "127.0.0.1:8787/v1"], "error: --base-url: the upstream address 127.0.0.1:8787/v1 is not an http://"),
    ],
)
def test_bad_usage_exits_2(
    server: ResponsesUpstream, tmp_path: Path, options: list[str], message: str
) -> None:
    result = run_agent(server, tmp_path, *options)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "secret-pw" not in result.stderr + result.stdout and "Traceback" not in result.stderr
    assert server.requests == []


def test_credentials_in_the_base_url_and_a_key_exit_2_without_the_password(
    server: ResponsesUpstream, tmp_path: Path
) -> None:
    with_credentials = server.base_url.replace("http://", "http://agent:secret-pw@")
    result = run_agent(
        server, tmp_path, "--base-url", with_credentials, "--api-key-env", "AGENT_TEST_KEY", env={"AGENT_TEST_KEY": "sk-agent"}
    )
    assert (result.exit_code, result.stderr) == (
        2, f"error: --base-url: the upstream URL {server.base_url} carries credentials and an API key is set too: use one.\n"
    )
    assert server.requests == []


def test_a_proxy_the_environment_names_that_cannot_be_used_exits_2_as_the_variable_s_fault(
    server: ResponsesUpstream, tmp_path: Path
) -> None:
    proxied = {"HTTP_PROXY": "http://agent:secret-pw@proxy.corp:99999", "NO_PROXY": ""}
    result = run_agent(server, tmp_path, "--base-url", "http://models.internal/v1", env=proxied)  # (loopback goes direct)
    assert (result.exit_code, result.stderr) == (
        2,
        "error: HTTP_PROXY names the proxy http://proxy.corp:99999, which toolwire cannot use: only http:// and "
        "https:// proxies with a host and a valid port are supported. Set NO_PROXY to the upstream's host to "
        "connect directly.\n",
    )
    assert server.requests == []


def test_a_timeout_exits_124(server: ResponsesUpstream, tmp_path: Path) -> None:
    server.enqueue(ScriptedResponse([assistant_message("...")], stall_after=2))
    result = run_agent(server, tmp_path, "--timeout", "0.5")
    assert result.exit_code == 124
    assert "error: timed out after 0.5 s." in result.stderr
    server.wait_for_disconnect()


def test_ctrl_c_stops_the_tools_and_exits_130(server: ResponsesUpstream, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    command = f"echo $$ > {pid_file}; exec sleep 30"
    server.enqueue(
        ScriptedResponse([function_call("exec_command", f'{{"cmd": "{command}"}}', "call_1")])
    )
    # Ctrl-C in a terminal: SIGINT raises KeyboardInterrupt. (A process started in the
    # background of a non-interactive shell, as CI may be, inherits SIGINT ignored.)
    script = (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "import typer; from toolwire.cli import agent_command; typer.run(agent_command)"
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            script,
            "go",
            "--base-url",
            server.base_url,
            "--model",
            "m",
            "--cwd",
            str(tmp_path),
            "--sandbox",
            "danger-full-access",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        tool_pid = pid_from(pid_file, timeout=20)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert b"error: interrupted." in stderr
    assert stdout == b""
    assert wait_until_stopped(tool_pid, timeout=2)
