"""``toolwire codex-config --builtin``: Codex's built-in provider re-pointed at the gateway.

The config it writes (``openai_base_url``, no provider block), how it updates a config
that had the custom provider, and the real Codex CLI 0.171.0 run with the Codex home it
wrote: over the WebSocket, knowing the model from the catalog.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.codex import QUIET_DEFAULTS, run_codex
from tests.support.gateway import GatewayProcess
from toolwire.cli import codex_config_command
from toolwire.codex_config import (
    CATALOG_FILE_NAME,
    CodexModel,
    CodexSetup,
    render_config,
    update_config,
    write_codex_home,
)

BASE_URL = "http://127.0.0.1:8787/v1"


def builtin(*models: str, **kwargs: Any) -> CodexSetup:
    return CodexSetup(base_url=BASE_URL, models=tuple(CodexModel(m) for m in models), builtin=True, **kwargs)


def test_a_new_config_points_the_builtin_provider() -> None:
    assert tomllib.loads(render_config(builtin("qwen3", "glm"))) == {"openai_base_url": BASE_URL, "model": "qwen3"}


def test_switching_a_config_from_the_custom_provider() -> None:
    custom = CodexSetup(base_url=BASE_URL, models=(CodexModel("qwen3"),))
    text = update_config("# mine\napproval_policy = \"never\"\n", custom)
    assert tomllib.loads(text)["model_provider"] == "toolwire"
    switched = tomllib.loads(update_config(text, builtin("qwen3", catalog_path="/c/toolwire-models.json")))
    assert "model_provider" not in switched  # the built-in provider is the default one
    assert (switched["openai_base_url"], switched["model_catalog_json"]) == (BASE_URL, "/c/toolwire-models.json")
    assert switched["approval_policy"] == "never"
    assert "toolwire" in switched["model_providers"]  # left as it was, unused


def test_builtin_takes_no_key_variable() -> None:
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        builtin("m", api_key_env="MY_KEY")


def invoke(*args: str) -> Any:
    app = typer.Typer()
    app.command()(codex_config_command)
    return CliRunner().invoke(app, list(args), env={"CODEX_HOME": "/home/me/.codex"})


def test_the_command(tmp_path: Path) -> None:
    result = invoke("--base-url", "http://gw:1", "-m", "m", "--builtin", "--codex-home", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "CODEX_API_KEY" in result.output
    config = tomllib.loads((tmp_path / "config.toml").read_text())
    assert config["openai_base_url"] == "http://gw:1/v1" and "model_providers" not in config
    assert [m["slug"] for m in json.loads((tmp_path / CATALOG_FILE_NAME).read_text())["models"]] == ["m"]
    refused = invoke("--base-url", "http://gw:1", "-m", "m", "--builtin", "--api-key-env", "K")
    assert refused.exit_code == 2 and "OPENAI_API_KEY" in refused.output


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("npm") is None, reason="needs node/npm to install Codex")
def test_codex_runs_with_the_codex_home_it_wrote(gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text("".join(f"{key} = {value}\n" for key, value in QUIET_DEFAULTS.items()))
    write_codex_home(home, CodexSetup(base_url=gateway.base_url, models=(CodexModel("qwen3-local"),), builtin=True))
    upstream.responder = lambda _request: Text("Hello through the built-in provider.")
    mark = len(gateway.log())
    result = run_codex(
        base_url=gateway.base_url,  # unused: CODEX_HOME below is the one just written
        model="qwen3-local", prompt="Say hello.", cwd=tmp_path, version="0.171.0",
        env={"CODEX_HOME": str(home)},
    )
    assert result.returncode == 0 and result.last_message == "Hello through the built-in provider.", result.stderr
    output = result.stdout + result.stderr
    assert "Model metadata" not in output and "Falling back from WebSockets" not in output
    assert "provider: openai" in result.stderr
    assert '"WebSocket /v1/responses" [accepted]' in gateway.log()[mark:]
