"""``serving_lines``: what ``toolwire serve`` says it serves, read from the configuration alone."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.cli._summary import serving_lines
from toolwire.config import GatewayConfig, upstream_from_flag

KEPT = "responses and client keys kept in /state/toolwire/responses.sqlite3"
CHAT = "a Chat Completions server (vLLM, Ollama, llama.cpp, DeepSeek, ...)"
ANTHROPIC = "an Anthropic Messages API (Claude; DeepSeek, Kimi, GLM, MiniMax Anthropic endpoints)"


@pytest.fixture(autouse=True)
def state_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default store's file is under ``$XDG_STATE_HOME``."""
    monkeypatch.setenv("XDG_STATE_HOME", "/state")


def config(**fields: Any) -> GatewayConfig:
    return GatewayConfig.model_validate(fields)


@pytest.mark.parametrize(
    ("gateway", "model_override", "lines"),
    [
        pytest.param(
            GatewayConfig(upstreams=[upstream_from_flag("mock")]),
            None,
            ["the Responses API at http://127.0.0.1:8787/v1",
             "upstream 'mock': the built-in scripted model (no server needed); serves every model",
             KEPT],
            id="the mock",
        ),
        pytest.param(
            GatewayConfig(upstreams=[upstream_from_flag("ollama")]),
            "qwen3:32b",
            ["the Responses API at http://127.0.0.1:8787/v1",
             f"upstream 'ollama': {CHAT} at http://127.0.0.1:11434/v1, preset ollama; serves every model (as qwen3:32b)",
             KEPT],
            id="a shortcut, every model sent under --model",
        ),
        pytest.param(
            config(
                server={"host": "::1", "port": 9000},
                upstreams=[
                    {"name": "local", "base_url": "http://user:secret@10.0.0.5:8000/v1", "default": True},
                    {"name": "claude", "kind": "anthropic", "base_url": "https://api.anthropic.com/v1",
                     "api_key_env": "ANTHROPIC_API_KEY", "preset": "anthropic"},
                    {"name": "idle", "base_url": "http://127.0.0.1:9999/v1"},
                ],
                models=[
                    {"name": "sonnet", "upstream": "claude", "upstream_model": "claude-sonnet-4-5"},
                    {"name": "qwen3", "upstream": "local"},
                    {"name": "haiku", "upstream": "claude", "upstream_model": "haiku"},
                ],
            ),
            None,
            ["the Responses API at http://[::1]:9000/v1",
             f"upstream 'local': {CHAT} at http://10.0.0.5:8000/v1; serves qwen3, every other model",
             f"upstream 'claude': {ANTHROPIC} at https://api.anthropic.com/v1, preset anthropic, its key from "
             "$ANTHROPIC_API_KEY; serves sonnet (as claude-sonnet-4-5), haiku",
             f"upstream 'idle': {CHAT} at http://127.0.0.1:9999/v1; serves no model",
             KEPT],
            id="a file: routed models, credentials left out, an upstream nothing reaches",
        ),
        pytest.param(
            config(
                upstreams=[{"name": "local", "base_url": "http://127.0.0.1:8000/v1"}],
                models=[{"name": "qwen3", "upstream": "local"}],
            ),
            "ignored",
            ["the Responses API at http://127.0.0.1:8787/v1",
             f"upstream 'local': {CHAT} at http://127.0.0.1:8000/v1; serves qwen3",
             KEPT],
            id="no default upstream: only the models routed, --model sends none",
        ),
    ],
)  # fmt: skip
def test_what_is_served(gateway: GatewayConfig, model_override: str | None, lines: list[str]) -> None:
    assert serving_lines(gateway, model_override=model_override) == lines


def test_no_key_is_ever_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variable a key is read from is named, never the key it holds."""
    monkeypatch.setenv("EXAMPLE_KEY", "sk-example-secret")
    upstream = upstream_from_flag("https://api.example.com/v1", api_key_env="EXAMPLE_KEY")
    shown = "\n".join(serving_lines(GatewayConfig(upstreams=[upstream])))
    assert "$EXAMPLE_KEY" in shown and "sk-example-secret" not in shown


@pytest.mark.parametrize(
    ("store", "kept"),
    [
        ("none", "responses and client keys: not kept (store none)"),
        ("memory://", "responses and client keys kept in this process only (memory://)"),
        ("MEMORY://", "responses and client keys kept in this process only (memory://)"),
        ("sqlite:///srv/toolwire/responses.db", "responses and client keys kept in /srv/toolwire/responses.db"),
        ("sqlite:///srv/tool:wire/responses.db", "responses and client keys kept in /srv/tool:wire/responses.db"),
        ("redis://gateway:s3cret-pw@cache.internal:6379/2", "responses and client keys kept in Redis at redis://gateway:***@cache.internal:6379/2"),
        ("rediss://:s3cret-pw@cache.internal/0", "responses and client keys kept in Redis at rediss://:***@cache.internal/0"),
    ],
)
def test_where_responses_and_keys_are_kept_is_the_last_line_and_no_password(store: str, kept: str) -> None:
    lines = serving_lines(config(server={"store": store}, upstreams=[{"name": "mock", "kind": "mock", "default": True}]))
    assert lines[-1] == kept and "s3cret-pw" not in "\n".join(lines)
