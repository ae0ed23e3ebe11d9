"""exec_command: output, exit codes, workdir, timeout, output limit, processes left behind."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

import pytest

from toolwire.agent import (
    Approval,
    ExecCommand,
    Policy,
    Sandbox,
    ScriptedApprover,
    ToolContext,
)
from toolwire.agent.builtin.exec_command import OutputCapture, _kill_group
from toolwire.tools import RespondToModel

from .processes import is_running, wait_until_stopped


async def test_runs_a_command_and_reports_exit_code_and_output(full_access: ToolContext) -> None:
    output = await ExecCommand().run({"cmd": "echo out; echo err >&2; exit 3"}, full_access)
    assert not output.success
    assert isinstance(output.content, str)
    assert output.content.startswith("Exit code: 3\nWall time: ")
    assert output.content.endswith("Output:\nout\nerr\n")


async def test_runs_in_the_working_directory_or_the_workdir(full_access: ToolContext) -> None:
    (full_access.cwd / "sub").mkdir()
    here = await ExecCommand().run({"cmd": "pwd"}, full_access)
    there = await ExecCommand().run({"cmd": "pwd", "workdir": "sub"}, full_access)
    assert str(here.content).endswith(f"{full_access.cwd.resolve()}\n")
    assert str(there.content).endswith(f"{full_access.cwd.resolve() / 'sub'}\n")


async def test_a_missing_workdir_is_told_to_the_model(full_access: ToolContext) -> None:
    with pytest.raises(RespondToModel, match="the workdir nowhere is not a directory"):
        await ExecCommand().run({"cmd": "pwd", "workdir": "nowhere"}, full_access)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "needs `cmd`"),
        ({"cmd": ""}, "needs `cmd`"),
        ({"cmd": 5}, "needs `cmd`"),
        ({"cmd": "ls", "timeout_ms": -1}, "`timeout_ms` must be a positive number"),
        ({"cmd": "ls", "max_output_bytes": "big"}, "`max_output_bytes` must be a positive number"),
        ({"cmd": "ls", "workdir": 3}, "`workdir` must be a string"),
    ],
)
async def test_bad_arguments_are_told_to_the_model(
    full_access: ToolContext, arguments: dict[str, object], message: str
) -> None:
    with pytest.raises(RespondToModel, match=message):
        await ExecCommand().run(dict(arguments), full_access)


# A command that would outlive the test: a run that waits for it instead of returning
# fails at this bound, long before the command would end by itself.
RETURNS_WITHIN = 60


async def test_a_command_is_killed_at_its_timeout(full_access: ToolContext) -> None:
    output = await asyncio.wait_for(
        ExecCommand().run({"cmd": "echo $$; sleep 600", "timeout_ms": 300}, full_access), RETURNS_WITHIN
    )
    assert not output.success
    assert str(output.content).startswith("Killed after the 0.3 s timeout")
    shell = int(str(output.content).split("Output:\n", 1)[1])
    assert wait_until_stopped(shell)


async def test_the_timeout_does_not_wait_for_a_process_that_left_the_group(
    full_access: ToolContext,
) -> None:
    """``setsid`` puts a process out of reach of the group kill; it still holds the
    output pipe, and the timeout must not wait for it to let go."""
    output = await asyncio.wait_for(
        ExecCommand().run({"cmd": "setsid sleep 600 & echo $!; sleep 600", "timeout_ms": 300}, full_access),
        RETURNS_WITHIN,
    )
    pid = int(str(output.content).split("Output:\n", 1)[1])
    assert is_running(pid)  # still holding the pipe: the run returned without waiting for it
    os.kill(pid, signal.SIGKILL)
    assert str(output.content).startswith("Killed after the 0.3 s timeout")


async def test_the_handler_caps_the_timeout_the_model_asks_for(full_access: ToolContext) -> None:
    output = await ExecCommand(max_timeout=0.2).run(
        {"cmd": "sleep 30", "timeout_ms": 100_000}, full_access
    )
    assert str(output.content).startswith("Killed after the 0.2 s timeout")


async def test_long_output_keeps_its_head_and_tail(full_access: ToolContext) -> None:
    output = await ExecCommand(output_limit=100).run({"cmd": "seq 1 10000"}, full_access)
    text = str(output.content).split("Output:\n", 1)[1]
    assert text.startswith("1\n2\n3\n")
    assert text.endswith("9999\n10000\n")
    assert "bytes of output omitted" in text
    assert len(text) < 200


@pytest.mark.parametrize(
    ("limit", "chunks", "expected"),
    [
        (10, [b"abc"], "abc"),
        (10, [b"0123456789"], "0123456789"),
        (4, [b"ab", b"cdef", b"gh"], "ab\n[... 4 bytes of output omitted ...]\ngh"),
        (5, [b"abcdefgh"], "abc\n[... 3 bytes of output omitted ...]\ngh"),
        (1, [b"xyz"], "x\n[... 2 bytes of output omitted ...]\n"),
    ],
)
def test_output_capture(limit: int, chunks: list[bytes], expected: str) -> None:
    capture = OutputCapture(limit)
    for chunk in chunks:
        capture.feed(chunk)
    assert capture.text() == expected


async def test_background_processes_are_stopped_when_the_shell_exits(
    full_access: ToolContext,
) -> None:
    output = await asyncio.wait_for(ExecCommand().run({"cmd": "sleep 600 & echo $!"}, full_access), RETURNS_WITHIN)
    pid = int(str(output.content).split("Output:\n", 1)[1])
    assert wait_until_stopped(pid)


# ---------------------------------------------------------------- the policy


def context(
    tmp_path: Path, approval: Approval, approver: ScriptedApprover | None = None
) -> ToolContext:
    policy = Policy(Sandbox.READ_ONLY, approval, approver or ScriptedApprover())
    return ToolContext(tmp_path, policy)


async def test_read_only_runs_commands_that_cannot_write(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("content\n")
    output = await ExecCommand().run({"cmd": "cat a.txt"}, context(tmp_path, Approval.NEVER))
    assert str(output.content).endswith("Output:\ncontent\n")


async def test_read_only_refuses_other_commands(tmp_path: Path) -> None:
    with pytest.raises(RespondToModel, match="refused: read-only mode does not allow exec_command"):
        await ExecCommand().run({"cmd": "touch x"}, context(tmp_path, Approval.NEVER))
    assert not (tmp_path / "x").exists()


async def test_on_request_asks_and_runs_what_the_user_allows(tmp_path: Path) -> None:
    approver = ScriptedApprover([True, False])
    ctx = context(tmp_path, Approval.ON_REQUEST, approver)
    await ExecCommand().run({"cmd": "touch yes"}, ctx)
    with pytest.raises(
        RespondToModel, match="refused: the user did not allow exec_command to run `touch no`"
    ):
        await ExecCommand().run({"cmd": "touch no"}, ctx)
    assert (tmp_path / "yes").exists() and not (tmp_path / "no").exists()
    assert [request.action for request in approver.requests] == [
        f"run `touch yes` in {tmp_path.resolve()}",
        f"run `touch no` in {tmp_path.resolve()}",
    ]


async def test_on_request_does_not_ask_for_read_only_commands(tmp_path: Path) -> None:
    approver = ScriptedApprover()
    await ExecCommand().run({"cmd": "ls"}, context(tmp_path, Approval.ON_REQUEST, approver))
    assert approver.requests == []


async def test_the_command_runs_in_bash_with_stdin_closed(full_access: ToolContext) -> None:
    """Whatever the agent's own stdin is (a pipe here), the command's is /dev/null: a
    command that reads it ends at once instead of waiting, or stealing the agent's input."""
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        shell = await ExecCommand().run({"cmd": "echo bash=$BASH_VERSION; readlink /proc/self/fd/0; cat"}, full_access)
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert isinstance(shell.content, str) and shell.success
    bash, stdin = shell.content.split("Output:\n", 1)[1].splitlines()
    assert bash.startswith("bash=") and bash != "bash="
    assert stdin == "/dev/null"


