"""The configuration file: what it accepts, and mistakes reported with key and line."""

from __future__ import annotations

import pytest

from toolwire.config import ConfigError, parse_config, upstream_from_flag

EXAMPLE = """\
[server]
host = "127.0.0.1"
port = 8787

[[upstreams]]
name = "deepseek"
kind = "chat"
base_url = "https://api.deepseek.com/v1"
api_key_env = "DEEPSEEK_API_KEY"
preset = "deepseek"

[[upstreams]]
name = "local"
kind = "mock"
default = true

[[models]]
name = "deepseek-v4"
upstream = "deepseek"
upstream_model = "deepseek-chat"
"""


def test_the_documented_example_loads() -> None:
    config = parse_config(EXAMPLE)
    assert config.server.port == 8787
    assert [u.name for u in config.upstreams] == ["deepseek", "local"]
    assert config.upstream("deepseek").preset == "deepseek"
    assert config.models[0].upstream_model == "deepseek-chat"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("port = 8787", "port = 99999"), "toolwire.toml:3: server.port:"),
        (("port = 8787", "prot = 8787"), "toolwire.toml:3: server.prot: Extra inputs are not permitted"),
        (("port = 8787", "history_cache_bytes = -1"), "toolwire.toml:3: server.history_cache_bytes: Input should be greater"),
        (('kind = "chat"', 'kind = "chatty"'), "toolwire.toml:7: upstreams[0].kind: unknown kind 'chatty' (known: chat, responses, anthropic, mock)"),
        (('kind = "chat"', 'kind = "responses"'), "toolwire.toml:10: upstreams[0].preset: unknown preset 'deepseek' for kind 'responses'"),
        (('preset = "deepseek"', 'preset = "deepsea"'), "toolwire.toml:10: upstreams[0].preset: unknown preset 'deepsea'"),
        (('upstream = "deepseek"', 'upstream = "nowhere"'), "toolwire.toml:19: models[0].upstream: unknown upstream 'nowhere'"),
        (('name = "local"', 'name = "deepseek"'), "toolwire.toml:13: upstreams[1].name: two upstreams are named 'deepseek'"),
        (('base_url = "https://api.deepseek.com/v1"\n', ""), "toolwire.toml:5: upstreams[0]: upstream 'deepseek' of kind 'chat' needs a base_url"),
        (("[server]", "[server"), "toolwire.toml: "),
        (
            ('preset = "deepseek"', 'preset = "deepseek"\ntool_call_text = "qwen"'),
            "toolwire.toml:11: upstreams[0].tool_call_text: Input should be 'auto', 'off', 'hermes'",
        ),
        (
            ('kind = "mock"', 'kind = "mock"\ntool_call_text = "off"'),
            "toolwire.toml:12: upstreams[1]: upstream 'local': tool_call_text can only be set for kind = 'chat'",
        ),
    ],
)
def test_mistakes_name_their_key_and_line(change: tuple[str, str], expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(EXAMPLE.replace(*change))
    assert str(caught.value).startswith(expected), str(caught.value)


@pytest.mark.parametrize("setting", ["off", "hermes", "qwen3_coder", "mistral", "deepseek", "kimi_k2", "glm45"])
def test_tool_call_text_is_set_per_upstream(setting: str) -> None:
    config = parse_config(EXAMPLE.replace('preset = "deepseek"', f'preset = "deepseek"\ntool_call_text = "{setting}"'))
    assert config.upstream("deepseek").tool_call_text == setting
    assert config.upstream("local").tool_call_text == "auto"


def test_the_history_cache_is_sized_in_bytes() -> None:
    assert parse_config(EXAMPLE).server.history_cache_bytes == 128 * 1024 * 1024
    off = parse_config(EXAMPLE.replace("port = 8787", "port = 8787\nhistory_cache_bytes = 0"))
    assert off.server.history_cache_bytes == 0


def test_upstream_shortcuts() -> None:
    ollama = upstream_from_flag("ollama")
    assert ollama.base_url == "http://127.0.0.1:11434/v1" and ollama.preset == "ollama" and ollama.default
    assert upstream_from_flag("deepseek").api_key_env == "DEEPSEEK_API_KEY"
    assert upstream_from_flag("mock").kind == "mock"
    url = upstream_from_flag("http://10.0.0.5:8000/v1", preset="vllm")
    assert url.base_url == "http://10.0.0.5:8000/v1" and url.preset == "vllm"
    with pytest.raises(ValueError, match=r"one of"):
        upstream_from_flag("olama")


ANTHROPIC_EXAMPLE = """\
[[upstreams]]
name = "claude"
kind = "anthropic"
base_url = "https://api.anthropic.com"
api_key_env = "ANTHROPIC_API_KEY"
preset = "anthropic"
"""


def test_an_anthropic_upstream_loads_with_its_presets() -> None:
    assert parse_config(ANTHROPIC_EXAMPLE).upstream("claude").kind == "anthropic"
    for preset in ("deepseek-anthropic", "kimi-anthropic", "glm-anthropic", "minimax-anthropic", "generic"):
        parse_config(ANTHROPIC_EXAMPLE.replace('preset = "anthropic"', f'preset = "{preset}"'))


def test_a_chat_preset_is_no_anthropic_preset() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(ANTHROPIC_EXAMPLE.replace('preset = "anthropic"', 'preset = "deepseek"'))
    assert "unknown preset 'deepseek' for kind 'anthropic'" in str(raised.value)


@pytest.mark.parametrize(
    ("flag", "preset", "kind", "base_url", "key"),
    [
        ("anthropic", None, "anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
        ("glm-anthropic", None, "anthropic", "https://open.bigmodel.cn/api/anthropic", "ZHIPUAI_API_KEY"),
        ("http://127.0.0.1:9000", "minimax-anthropic", "anthropic", "http://127.0.0.1:9000", None),
        ("http://127.0.0.1:9000", "deepseek", "chat", "http://127.0.0.1:9000", None),
        ("http://127.0.0.1:9000", "generic", "chat", "http://127.0.0.1:9000", None),
    ],
)
def test_upstream_flag_kinds(flag: str, preset: str | None, kind: str, base_url: str, key: str | None) -> None:
    upstream = upstream_from_flag(flag, preset=preset)
    assert (upstream.kind, upstream.base_url, upstream.api_key_env) == (kind, base_url, key)
