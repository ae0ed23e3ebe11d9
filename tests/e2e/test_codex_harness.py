"""The Codex CLI harness itself, against the scripted capture server (no gateway)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.fixtures.codex.capture import CaptureServer, text_answer
from tests.support.codex import CODEX_VERSION, run_codex

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("npm") is None, reason="needs node/npm to install Codex"),
]


def test_plain_text_answer(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    with CaptureServer(text_answer("harness says hello")) as server:
        result = run_codex(
            base_url=server.base_url,
            model="gpt-5.4",
            prompt="say hello",
            cwd=tmp_path,
            codex_home=codex_home,
        )
    assert result.returncode == 0, result.stderr
    assert result.last_message == "harness says hello"
    assert 'base_url = "' + server.base_url + '"' in (codex_home / "config.toml").read_text()

    [request] = server.captured
    assert request.path == "/v1/responses"
    headers = {name.lower(): value for name, value in request.headers}
    assert headers["authorization"] == "Bearer test-key"
    assert headers["user-agent"].startswith(f"codex_exec/{CODEX_VERSION} ")
    assert request.body["model"] == "gpt-5.4"
    assert request.body["stream"] is True
    assert request.body["input"][-1]["content"] == [{"type": "input_text", "text": "say hello"}]
    assert '"analytics_enabled":false' in headers["x-codex-turn-metadata"]
