"""``exec_command``: run one shell command in a working directory, with a timeout and an
output limit.

The command runs as ``bash -c CMD`` (``sh`` when there is no bash) in its own process
group, stdin closed, stdout and stderr merged. When the shell exits, whatever it left
running in the background is killed, as is everything on a timeout or when the call is
cancelled. The output keeps its head and its tail when it is longer than the limit.

In read-only mode only commands ``is_read_only_command`` accepts run without approval.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolwire.protocol import FunctionTool
from toolwire.tools import RespondToModel

from .._handlers import FunctionToolHandler, ToolContext, ToolOutput
from .._policy import ApprovalRequest, is_read_only_command

_DRAIN_AFTER_EXIT_SECONDS = 0.5
_EXIT_POLL_SECONDS = 0.05
_READ_LIMIT = 2**16  # asyncio's own default for subprocess streams


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None
    """None when the command was killed on its timeout."""
    output: str
    timed_out: bool
    seconds: float


class OutputCapture:
    """Keeps the first and the last ``limit // 2`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self._head_limit = limit - limit // 2
        self._tail_limit = limit // 2
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self._tail_limit:
            self._tail += chunk
            del self._tail[: max(0, len(self._tail) - self._tail_limit)]

    def text(self) -> str:
        omitted = self.total - len(self._head) - len(self._tail)
        head = self._head.decode("utf-8", "replace")
        tail = self._tail.decode("utf-8", "replace")
        if omitted <= 0:
            return head + tail
        return f"{head}\n[... {omitted} bytes of output omitted ...]\n{tail}"


def shell_argv(command: str) -> list[str]:
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    return [shell, "-c", command]


async def run_command(
    argv: list[str], *, cwd: Path, timeout: float, output_limit: int
) -> CommandResult:
    """Run ``argv`` to its end or its timeout; cancelling kills its whole process group."""
    started = time.monotonic()
    loop = asyncio.get_running_loop()
    # ``create_subprocess_exec``, keeping the transport: it must be closed even when a
    # process that left the group still holds the output pipe.
    transport, protocol = await loop.subprocess_exec(
        lambda: asyncio.subprocess.SubprocessStreamProtocol(limit=_READ_LIMIT, loop=loop),
        *argv,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    process = asyncio.subprocess.Process(transport, protocol, loop)
    capture = OutputCapture(output_limit)
    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await _wait_and_read(process, capture)
    except TimeoutError:
        timed_out = True
    finally:
        _kill_group(process.pid)
        await _exited(process)
        transport.close()
    return CommandResult(
        exit_code=None if timed_out else process.returncode,
        output=capture.text(),
        timed_out=timed_out,
        seconds=time.monotonic() - started,
    )


async def _wait_and_read(process: asyncio.subprocess.Process, capture: OutputCapture) -> None:
    """Read until the shell has exited; then give background processes that still hold
    its output a moment, and stop reading.

    ``Process.wait()`` also waits for the output to close, which a background process
    can hold open for ever, so the shell's exit is watched through ``returncode``.
    """
    assert process.stdout is not None
    stdout = process.stdout

    async def read_all() -> None:
        while chunk := await stdout.read(65536):
            capture.feed(chunk)

    reader = asyncio.create_task(read_all())
    try:
        while process.returncode is None:
            await asyncio.wait({reader}, timeout=_EXIT_POLL_SECONDS)
            if reader.done():
                await process.wait()  # the output is closed: this waits for the exit only
        await asyncio.wait({reader}, timeout=_DRAIN_AFTER_EXIT_SECONDS)
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


async def _exited(process: asyncio.subprocess.Process) -> None:
    """Wait for the shell itself to exit. Not ``Process.wait()``: that also waits for the
    output to close, which a process that left the group (``setsid cmd &``) can hold
    open for as long as it runs, long after a timeout or Ctrl-C."""
    while process.returncode is None:
        await asyncio.sleep(_EXIT_POLL_SECONDS)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def format_result(command: str, result: CommandResult, timeout: float) -> str:
    if result.timed_out:
        status = f"Killed after the {timeout:g} s timeout"
    else:
        status = f"Exit code: {result.exit_code}"
    return f"{status}\nWall time: {result.seconds:.2f} seconds\nOutput:\n{result.output}"


class ExecCommand(FunctionToolHandler):
    """The ``exec_command`` tool. Limits the model may ask for are capped by the handler's."""

    spec = FunctionTool(
        type="function",
        name="exec_command",
        description=(
            "Runs a shell command (bash -c) and returns its exit code and output "
            "(stdout and stderr merged). stdin is closed; background processes are "
            "stopped when the command exits."
        ),
        strict=False,
        parameters={
            "type": "object",
            "properties": {
                "cmd": {"type": "string", "description": "The shell command to run."},
                "workdir": {
                    "type": "string",
                    "description": "Directory to run it in, relative to the working directory. Defaults to it.",
                },
                "timeout_ms": {
                    "type": "number",
                    "description": "Kill the command after this many milliseconds.",
                },
                "max_output_bytes": {"type": "number", "description": "Longest output to return."},
            },
            "required": ["cmd"],
            "additionalProperties": False,
        },
    )

    def __init__(
        self,
        *,
        default_timeout: float = 60.0,
        max_timeout: float = 600.0,
        output_limit: int = 32_768,
    ) -> None:
        self.default_timeout = default_timeout
        self.max_timeout = max_timeout
        self.output_limit = output_limit

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        command = arguments.get("cmd")
        if not isinstance(command, str) or not command.strip():
            raise RespondToModel("exec_command needs `cmd`, a non-empty string")
        workdir = _workdir(arguments.get("workdir"), context.cwd)
        timeout = min(
            _positive(arguments, "timeout_ms", self.default_timeout * 1000) / 1000, self.max_timeout
        )
        limit = int(
            min(_positive(arguments, "max_output_bytes", self.output_limit), self.output_limit)
        )
        await context.policy.authorize(
            ApprovalRequest("exec_command", f"run `{command}` in {workdir}"),
            writes=not is_read_only_command(command),
        )
        try:
            result = await run_command(
                shell_argv(command), cwd=workdir, timeout=timeout, output_limit=limit
            )
        except OSError as exc:
            raise RespondToModel(f"exec_command could not start the command: {exc}") from exc
        success = not result.timed_out and result.exit_code == 0
        return ToolOutput(format_result(command, result, timeout), success=success)


def _workdir(value: Any, cwd: Path) -> Path:
    if value is None:
        return cwd
    if not isinstance(value, str):
        raise RespondToModel("exec_command: `workdir` must be a string")
    workdir = (cwd / value).resolve()
    if not workdir.is_dir():
        raise RespondToModel(f"exec_command: the workdir {value} is not a directory")
    return workdir


def _positive(arguments: dict[str, Any], name: str, default: float) -> float:
    value = arguments.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise RespondToModel(f"exec_command: `{name}` must be a positive number")
    return float(value)
