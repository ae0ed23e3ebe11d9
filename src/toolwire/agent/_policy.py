"""What the agent may do on its own: the sandbox mode, the approval mode, and who approves.

toolwire has no OS sandbox, so the policy is honest about what it can promise:

* ``Sandbox.DANGER_FULL_ACCESS``: every tool runs; nothing is checked.
* ``Sandbox.READ_ONLY``: an action that may write is refused. ``apply_patch`` always
  writes. ``exec_command`` may write unless its command is a single plain call of a
  program known not to write with any option (``is_read_only_command``); anything
  else (a pipe, a redirection, a substitution, an unknown program) counts as a write.
  ``view_image`` only reads.

The approval mode decides what happens to an action the sandbox refuses:

* ``Approval.NEVER``: it is refused, and the model is told ``refused: read-only mode ...``.
* ``Approval.ON_REQUEST``: the user is asked through the ``Approver`` seam; a yes runs
  the action once, a no is told to the model.

``TerminalApprover`` asks on the controlling terminal; ``ScriptedApprover`` is the fake
beside it. A refusal is a ``RespondToModel``: the model reads it and the loop goes on.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TextIO

from toolwire.tools import RespondToModel


class Sandbox(StrEnum):
    READ_ONLY = "read-only"
    DANGER_FULL_ACCESS = "danger-full-access"


class Approval(StrEnum):
    NEVER = "never"
    ON_REQUEST = "on-request"


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One action the sandbox refuses, described for the person asked to allow it."""

    tool: str
    action: str
    """E.g. ``run `rm -r build` in /home/me/project``."""


class Approver(Protocol):
    """The seam that asks a person: ``True`` allows the action once."""

    async def __call__(self, request: ApprovalRequest) -> bool: ...


class ScriptedApprover:
    """The fake approver: answers from a list (then ``default``) and records each request."""

    def __init__(self, answers: Iterable[bool] = (), *, default: bool = False) -> None:
        self._answers = deque(answers)
        self.default = default
        self.requests: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> bool:
        self.requests.append(request)
        return self._answers.popleft() if self._answers else self.default


class TerminalApprover:
    """Asks ``Allow ...? [y/N]`` on the controlling terminal, one question at a time.

    Reads the answer from ``/dev/tty`` so that a piped stdin is never consumed; when
    there is no terminal, every action is declined (and the prompt says so).
    """

    def __init__(self, prompt_stream: TextIO | None = None, tty_path: str = "/dev/tty") -> None:
        self._out = prompt_stream or sys.stderr
        self._tty_path = tty_path
        self._one_at_a_time = asyncio.Lock()

    async def __call__(self, request: ApprovalRequest) -> bool:
        async with self._one_at_a_time:
            return await asyncio.to_thread(self._ask, request)

    def _ask(self, request: ApprovalRequest) -> bool:
        self._out.write(f"approval needed: {request.tool} wants to {request.action}\n")
        try:
            answer = _ask_terminal(self._tty_path, "Allow once? [y/N] ")
        except OSError:
            self._out.write("no terminal to ask on: declined\n")
            self._out.flush()
            return False
        return answer.strip().lower() in {"y", "yes"}


def _ask_terminal(path: str, question: str) -> str:
    """Write ``question`` to the terminal at ``path`` and read one line back."""
    fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    try:
        os.write(fd, question.encode())
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = os.read(fd, 1024)
            if not chunk:
                break
            answer += chunk
    finally:
        os.close(fd)
    return answer.decode("utf-8", "replace")


@dataclass(frozen=True)
class Policy:
    """The sandbox and approval modes, and the approver asked in ``on-request`` mode
    (by default one that declines everything; the CLI uses ``TerminalApprover``)."""

    sandbox: Sandbox = Sandbox.READ_ONLY
    approval: Approval = Approval.NEVER
    approver: Approver = field(default_factory=ScriptedApprover)

    async def authorize(self, request: ApprovalRequest, *, writes: bool) -> None:
        """Return if the action may run; raise ``RespondToModel`` with the reason if not."""
        if not writes or self.sandbox is Sandbox.DANGER_FULL_ACCESS:
            return
        if self.approval is Approval.NEVER:
            raise RespondToModel(
                f"refused: read-only mode does not allow {request.tool} to {request.action}"
            )
        if not await self.approver(request):
            raise RespondToModel(
                f"refused: the user did not allow {request.tool} to {request.action}"
            )


# ---------------------------------------------------------------- read-only commands

# Programs that never write files or run other programs, whatever their arguments.
# (Left out on purpose: sort -o, tree -o, file -C, sed w, rg --pre, env, date -s,
# git, which refreshes its index.)
_READERS = frozenset(
    {
        "cat",
        "cmp",
        "cut",
        "df",
        "diff",
        "du",
        "echo",
        "head",
        "ls",
        "nl",
        "pwd",
        "readlink",
        "realpath",
        "stat",
        "tail",
        "wc",
        "which",
        "grep",
        "basename",
        "dirname",
        "true",
        "false",
    }
)
# find is a reader except for these actions, which delete, run or write.
_FIND_WRITERS = frozenset(
    {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
# Shell syntax that chains, redirects or substitutes (even inside quotes: be safe).
_SHELL_SYNTAX = frozenset(";&|<>$`(){}\n\r\\")


def is_read_only_command(command: str) -> bool:
    """Whether ``command`` is a single plain call of a program that cannot write.

    Conservative: anything it cannot prove harmless is False.
    """
    if any(char in _SHELL_SYNTAX for char in command):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if not words:
        return False
    program, arguments = words[0], words[1:]
    if program == "find":
        return not any(argument in _FIND_WRITERS for argument in arguments)
    return program in _READERS