async def test_output_that_is_not_utf8_is_shown_with_replacement_characters(full_access: ToolContext) -> None:
    output = await ExecCommand(output_limit=8).run({"cmd": r"printf '\377ab\376cdefghij\375'"}, full_access)
    text = str(output.content).split("Output:\n", 1)[1]
    assert text == "\ufffdab\ufffd\n[... 5 bytes of output omitted ...]\nhij\ufffd"


@pytest.mark.parametrize(
    ("limit", "chunks", "expected"),
    [
        (8, [b"ab", b"cdef"], "abcdef"),  # the head fills across chunks
        (4, [b"abcde"], "ab\n[... 1 bytes of output omitted ...]\nde"),
        (4, [b"abcd", b"", b"ef"], "ab\n[... 2 bytes of output omitted ...]\nef"),
    ],
)
def test_output_capture_edges(limit: int, chunks: list[bytes], expected: str) -> None:
    capture = OutputCapture(limit)
    for chunk in chunks:
        capture.feed(chunk)
    assert capture.text() == expected
    assert capture.total == sum(len(chunk) for chunk in chunks)


async def test_a_shell_that_exits_while_a_background_process_holds_its_output(full_access: ToolContext) -> None:
    """The shell's exit ends the call (its exit code, what was written by then), not the
    background process that still has the output pipe. (The shell lives a moment longer
    than its start, so that its exit is seen while the output is being read.)"""
    output = await asyncio.wait_for(
        ExecCommand().run({"cmd": "(sleep 600; echo late) & echo $!; sleep 0.2; echo now", "timeout_ms": 30_000}, full_access),
        RETURNS_WITHIN,
    )
    text = str(output.content)
    assert text.startswith("Exit code: 0\n") and output.success
    pid, now = text.split("Output:\n", 1)[1].splitlines()
    assert now == "now"
    assert wait_until_stopped(int(pid))


