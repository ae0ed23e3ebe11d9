"""``toolwire agent`` in this process, against the scripted Responses server: its
instructions, its limits, and how it ends. tests/agent/test_cli.py covers the progress
it prints and its other exit codes."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner, Result

from tests.agent.processes import pid_from, wait_until_stopped
from tests.support.responses_upstream import ResponsesUpstream
from toolwire.agent import ScriptedResponse, assistant_message, function_call
from toolwire.cli import app


@pytest.fixture
def server(responses_upstream: ResponsesUpstream) -> ResponsesUpstream:
    return responses_upstream


def agent(server: ResponsesUpstream, cwd: Path, *options: str) -> Result:
    arguments = ["agent", "do the task", "--base-url", server.base_url, "--model", "m", "--cwd", str(cwd), *options]
    return CliRunner().invoke(app, arguments)


def exec_call(command: str, call_id: str) -> dict[str, object]:
    return function_call("exec_command", orjson.dumps({"cmd": command}).decode(), call_id)


def test_the_default_instructions_say_where_and_what_is_allowed(server: ResponsesUpstream, tmp_path: Path) -> None:
    server.enqueue(ScriptedResponse([assistant_message("ok")]), ScriptedResponse([assistant_message("ok")]))
    assert agent(server, tmp_path, "--approval", "never").exit_code == 0
    assert agent(server, tmp_path, "--sandbox", "danger-full-access").exit_code == 0
    where = tmp_path.resolve()
    common = (
        f"You are a coding agent working in {where}. Use exec_command to run shell commands, "
        "apply_patch to edit files and view_image to look at images. "
    )
    assert server.bodies[0]["instructions"] == common + (
        "The sandbox is read-only: apply_patch and commands that may write are refused unless the user allows "
        "them. When the task is done, reply with a short final answer and no tool calls."
    )
    assert server.bodies[1]["instructions"] == common + (
        "You may read and write files and run any command. "
        "When the task is done, reply with a short final answer and no tool calls."
    )


def test_instructions_replace_the_default(server: ResponsesUpstream, tmp_path: Path) -> None:
    server.enqueue(ScriptedResponse([assistant_message("ok")]))
    result = agent(server, tmp_path, "--instructions", "Answer in one word.")
    assert result.exit_code == 0, result.output
    assert server.bodies[0]["instructions"] == "Answer in one word."


def test_max_turns_stops_a_model_that_never_answers(server: ResponsesUpstream, tmp_path: Path) -> None:
    server.enqueue(
        ScriptedResponse([exec_call("echo 1", "call_1")]),
        ScriptedResponse([exec_call("echo 2", "call_2")]),
        ScriptedResponse([assistant_message("done")]),
    )
    result = agent(server, tmp_path, "--approval", "never", "--max-turns", "2")
    assert result.exit_code == 1
    assert result.stderr.endswith("error: fatal: the model made 2 requests without giving a final answer\n")
    assert len(server.bodies) == 2


def test_max_parallel_runs_the_calls_one_at_a_time(server: ResponsesUpstream, tmp_path: Path) -> None:
    # Each call holds a directory while it runs: a call that finds it taken ran beside another.
    command = "if mkdir running 2>/dev/null; then sleep 0.3; rmdir running; echo alone; else echo beside; fi"
    server.enqueue(
        ScriptedResponse([exec_call(command, "call_1"), exec_call(command, "call_2"), exec_call(command, "call_3")]),
        ScriptedResponse([assistant_message("done")]),
    )
    result = agent(server, tmp_path, "--sandbox", "danger-full-access", "--max-parallel", "1")
    assert result.exit_code == 0, result.output
    outputs = [item["output"] for item in server.bodies[1]["input"] if item["type"] == "function_call_output"]
    assert [output.rsplit("\n", 2)[-2] for output in outputs] == ["alone", "alone", "alone"]


def has_a_terminal() -> bool:
    try:
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    except OSError:
        return False
    return True


def test_by_default_a_write_is_asked_about_on_the_terminal(server: ResponsesUpstream, tmp_path: Path) -> None:
    if has_a_terminal():
        pytest.skip("this process has a terminal, where the question would wait for an answer")
    server.enqueue(
        ScriptedResponse([exec_call("touch written", "call_1")]),
        ScriptedResponse([assistant_message("I was not allowed.")]),
    )
    result = agent(server, tmp_path)  # read-only, approval on-request
    assert result.exit_code == 0, result.output
    assert f"approval needed: exec_command wants to run `touch written` in {tmp_path.resolve()}" in result.stderr
    assert "no terminal to ask on: declined" in result.stderr
    [output] = [item["output"] for item in server.bodies[1]["input"] if item["type"] == "function_call_output"]
    assert output.startswith("refused: the user did not allow exec_command to run `touch written`")
    assert not (tmp_path / "written").exists()


def test_a_cwd_that_is_not_a_directory(server: ResponsesUpstream, tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("")
    result = agent(server, file)
    assert (result.exit_code, result.stderr) == (2, f"error: --cwd {file} is not a directory.\n")
    assert server.requests == []


def test_ctrl_c_exits_130(server: ResponsesUpstream, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    server.enqueue(ScriptedResponse([exec_call(f"echo $$ > {pid_file}; exec sleep 30", "call_1")]))
    sent: list[int] = []

    def press_ctrl_c() -> None:
        sent.append(pid_from(pid_file, timeout=30))
        os.kill(os.getpid(), signal.SIGINT)

    helper = threading.Thread(target=press_ctrl_c)
    # A terminal's Ctrl-C handling, whatever started the tests: a shell gives a background
    # job SIGINT ignored, and Python then never turns it into KeyboardInterrupt.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    helper.start()
    try:
        result = agent(server, tmp_path, "--sandbox", "danger-full-access")
    finally:
        helper.join()
        signal.signal(signal.SIGINT, before)
    assert (result.exit_code, result.stderr.splitlines()[-1], result.stdout) == (130, "error: interrupted.", "")
    assert wait_until_stopped(sent[0], timeout=5)
