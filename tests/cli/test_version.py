"""``toolwire --version``: the version the package was built as."""

from __future__ import annotations

import tomllib
from pathlib import Path

from typer.testing import CliRunner

import toolwire
from toolwire.cli import app

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_version_is_the_project_s() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    declared = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["version"]
    assert result.output == f"toolwire {declared}\n" and toolwire.__version__ == declared


def test_the_version_needs_no_command() -> None:
    """``--version`` answers before a command would be asked for (no_args_is_help)."""
    result = CliRunner().invoke(app, ["--version", "serve", "--port", "not-a-port"])
    assert (result.exit_code, result.output) == (0, f"toolwire {toolwire.__version__}\n")