async def test_the_wall_time_is_how_long_the_command_took(full_access: ToolContext) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    output = await ExecCommand().run({"cmd": "true"}, full_access)
    took = loop.time() - started
    reported = float(str(output.content).split("Wall time: ", 1)[1].split(" seconds", 1)[0])
    assert 0 <= reported <= took + 0.01


async def test_the_default_timeout_and_output_limit(full_access: ToolContext) -> None:
    handler = ExecCommand()
    assert (handler.default_timeout, handler.max_timeout, handler.output_limit) == (60.0, 600.0, 32_768)
    long = await handler.run({"cmd": "head -c 40000 /dev/zero | tr '\\0' x"}, full_access)
    assert "[... 7232 bytes of output omitted ...]" in str(long.content)
    quick = await ExecCommand(default_timeout=0.2).run({"cmd": "sleep 600"}, full_access)
    assert str(quick.content).startswith("Killed after the 0.2 s timeout\n")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"cmd": "ls", "timeout_ms": 0}, "exec_command: `timeout_ms` must be a positive number"),
        ({"cmd": "ls", "max_output_bytes": True}, "exec_command: `max_output_bytes` must be a positive number"),
        ({"cmd": "ls", "workdir": 3}, "exec_command: `workdir` must be a string"),
    ],
)
async def test_bad_arguments_are_told_exactly(full_access: ToolContext, arguments: dict[str, object], message: str) -> None:
    with pytest.raises(RespondToModel) as refused:
        await ExecCommand().run(dict(arguments), full_access)
    assert refused.value.message == message


async def test_the_smallest_limits_the_model_may_ask_for(full_access: ToolContext) -> None:
    output = await ExecCommand().run({"cmd": "printf abc", "max_output_bytes": 1, "timeout_ms": 1000}, full_access)
    assert str(output.content).endswith("Output:\na\n[... 2 bytes of output omitted ...]\n")


async def test_a_working_directory_that_is_gone(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    with pytest.raises(RespondToModel) as refused:
        await ExecCommand().run({"cmd": "pwd"}, ToolContext(gone, Policy(sandbox=Sandbox.DANGER_FULL_ACCESS)))
    assert refused.value.message == (
        f"exec_command could not start the command: [Errno 2] No such file or directory: {gone!r}"
    )


async def test_without_bash_the_command_runs_in_sh(full_access: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without /bin/bash (a minimal container): the command runs in /bin/sh."""
    real_exists = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda path: path != "/bin/bash" and real_exists(path))
    output = await ExecCommand().run({"cmd": 'echo "$0"'}, full_access)  # the shell's own name
    assert output.success and str(output.content).endswith("Output:\n/bin/sh\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="a process of another user is made as root")
def test_a_group_holding_a_process_the_agent_may_not_signal_is_no_error() -> None:
    """A command's group may be left with a process the agent may not signal (one that ran
    a setuid program, such as sudo): stopping the group after the command is then no
    error, and that process is not the agent's to stop (its owner's call does stop it).
    The agent here is a process of user nobody, forked from this one; the process left
    over is root's."""
    left_over = subprocess.Popen(["sleep", "30"], start_new_session=True)  # its own group
    try:
        agent = os.fork()
        if agent == 0:  # the child: the agent, as user nobody
            status = 1
            try:
                os.setgid(65534)
                os.setuid(65534)
                _kill_group(left_over.pid)
                status = 0
            finally:
                os._exit(status)
        _, status = os.waitpid(agent, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "stopping the group raised"
        assert left_over.poll() is None
        _kill_group(left_over.pid)  # as its owner
        assert left_over.wait(timeout=10) == -signal.SIGKILL
    finally:
        left_over.kill()
        left_over.wait()
