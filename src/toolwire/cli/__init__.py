"""The ``toolwire`` command line: one module per command, arguments only.

``serve`` (the gateway), ``agent`` (the agent runtime on a Responses endpoint),
``codex-config`` (Codex's configuration for the gateway), ``keys`` (the client keys of a
shared gateway) and ``demo`` (a tool-calling exchange on the mock model, both sides shown). The work each does lives in its own
package; ``serve_problems`` (``_checks``) is the pure check of a configuration before serving it.

A command imports its work when it runs, not when the command line is read: ``toolwire
--help``, ``codex-config`` or ``keys`` load neither the gateway nor its HTTP client (a
test keeps it so). Only what the commands' signatures name is imported up front.
"""

from __future__ import annotations

from typing import Annotated

import typer

import toolwire

from ._agent import agent_command
from ._codex_config import codex_config_command
from ._demo import demo_command
from ._keys import keys_app
from ._serve import serve, with_flags

__all__ = [
    "agent_command",
    "app",
    "codex_config_command",
    "demo_command",
    "keys_app",
    "main",
    "serve",
    "with_flags",
]

ABOUT = (
    "toolwire: the Responses API (Codex, openai SDK) in front of Chat Completions, "
    "Responses and Anthropic Messages backends."
)

# rich_markup_mode None: every command's help as click writes it, wrapped to the terminal;
# typer's rich layout cut option names and values short (``--upstream-key-e…``) at 80 columns.
app = typer.Typer(help=ABOUT, no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"toolwire {toolwire.__version__}")
        raise typer.Exit()


@app.callback(help=ABOUT)
def _commands(
    version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_print_version, help="Print the version and exit.")
    ] = False,
) -> None:
    pass


# Each command's short help fits the command list of a terminal of 80 columns whole.
app.command("serve", short_help="Serve the Responses API in front of a backend.")(serve)
app.command(
    "agent",
    help="Run a task with tools against a Responses endpoint until the model answers.",
    short_help="Run a task with tools until the model answers.",
)(agent_command)
app.command(
    "codex-config",
    help="Print, or write into a Codex home, the Codex config for the gateway's models.",
    short_help="Print or write Codex's config for the gateway.",
)(codex_config_command)
app.add_typer(keys_app, name="keys", short_help="Client keys of a gateway shared by a team.")
app.command(
    "demo",
    help="Run a tool-calling exchange through the gateway on the mock model and show both sides.",
    short_help="A tool-calling exchange on the mock model, both sides shown.",
)(demo_command)


def main() -> None:
    app()
