"""``toolwire agent``: run one task with the built-in tools against a Responses endpoint.

Progress (each tool call and its result) goes to stderr; the final answer is the last
thing written to stdout. Exit codes: 0 answered, 1 the turn failed (a fatal tool error,
the endpoint failed), 2 bad usage, 124 ``--timeout`` ran out, 130 interrupted (Ctrl-C).
Only argument handling lives here; the work is ``AgentLoop``'s.
"""

from __future__ import annotations

import asyncio
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:
    from toolwire.agent import AgentResult, HttpResponsesClient, ToolContext

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130


class SandboxFlag(StrEnum):
    """``--sandbox``: the values of ``toolwire.agent.Sandbox``, spelt here so that reading
    the command line does not load the agent (a test keeps the two the same)."""

    READ_ONLY = "read-only"
    DANGER_FULL_ACCESS = "danger-full-access"


class ApprovalFlag(StrEnum):
    """``--approval``: the values of ``toolwire.agent.Approval`` (kept the same by a test)."""

    NEVER = "never"
    ON_REQUEST = "on-request"


def agent_command(
    prompt: Annotated[str, typer.Argument(metavar="PROMPT", help="The task for the agent.")],
    base_url: Annotated[
        str,
        typer.Option(
            help="Base URL of a Responses endpoint, e.g. http://127.0.0.1:8787/v1 (toolwire serve)."
        ),
    ],
    model: Annotated[str, typer.Option(help="The model name to send.")],
    api_key_env: Annotated[
        str | None,
        typer.Option(help="Name of the environment variable holding the endpoint's API key."),
    ] = None,
    cwd: Annotated[
        Path | None, typer.Option(help="Working directory of the tools (default: the current one).")
    ] = None,
    approval: Annotated[
        ApprovalFlag,
        typer.Option(
            help="never: refuse what the sandbox forbids. on-request: ask on the terminal first."
        ),
    ] = ApprovalFlag.ON_REQUEST,
    sandbox: Annotated[
        SandboxFlag,
        typer.Option(
            help="read-only: refuse apply_patch and any command not known to be read-only. "
            "danger-full-access: run everything (toolwire has no OS sandbox)."
        ),
    ] = SandboxFlag.READ_ONLY,
    instructions: Annotated[
        str | None, typer.Option(help="Replace the default instructions.")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option(help="Stop everything after this many seconds (exit 124).")
    ] = None,
    max_parallel: Annotated[int, typer.Option(min=1, help="Tool calls run at once, at most.")] = 4,
    max_turns: Annotated[int, typer.Option(min=1, help="Model requests, at most.")] = 50,
) -> None:
    """Run an agent until the model answers without tool calls; print the answer."""
    from toolwire.agent import (
        Approval,
        HttpResponsesClient,
        Policy,
        Sandbox,
        TerminalApprover,
        ToolContext,
    )
    from toolwire.errors import ToolwireError
    from toolwire.tools import FatalRuntimeError
    from toolwire.upstream import UnusableProxy

    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            _fail(f"--api-key-env names {api_key_env}, which is not set.", EXIT_USAGE)
    workdir = (cwd or Path.cwd()).resolve()
    if not workdir.is_dir():
        _fail(f"--cwd {workdir} is not a directory.", EXIT_USAGE)
    try:  # made before anything runs: an address it refuses is a usage error, and so is the proxy's
        client = HttpResponsesClient(base_url, api_key=api_key)
    except UnusableProxy as exc:
        _fail(str(exc), EXIT_USAGE)
    except ValueError as exc:
        _fail(f"--base-url: {exc}.", EXIT_USAGE)
    policy = Policy(sandbox=Sandbox(sandbox), approval=Approval(approval), approver=TerminalApprover())
    run = _run(
        prompt,
        client=client,
        model=model,
        context=ToolContext(workdir, policy),
        instructions=instructions
        if instructions is not None
        else default_instructions(workdir, sandbox),
        timeout=timeout,
        max_parallel=max_parallel,
        max_turns=max_turns,
    )
    try:
        result = asyncio.run(run)
    except KeyboardInterrupt:
        _fail("interrupted.", EXIT_INTERRUPTED)
    except TimeoutError:
        _fail(f"timed out after {timeout:g} s.", EXIT_TIMEOUT)
    except FatalRuntimeError as exc:
        _fail(f"fatal: {exc.message}", EXIT_FAILED)
    except ToolwireError as exc:
        _fail(exc.message, EXIT_FAILED)
    typer.echo(result.answer)


async def _run(
    prompt: str,
    *,
    client: HttpResponsesClient,
    model: str,
    context: ToolContext,
    instructions: str,
    timeout: float | None,
    max_parallel: int,
    max_turns: int,
) -> AgentResult:
    from toolwire.agent import AgentLoop, ProgressPrinter, builtin_router

    async with client:
        loop = AgentLoop(
            client,
            builtin_router(),
            model=model,
            context=context,
            instructions=instructions,
            max_parallel=max_parallel,
            max_turns=max_turns,
            on_event=ProgressPrinter(sys.stderr),
        )
        async with asyncio.timeout(timeout):
            return await loop.run(prompt)


def default_instructions(cwd: Path, sandbox: SandboxFlag) -> str:
    rules = (
        "The sandbox is read-only: apply_patch and commands that may write are refused unless the user allows them."
        if sandbox is SandboxFlag.READ_ONLY
        else "You may read and write files and run any command."
    )
    return (
        f"You are a coding agent working in {cwd}. Use exec_command to run shell commands, "
        "apply_patch to edit files and view_image to look at images. "
        f"{rules} When the task is done, reply with a short final answer and no tool calls."
    )


def _fail(message: str, code: int) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)
