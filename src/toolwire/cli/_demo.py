"""``toolwire demo``: a tool-calling exchange through the gateway on the mock model, both sides shown.

Only argument handling and output live here; the run and its rendering are ``toolwire.demo``'s.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

import typer


def demo_command(
    width: Annotated[
        int | None,
        typer.Option(help="Columns to print in (default: the terminal's, 140 when piped)."),
    ] = None,
) -> None:
    """Run a tool-calling exchange through the gateway on the mock model and show both sides."""
    try:
        import openai  # noqa: F401  (the demo's client)
    except ImportError:
        typer.echo(
            "error: the demo drives the gateway with the openai SDK: pip install openai", err=True
        )
        raise typer.Exit(2) from None
    from rich.console import Console

    from toolwire.demo import render_turn, run_demo

    turns = asyncio.run(run_demo())
    console = Console(width=width or (None if sys.stdout.isatty() else 140))
    console.print(
        "[bold]toolwire demo[/]: the openai SDK talks Responses to toolwire; toolwire talks Chat "
        "Completions to the built-in mock model and restores each call to the type its tool was "
        "declared with (a custom tool's call comes back as custom_tool_call, a namespaced "
        "function's with its namespace)."
    )
    for turn in turns:
        console.print()
        console.print(render_turn(turn))
