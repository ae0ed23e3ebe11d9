"""The configuration file: what it accepts, and mistakes reported with key and line."""

from __future__ import annotations

import locale
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolwire.config import (
    SHORTCUTS,
    ConfigError,
    UpstreamConfig,
    load_config,
    parse_config,
    upstream_from_flag,
)

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
            ("api.deepseek.com/v1", "key:pass@api.deepseek.com:443x/v1"),
            "toolwire.toml:8: upstreams[0].base_url: https://api.deepseek.com:443x/v1 is not a URL: its port must be "
            "a number up to 65535, and an IPv6 host goes in brackets",
        ),
        (("https://api.deepseek.com", "ftp://api.deepseek.com"), "toolwire.toml:8: upstreams[0].base_url: ftp://api.deepseek.com/v1 is not an http:// or https:// URL"),
        (("https://api.deepseek.com", "https://"), "toolwire.toml:8: upstreams[0].base_url: https:///v1 names no host"),
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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A key written without spaces around "=" is found all the same.
        (
            EXAMPLE.replace("port = 8787", "port=99999"),
            "toolwire.toml:3: server.port: Input should be less than or equal to 65535",
        ),
        # A comment after a table's header does not hide the table.
        (
            EXAMPLE.replace("[server]", "[server]  # the gateway itself").replace("port = 8787", "port = 99999"),
            "toolwire.toml:3: server.port: Input should be less than or equal to 65535",
        ),
        # A missing key points at its own table's header, not at that key in the next table.
        (EXAMPLE.replace('name = "deepseek"\n', ""), "toolwire.toml:5: upstreams[0].name: Field required"),
        # An unknown table is named on its header's line.
        ("[sever]\nport = 1\n", "toolwire.toml:1: sever: Extra inputs are not permitted"),
        # A setting written as a dotted key has no header line to point at: no line given.
        ("server.port = 99999\n", "toolwire.toml: server.port: Input should be less than or equal to 65535"),
    ],
    ids=["no-spaces", "header-comment", "missing-key", "unknown-table", "dotted-key"],
)
def test_mistakes_point_at_the_line_that_holds_them(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert str(caught.value) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            EXAMPLE.replace('preset = "deepseek"', 'preset = "deepseek"\ndefault = true'),
            "toolwire.toml:16: upstreams[1].default: only one upstream can be the default",
        ),
        (
            EXAMPLE + '\n[[models]]\nname = "deepseek-v4"\nupstream = "local"\n',
            "toolwire.toml:23: models[1].name: model 'deepseek-v4' is listed twice",
        ),
        (
            EXAMPLE.replace('upstream = "deepseek"', 'upstream = "nowhere"'),
            "toolwire.toml:19: models[0].upstream: unknown upstream 'nowhere' (known: deepseek, local)",
        ),
        (
            '[[models]]\nname = "m"\nupstream = "nowhere"\n',
            "toolwire.toml:3: models[0].upstream: unknown upstream 'nowhere' (known: none)",
        ),
    ],
    ids=["two-defaults", "model-twice", "unknown-upstream", "no-upstreams"],
)
def test_references_that_do_not_hold_are_reported_in_full(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert str(caught.value) == expected


@pytest.fixture
def ascii_locale() -> Iterator[None]:
    """The process's character set is plain ASCII, as under a non-UTF-8 locale."""
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def test_a_configuration_file_is_read_as_utf8_whatever_the_locale(tmp_path: Path, ascii_locale: None) -> None:
    path = tmp_path / "toolwire.toml"
    path.write_text(EXAMPLE + 'description = "Modèle rapide ✓"\n', encoding="utf-8")
    config = load_config(path)
    assert config.models[0].description == "Modèle rapide ✓"
    assert [u.name for u in config.upstreams] == ["deepseek", "local"]


def test_a_mistake_in_a_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "toolwire.toml"
    path.write_text(EXAMPLE.replace("port = 8787", "port = 99999"), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert str(caught.value) == f"{path}:3: server.port: Input should be less than or equal to 65535"


def test_a_missing_file_is_reported_plainly(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}: cannot read the configuration file: No such file or directory"


def test_the_mock_flag_is_the_default_upstream() -> None:
    assert upstream_from_flag("mock") == UpstreamConfig(name="mock", kind="mock", default=True)


def test_a_url_flag_is_the_default_chat_upstream() -> None:
    upstream = upstream_from_flag("http://10.0.0.5:8000/v1", api_key_env="LOCAL_KEY")
    assert upstream == UpstreamConfig(
        name="upstream",
        kind="chat",
        base_url="http://10.0.0.5:8000/v1",
        preset="generic",
        api_key_env="LOCAL_KEY",
        default=True,
    )


def test_an_unknown_flag_lists_what_is_known() -> None:
    with pytest.raises(ValueError) as caught:
        upstream_from_flag("olama")
    known = ", ".join(["mock", *SHORTCUTS])
    assert str(caught.value) == f"--upstream takes a URL or one of: {known} (got 'olama')"
    assert known.startswith("mock, ollama, vllm, ")
