"""Every command's ``--help`` reads whole in a terminal of 80 columns.

typer's rich layout cut option names and values short there (``--upstream-key-e…``,
``http://127.0.0.…``); the help is click's plain one, wrapped to the terminal.
"""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from toolwire.cli import app

COLUMNS = 80


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """The command tree typer builds (its own copy of click's classes): each command's path."""
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _commands(sub, (*path, name))
    return found


COMMANDS = _commands(typer.main.get_command(app))


def _help(path: tuple[str, ...]) -> str:
    result = CliRunner(env={"COLUMNS": str(COLUMNS)}).invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_walked() -> None:
    paths = {path for path, _ in COMMANDS}
    assert {("serve",), ("agent",), ("codex-config",), ("demo",), ("keys",), ("keys", "create")} <= paths


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=lambda value: " ".join(value) if isinstance(value, tuple) else "")
def test_help_names_every_option_whole_within_the_terminal(path: tuple[str, ...], command: Any) -> None:
    shown = _help(path)
    too_wide = [line for line in shown.splitlines() if len(line) > COLUMNS]
    assert not too_wide, too_wide
    cut = [line for line in shown.splitlines() if "…" in line or (line.endswith("...") and "[ARGS]..." not in line)]
    assert not cut, cut  # (click ends a command's help cut short in the command list so)
    words = set(shown.replace(",", " ").split())
    for param in command.params:
        if param.param_type_name == "option" and not param.hidden:
            for name in [*param.opts, *param.secondary_opts]:
                assert name in words, f"{' '.join(path)} --help does not show {name}"


def test_flags_that_only_turn_something_on_have_no_negation() -> None:
    """A flag whose absence is "not set" (the file's value stands) has no ``--no-`` form,
    which would read as if it could turn the file's setting off."""
    shown = {path: _help(path) for path in [("serve",), ("codex-config",)]}
    for flag in ["--insecure-no-auth"]:
        assert flag in shown[("serve",)] and f"--no-{flag[2:]}" not in shown[("serve",)]
    for flag in ["--reasoning", "--tool-search", "--builtin"]:
        assert flag in shown[("codex-config",)] and f"--no-{flag[2:]}" not in shown[("codex-config",)]
