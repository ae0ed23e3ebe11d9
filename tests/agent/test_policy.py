"""The sandbox and approval policy, and which commands count as read-only."""

from __future__ import annotations

import asyncio
import fcntl
import io
import os
import select
import termios
from pathlib import Path

import pytest

from toolwire.agent import (
    Approval,
    ApprovalRequest,
    Policy,
    Sandbox,
    ScriptedApprover,
    TerminalApprover,
    is_read_only_command,
)
from toolwire.tools import RespondToModel

REQUEST = ApprovalRequest("exec_command", "run `make` in /src")


@pytest.mark.parametrize(
    ("command", "read_only"),
    [
        ("ls -la", True),
        ("cat README.md", True),
        ("grep -rn 'def main' src", True),
        ("head -n 5 a.txt", True),
        ("find . -name '*.py'", True),
        ("pwd", True),
        ("echo hi", True),
        ("find . -delete", False),
        ("find . -exec rm {} ;", False),
        ("rm -rf build", False),
        ("touch x", False),
        ("echo hi > out.txt", False),
        ("cat a | tee b", False),
        ("ls; rm x", False),
        ("ls && rm x", False),
        ("echo $(rm x)", False),
        ("echo `rm x`", False),
        ("FOO=1 ls", False),
        ("./ls", False),
        ("/bin/ls", False),
        ("sort -o out in", False),
        ("git status", False),
        ("python -c 'print(1)'", False),
        ("ls 'unterminated", False),
        ("", False),
        ("ls\nrm x", False),
    ],
)
def test_is_read_only_command(command: str, read_only: bool) -> None:
    assert is_read_only_command(command) is read_only


@pytest.mark.parametrize(
    ("sandbox", "approval", "writes", "answer", "outcome", "asked"),
    [
        (Sandbox.DANGER_FULL_ACCESS, Approval.NEVER, True, False, None, False),
        (Sandbox.DANGER_FULL_ACCESS, Approval.ON_REQUEST, True, False, None, False),
        (Sandbox.READ_ONLY, Approval.NEVER, False, False, None, False),
        (Sandbox.READ_ONLY, Approval.ON_REQUEST, False, False, None, False),
        (Sandbox.READ_ONLY, Approval.NEVER, True, True, "refused: read-only mode", False),
        (Sandbox.READ_ONLY, Approval.ON_REQUEST, True, True, None, True),
        (
            Sandbox.READ_ONLY,
            Approval.ON_REQUEST,
            True,
            False,
            "refused: the user did not allow",
            True,
        ),
    ],
)
async def test_authorize(
    sandbox: Sandbox,
    approval: Approval,
    writes: bool,
    answer: bool,
    outcome: str | None,
    asked: bool,
) -> None:
    approver = ScriptedApprover([answer])
    policy = Policy(sandbox, approval, approver)
    if outcome is None:
        await policy.authorize(REQUEST, writes=writes)
    else:
        with pytest.raises(RespondToModel, match=outcome):
            await policy.authorize(REQUEST, writes=writes)
    assert approver.requests == ([REQUEST] if asked else [])


@pytest.mark.parametrize(
    ("typed", "allowed"), [(b"y\n", True), (b"yes\n", True), (b"\n", False), (b"n\n", False)]
)
async def test_terminal_approver_asks_on_the_terminal(typed: bytes, allowed: bool) -> None:
    controller, terminal = os.openpty()
    try:
        os.write(controller, typed)
        prompts = io.StringIO()
        approver = TerminalApprover(prompts, tty_path=os.ttyname(terminal))
        assert await approver(REQUEST) is allowed
        assert "exec_command wants to run `make` in /src" in prompts.getvalue()
        shown = b""
        while b"Allow once? [y/N]" not in shown:  # the terminal also echoes what was typed
            ready, _, _ = select.select([controller], [], [], 2.0)
            assert ready, f"no prompt on the terminal: {shown!r}"
            shown += os.read(controller, 4096)
    finally:
        os.close(controller)
        os.close(terminal)


async def test_terminal_approver_declines_without_a_terminal(tmp_path: Path) -> None:
    prompts = io.StringIO()
    approver = TerminalApprover(prompts, tty_path=str(tmp_path / "missing" / "tty"))
    assert await approver(REQUEST) is False
    assert prompts.getvalue() == (
        "approval needed: exec_command wants to run `make` in /src\nno terminal to ask on: declined\n"
    )


async def test_the_question_on_the_terminal_is_exactly_allow_once() -> None:
    controller, terminal = os.openpty()
    try:
        attributes = termios.tcgetattr(terminal)
        attributes[3] &= ~termios.ECHO  # what the terminal shows is then only the question
        termios.tcsetattr(terminal, termios.TCSANOW, attributes)
        os.write(controller, b"n\n")
        assert await TerminalApprover(io.StringIO(), tty_path=os.ttyname(terminal))(REQUEST) is False
        question = b"Allow once? [y/N] "
        shown = b""
        while len(shown) < len(question):
            ready, _, _ = select.select([controller], [], [], 2.0)
            assert ready, f"no question on the terminal: {shown!r}"
            shown += os.read(controller, 4096)
        assert shown == question
    finally:
        os.close(controller)
        os.close(terminal)


def test_by_default_the_question_goes_to_the_controlling_terminal() -> None:
    """In a process whose controlling terminal is a pseudo-terminal, an approver made
    without a path asks there and reads the answer typed there."""
    approver = TerminalApprover(io.StringIO())
    controller, terminal = os.openpty()
    pid = os.fork()
    if pid == 0:  # the child: a session of its own, with the pseudo-terminal as its terminal
        try:
            os.close(controller)
            os.setsid()
            fcntl.ioctl(terminal, termios.TIOCSCTTY, 0)
            os._exit(0 if asyncio.run(approver(REQUEST)) else 1)
        except BaseException:
            os._exit(2)
    os.close(terminal)
    try:
        os.write(controller, b"y\n")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(controller)
    assert os.waitstatus_to_exitcode(status) == 0, "the answer typed on the terminal was not read"


def answered_on_a_terminal(typed: bytes) -> bool:
    controller, terminal = os.openpty()
    try:
        os.write(controller, typed)
        approver = TerminalApprover(io.StringIO(), tty_path=os.ttyname(terminal))
        return asyncio.run(approver(REQUEST))
    finally:
        os.close(controller)
        os.close(terminal)


def test_a_long_answer_is_read_whole_and_an_undecodable_one_declines() -> None:
    assert answered_on_a_terminal(b"y" + b" " * 1500 + b"\n") is True  # longer than one read
    assert answered_on_a_terminal(b"\xff\xfe\n") is False
    assert answered_on_a_terminal(b"\x04") is False  # Ctrl-D: the terminal ends the input


async def test_the_scripted_approver_answers_from_its_list_then_the_default() -> None:
    approver = ScriptedApprover([True], default=False)
    assert [await approver(REQUEST), await approver(REQUEST)] == [True, False]
    assert approver.requests == [REQUEST, REQUEST]
    assert await ScriptedApprover(default=True)(REQUEST) is True


async def test_by_default_nobody_approves() -> None:
    assert await ScriptedApprover()(REQUEST) is False
    with pytest.raises(RespondToModel, match="refused: the user did not allow exec_command"):
        await Policy(Sandbox.READ_ONLY, Approval.ON_REQUEST).authorize(REQUEST, writes=True)


def test_find_without_a_path_is_still_judged_by_its_actions() -> None:
    assert is_read_only_command("find -delete") is False
    assert is_read_only_command("find -name x") is True
