"""``toolwire codex-config``: what it prints, what it says when it writes a Codex home, and
its defaults. The builders themselves are tested in tests/test_codex_config.py."""

from __future__ import annotations

import json
import locale
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from toolwire.cli import app

CODEX_HOME = "/home/me/.codex"


def codex_config(*args: str) -> Result:
    return CliRunner().invoke(app, ["codex-config", *args], env={"CODEX_HOME": CODEX_HOME})


def test_printed_the_config_then_the_catalog_with_the_defaults() -> None:
    result = codex_config("--base-url", "http://127.0.0.1:8787", "--model", "qwen3")
    assert result.exit_code == 0, result.output
    lines = result.stdout.split("\n")
    assert lines[0] == f"# In {CODEX_HOME}/config.toml (keys above any [table]):"
    save = lines.index(f"# Save as {CODEX_HOME}/toolwire-models.json:")
    assert lines[save - 1] == "" and lines[save - 2] != "", "one blank line between the two"
    config = tomllib.loads("\n".join(lines[1:save]))
    assert config["model_provider"] == "toolwire"  # the default --provider-id
    assert config["model_providers"]["toolwire"]["base_url"] == "http://127.0.0.1:8787/v1"
    catalog_text = "\n".join(lines[save + 1 :])
    assert catalog_text.startswith('{\n  "models": [\n    {\n      "slug": "qwen3",')  # indented by two
    [model] = json.loads(catalog_text)["models"]
    assert model["supports_search_tool"] is False and model["supported_reasoning_levels"] == []
    assert "openai_base_url" not in config  # not --builtin


def test_non_ascii_instructions_are_printed_as_they_are(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.md"
    prompt.write_text("Réponds en français.", encoding="utf-8")
    result = codex_config("--base-url", "http://gw/v1", "-m", "m", "--instructions-file", str(prompt))
    assert result.exit_code == 0, result.output
    assert '"base_instructions": "Réponds en français.",' in result.stdout


@pytest.fixture
def ascii_locale() -> Iterator[None]:
    """A terminal whose locale is plain C (ASCII), as in a bare container."""
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)


@pytest.mark.usefixtures("ascii_locale")
def test_the_instructions_file_is_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.md"
    prompt.write_text("Réponds en français.", encoding="utf-8")
    home = tmp_path / "home"
    result = codex_config("--base-url", "http://gw/v1", "-m", "m", "--instructions-file", str(prompt), "--codex-home", str(home))
    assert result.exit_code == 0, result.output
    [model] = json.loads((home / "toolwire-models.json").read_text(encoding="utf-8"))["models"]
    assert model["base_instructions"] == "Réponds en français."


def test_writing_a_codex_home_says_what_it_wrote(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = codex_config("--base-url", "http://gw/v1", "-m", "a", "-m", "b", "--codex-home", str(home))
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"updated {home / 'config.toml'}\nwrote {home / 'toolwire-models.json'} (2 model(s) for provider toolwire)\n"
    )
    custom = codex_config("--base-url", "http://gw/v1", "-m", "a", "--codex-home", str(home), "--provider-id", "gw")
    assert custom.stdout.endswith("(1 model(s) for provider gw)\n")


def test_writing_a_codex_home_for_the_builtin_provider(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = codex_config("--base-url", "http://gw/v1", "-m", "a", "--codex-home", str(home), "--builtin")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"updated {home / 'config.toml'}\n"
        f"wrote {home / 'toolwire-models.json'} (1 model(s) for Codex's built-in provider)\n"
        "Codex reads the gateway's client key from OPENAI_API_KEY (CODEX_API_KEY for codex exec).\n"
    )


def test_errors_go_to_stderr_only() -> None:
    result = codex_config("--base-url", "localhost:8787", "-m", "m")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and "http(s) URL" in result.stderr
