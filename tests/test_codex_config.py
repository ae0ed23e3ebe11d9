"""``toolwire codex-config``: the Codex provider section and model catalog.

The builders are checked as data; the catalog is then loaded by the real Codex CLI
0.169.0 (``codex debug models``), and a real ``codex exec`` through the gateway shows
that Codex knows the model (no "Model metadata ... not found" warning) and sends the
tools the catalog describes.
"""

from __future__ import annotations

import json
import locale
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.codex import QUIET_DEFAULTS, ensure_codex, run_codex
from tests.support.gateway import GatewayProcess
from toolwire.cli import codex_config_command
from toolwire.codex_config import (
    CATALOG_FILE_NAME,
    DEFAULT_INSTRUCTIONS,
    CodexModel,
    CodexSetup,
    build_catalog,
    default_codex_home,
    merge_catalogs,
    model_entry,
    models_of,
    normalize_base_url,
    render_config,
    update_config,
    write_codex_home,
)

JSON = dict[str, Any]
needs_codex = pytest.mark.skipif(
    shutil.which("npm") is None, reason="needs node/npm to install Codex"
)


def setup_for(*models: CodexModel, **kwargs: Any) -> CodexSetup:
    return CodexSetup(base_url="http://127.0.0.1:8787/v1", models=models, **kwargs)


# ---------------------------------------------------------------- the catalog


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (
            CodexModel("qwen3"),
            {
                "default_reasoning_level": None,
                "supported_reasoning_levels": [],
                "supports_search_tool": False,
                "context_window": 128_000,
            },
        ),
        (
            CodexModel("deepseek", context_window=64_000, reasoning=True, tool_search=True),
            {
                "default_reasoning_level": "medium",
                "supports_search_tool": True,
                "context_window": 64_000,
            },
        ),
    ],
)
def test_model_entry(model: CodexModel, expected: JSON) -> None:
    entry = model_entry(model, base_url="http://gw/v1", instructions="Be useful.", priority=3)
    assert {key: entry[key] for key in expected} == expected
    assert (entry["slug"], entry["display_name"], entry["priority"]) == (model.name, model.name, 3)
    assert entry["apply_patch_tool_type"] == "freeform"  # "function" is a parse error in 0.169
    assert entry["base_instructions"] == "Be useful."
    assert entry["supports_reasoning_summary_parameter"] is False
    if model.reasoning:
        assert [level["effort"] for level in entry["supported_reasoning_levels"]] == [
            "low",
            "medium",
            "high",
        ]


def test_the_whole_entry_is_the_one_codex_0_169_parses() -> None:
    # Every field, as the real Codex loads it (test_codex_loads_the_catalog): a field
    # renamed or a value changed is a catalog Codex refuses, or a model it treats otherwise.
    model = CodexModel("deepseek", context_window=64_000, reasoning=True, tool_search=True)
    assert model_entry(model, base_url="http://gw/v1", instructions="Be useful.", priority=3) == {
        "slug": "deepseek",
        "display_name": "deepseek",
        "description": "Served by toolwire at http://gw/v1",
        "base_instructions": "Be useful.",
        "default_reasoning_level": "medium",
        "supported_reasoning_levels": [
            {"effort": "low", "description": "Fast responses with lighter reasoning"},
            {"effort": "medium", "description": "Balances speed and reasoning depth"},
            {"effort": "high", "description": "Greater reasoning depth for complex problems"},
        ],
        "supports_reasoning_summary_parameter": False,
        "default_reasoning_summary": "none",
        "shell_type": "shell_command",
        "apply_patch_tool_type": "freeform",
        "supports_search_tool": True,
        "supports_parallel_tool_calls": True,
        "use_responses_lite": False,
        "visibility": "list",
        "supported_in_api": True,
        "priority": 3,
        "upgrade": None,
        "availability_nux": None,
        "support_verbosity": False,
        "default_verbosity": None,
        "truncation_policy": {"mode": "tokens", "limit": 10_000},
        "context_window": 64_000,
        "max_context_window": 64_000,
        "experimental_supported_tools": [],
        "input_modalities": ["text", "image"],
    }


def test_catalog_keeps_the_order_and_the_default_instructions() -> None:
    catalog = build_catalog(setup_for(CodexModel("a"), CodexModel("b")))
    assert [(m["slug"], m["priority"]) for m in catalog["models"]] == [("a", 1), ("b", 2)]
    assert all(m["base_instructions"] == DEFAULT_INSTRUCTIONS for m in catalog["models"])


def test_merge_keeps_other_entries_and_replaces_ours() -> None:
    ours = build_catalog(setup_for(CodexModel("a")))
    previous = {"models": [{"slug": "a", "old": True}, {"slug": "mine", "display_name": "Mine"}]}
    merged = merge_catalogs(ours, previous)
    assert [m["slug"] for m in merged["models"]] == ["a", "mine"]
    assert "old" not in merged["models"][0]
    assert merge_catalogs(ours, "not a catalog") == ours


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8787", "http://127.0.0.1:8787/v1"),
        ("http://127.0.0.1:8787/", "http://127.0.0.1:8787/v1"),
        ("http://127.0.0.1:8787/v1/", "http://127.0.0.1:8787/v1"),
        ("https://gw.example/proxy/v1", "https://gw.example/proxy/v1"),
    ],
)
def test_base_url(url: str, expected: str) -> None:
    assert normalize_base_url(url) == expected


@pytest.mark.parametrize("url", ["127.0.0.1:8787", "ftp://x/v1", "http:///v1"])
def test_base_url_must_be_http(url: str) -> None:
    with pytest.raises(ValueError):
        normalize_base_url(url)


@pytest.mark.parametrize(
    ("provider_id", "message"),
    [("openai", "built-in"), ("ollama", "built-in"), ("my tool", "plain")],
)
def test_provider_id_is_checked(provider_id: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        setup_for(CodexModel("a"), provider_id=provider_id)
    with pytest.raises(ValueError, match="--model"):
        setup_for()


# ---------------------------------------------------------------- config.toml


def test_a_new_config() -> None:
    text = render_config(setup_for(CodexModel("qwen3"), CodexModel("glm"), api_key_env="TW_KEY"))
    assert tomllib.loads(text) == {
        "model_provider": "toolwire",
        "model": "qwen3",
        "model_providers": {
            "toolwire": {
                "name": "toolwire",
                "base_url": "http://127.0.0.1:8787/v1",
                "wire_api": "responses",
                "env_key": "TW_KEY",
            }
        },
    }


USER_CONFIG = """\
# My Codex settings.
model = "gpt-5.5"  # the one I like
approval_policy = "on-request"

[model_providers.toolwire]
name = "old"
base_url = "http://old/v1"
request_max_retries = 0  # fail fast

[tui]
theme = "dark"
"""


def test_updating_keeps_comments_and_every_other_key() -> None:
    setup = setup_for(CodexModel("qwen3"), catalog_path="/home/me/.codex/toolwire-models.json")
    text = update_config(USER_CONFIG, setup)
    assert "# My Codex settings." in text and "# fail fast" in text and "# the one I like" in text
    data = tomllib.loads(text)
    assert data["approval_policy"] == "on-request" and data["tui"] == {"theme": "dark"}
    assert (data["model"], data["model_provider"]) == ("qwen3", "toolwire")
    assert data["model_catalog_json"] == "/home/me/.codex/toolwire-models.json"
    assert data["model_providers"]["toolwire"] == {
        "name": "toolwire",
        "base_url": "http://127.0.0.1:8787/v1",
        "wire_api": "responses",
        "request_max_retries": 0,
    }
    assert update_config(text, setup) == text  # idempotent


def test_an_inline_providers_table_stays_inline() -> None:
    text = 'model_providers = { local = { name = "local", base_url = "http://x/v1" } }\n'
    updated = update_config(text, setup_for(CodexModel("m")))
    assert set(tomllib.loads(updated)["model_providers"]) == {"local", "toolwire"}
    assert "[model_providers" not in updated


def test_write_codex_home(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    home.mkdir()
    own_catalog = tmp_path / "mine.json"
    own_catalog.write_text(json.dumps({"models": [{"slug": "my-local", "display_name": "x"}]}))
    (home / "config.toml").write_text(f'model_catalog_json = "{own_catalog}"\n' + USER_CONFIG)
    config_path, catalog_path = write_codex_home(home, setup_for(CodexModel("qwen3")))
    assert catalog_path == (home / CATALOG_FILE_NAME).resolve()
    data = tomllib.loads(config_path.read_text())
    assert data["model_catalog_json"] == str(catalog_path)
    catalog = json.loads(catalog_path.read_text())
    assert [m["slug"] for m in catalog["models"]] == ["qwen3", "my-local"]
    # Again with another model: the catalog named now is ours, and keeps what it had.
    write_codex_home(home, setup_for(CodexModel("glm")))
    assert [m["slug"] for m in json.loads(catalog_path.read_text())["models"]] == [
        "glm",
        "qwen3",
        "my-local",
    ]
    assert not [p for p in home.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_an_invalid_config_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("model = \n")
    with pytest.raises(ValueError):
        write_codex_home(tmp_path, setup_for(CodexModel("m")))
    assert (tmp_path / "config.toml").read_text() == "model = \n"


# ---------------------------------------------------------------- the command


def invoke(*args: str) -> Any:
    app = typer.Typer()
    app.command()(codex_config_command)
    return CliRunner().invoke(app, list(args), env={"CODEX_HOME": "/home/me/.codex"})


def test_command_prints_the_config_and_the_catalog() -> None:
    result = invoke(
        "--base-url", "http://127.0.0.1:8787", "--model", "qwen3", "-m", "glm", "--reasoning"
    )
    assert result.exit_code == 0, result.output
    toml_part, _, json_part = result.output.partition(
        "# Save as /home/me/.codex/toolwire-models.json:\n"
    )
    assert tomllib.loads(toml_part)["model_catalog_json"] == "/home/me/.codex/toolwire-models.json"
    catalog = json.loads(json_part)
    assert [(m["slug"], m["default_reasoning_level"]) for m in catalog["models"]] == [
        ("qwen3", "medium"),
        ("glm", "medium"),
    ]


def test_command_writes_into_a_codex_home(tmp_path: Path) -> None:
    instructions = tmp_path / "prompt.md"
    instructions.write_text("Answer in French.")
    result = invoke(
        "--base-url", "http://gw:1/v1", "-m", "m", "--codex-home", str(tmp_path / "home"),
        "--tool-search", "--context-window", "32768", "--instructions-file", str(instructions),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [entry] = json.loads((tmp_path / "home" / CATALOG_FILE_NAME).read_text())["models"]
    assert (entry["supports_search_tool"], entry["context_window"], entry["base_instructions"]) == (
        True,
        32768,
        "Answer in French.",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--provider-id", "openai"], "built-in"),
        (["--base-url", "localhost:8787"], "http(s) URL"),
        (["--instructions-file", "/nonexistent/prompt.md"], "prompt.md"),
    ],
)
def test_command_errors(args: list[str], message: str) -> None:
    base = ["--base-url", "http://gw/v1", "-m", "m"]
    result = invoke(*base, *args)
    assert result.exit_code == 2
    assert message in result.output


# ---------------------------------------------------------------- the real Codex CLI


def codex_env(home: Path, tmp_path: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "OPENAI_"))}
    (tmp_path / "h").mkdir(exist_ok=True)
    return {
        **keep,
        "CODEX_HOME": str(home),
        "HOME": str(tmp_path / "h"),
        "TMPDIR": str(tmp_path / "h"),
    }


@needs_codex
def test_codex_loads_the_catalog(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    models = (
        CodexModel("plain"),
        CodexModel("thinker", reasoning=True, tool_search=True, context_window=200_000),
    )
    write_codex_home(home, setup_for(*models))
    proc = subprocess.run(
        [str(ensure_codex()), "debug", "models"],
        env=codex_env(home, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    loaded = {m["slug"]: m for m in json.loads(proc.stdout)["models"]}
    assert list(loaded) == ["plain", "thinker"]
    thinker = loaded["thinker"]
    assert (
        thinker["context_window"],
        thinker["default_reasoning_level"],
        thinker["supports_search_tool"],
    ) == (
        200_000,
        "medium",
        True,
    )
    assert thinker["apply_patch_tool_type"] == "freeform"
    assert thinker["model_messages"]["instructions_template"] == DEFAULT_INSTRUCTIONS


@needs_codex
@pytest.mark.e2e
@pytest.mark.parametrize(("tool_search", "reasoning"), [(True, True), (False, False)])
def test_codex_knows_the_model_and_sends_the_catalogs_tools(
    gateway: GatewayProcess,
    upstream: ChatUpstream,
    tmp_path: Path,
    tool_search: bool,
    reasoning: bool,
) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    quiet = "".join(f"{key} = {value}\n" for key, value in QUIET_DEFAULTS.items())
    # A user's config: their own settings, and retries off for this provider (kept).
    (home / "config.toml").write_text(
        "# mine\n"
        + quiet
        + "\n[model_providers.toolwire]\nrequest_max_retries = 0\nstream_max_retries = 0\n"
    )
    model = CodexModel("qwen3-coder-local", reasoning=reasoning, tool_search=tool_search)
    setup = CodexSetup(
        base_url=gateway.base_url, models=(model,), api_key_env="TOOLWIRE_TEST_CLIENT_KEY"
    )
    write_codex_home(home, setup)
    upstream.responder = lambda body: Text("Hello from the gateway.")
    result = run_codex(
        base_url=gateway.base_url,  # unused: CODEX_HOME below is the one just written
        model=model.name,
        prompt="Say hello.",
        cwd=tmp_path,
        env={"CODEX_HOME": str(home), "TOOLWIRE_TEST_CLIENT_KEY": "client-key"},
    )
    assert result.returncode == 0, result.stderr
    assert result.last_message == "Hello from the gateway."
    assert "Model metadata" not in result.stderr + result.stdout

    [chat] = upstream.chat_requests
    tools = {tool["function"]["name"]: tool["function"] for tool in chat["tools"]}
    assert "freeform tool" in tools["apply_patch"]["description"]  # declared custom, sent wrapped
    assert tools["apply_patch"]["parameters"]["required"] == ["input"]
    assert ("tool_search" in tools) is tool_search
    assert (
        any(name.startswith("multi_agent_v1__") for name in tools) is not tool_search
    )  # deferred to the search
    assert (chat.get("reasoning_effort") == "medium") is reasoning
    assert chat["messages"][0]["role"] == "system"
    assert chat["messages"][0]["content"].startswith(DEFAULT_INSTRUCTIONS.splitlines()[0])


# ---------------------------------------------------------------- what a user reads and gets


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "at least one --model is needed"),
        (
            {"builtin": True, "api_key_env": "MY_KEY"},
            "--api-key-env does not apply with --builtin: Codex's built-in provider reads "
            "its key from OPENAI_API_KEY (or CODEX_API_KEY for codex exec)",
        ),
        (
            {"provider_id": "openai"},
            "--provider-id 'openai' is one of Codex's built-in providers, which a config entry cannot override; "
            "pick another id",
        ),
        ({"provider_id": 'my"tool'}, "--provider-id 'my\"tool' must be a plain TOML key"),
        ({"provider_id": "a.b"}, "--provider-id 'a.b' must be a plain TOML key"),
    ],
)
def test_each_refusal_in_full(settings: dict[str, Any], message: str) -> None:
    models = () if not settings else (CodexModel("m"),)
    with pytest.raises(ValueError) as refused:
        CodexSetup(base_url="http://127.0.0.1:8787/v1", models=models, **settings)
    assert str(refused.value) == message


@pytest.mark.parametrize(("url", "expected"), [("https://gw.example/BOX", "https://gw.example/BOX"), ("http://h:1/X/", "http://h:1/X")])
def test_a_path_is_kept_whatever_it_ends_with(url: str, expected: str) -> None:
    assert normalize_base_url(url) == expected


def test_builtin_repoints_the_built_in_provider_and_drops_a_chosen_one() -> None:
    text = 'model_provider = "toolwire"\nmodel = "old"\n\n[model_providers.toolwire]\nname = "toolwire"\n'
    updated = tomllib.loads(update_config(text, setup_for(CodexModel("qwen3"), builtin=True)))
    assert updated["openai_base_url"] == "http://127.0.0.1:8787/v1"
    assert "model_provider" not in updated and updated["model"] == "qwen3"
    assert updated["model_providers"] == {"toolwire": {"name": "toolwire"}}  # left as it was


def test_model_providers_that_is_not_a_table_is_refused_in_full() -> None:
    with pytest.raises(ValueError) as refused:
        update_config('model_providers = "x"\n', setup_for(CodexModel("m")))
    assert str(refused.value) == "config.toml: model_providers is not a table"


def test_a_new_config_names_its_providers_under_one_header() -> None:
    assert "[model_providers.toolwire]" in render_config(setup_for(CodexModel("m")))
    assert "[model_providers]\n" not in render_config(setup_for(CodexModel("m")))


def test_a_codex_home_is_made_with_its_parents_and_a_readable_catalog(tmp_path: Path) -> None:
    home = tmp_path / "a" / "b" / ".codex"
    config_path, catalog_path = write_codex_home(home, setup_for(CodexModel("qwen3-café")))
    assert config_path.parent == home and catalog_path.parent == home.resolve()
    written = catalog_path.read_text(encoding="utf-8")
    assert '"slug": "qwen3-café"' in written  # as written, not \u-escaped
    assert written.startswith('{\n  "models": [\n    {\n      "slug"')  # indented by two


def test_every_entry_says_which_gateway_serves_it() -> None:
    catalog = build_catalog(CodexSetup(base_url="http://10.0.0.7:9000/v1", models=(CodexModel("a"), CodexModel("b"))))
    assert {m["description"] for m in catalog["models"]} == {"Served by toolwire at http://10.0.0.7:9000/v1"}


def test_a_provider_id_of_any_plain_word_is_taken() -> None:
    for provider_id in ("Xtoolwire", "my-gateway_2", "LAB"):
        assert setup_for(CodexModel("a"), provider_id=provider_id).provider_id == provider_id


def test_each_model_once_in_the_order_first_named() -> None:
    models = models_of(["b", "a", "b", "", "a", "c"], context_window=64_000, reasoning=False, tool_search=False)
    assert [model.name for model in models] == ["b", "a", "c"]


def test_the_default_codex_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_codex_home() == tmp_path / ".codex"
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "elsewhere"))
    assert default_codex_home() == tmp_path / "elsewhere"


def test_rewriting_keeps_each_file_s_permissions(tmp_path: Path) -> None:
    """A config.toml kept private (it may name keys' variables, or hold a token) stays so."""
    config = tmp_path / "config.toml"
    config.write_text(USER_CONFIG)
    config.chmod(0o600)
    _, catalog = write_codex_home(tmp_path, setup_for(CodexModel("m")))
    catalog.chmod(0o640)
    write_codex_home(tmp_path, setup_for(CodexModel("m")))
    assert (config.stat().st_mode & 0o777, catalog.stat().st_mode & 0o777) == (0o600, 0o640)


def test_a_write_that_fails_leaves_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / CATALOG_FILE_NAME).mkdir()  # the catalog cannot replace a directory
    with pytest.raises(OSError):
        write_codex_home(tmp_path, setup_for(CodexModel("m")))
    assert sorted(path.name for path in tmp_path.iterdir()) == [CATALOG_FILE_NAME]


def test_the_new_files_are_written_beside_the_old_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file is written whole under a hidden name in its own folder, then renamed over
    the old one: a rename is atomic only within one filesystem, and the system's temporary
    folder (here one that cannot be written) may be another."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-folder"))
    seen: list[str] = []
    real_replace = os.replace

    def replace(source: str, target: Path) -> None:
        seen.append(Path(source).name)
        assert Path(source).parent == Path(target).parent
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    config, catalog = write_codex_home(tmp_path / "home", setup_for(CodexModel("m")))
    assert config.is_file() and catalog.is_file()
    assert sorted(name.rsplit(".", 1)[0] for name in seen) == sorted(f".{path.name}" for path in (config, catalog))
    assert sorted(path.name for path in (tmp_path / "home").iterdir()) == sorted([config.name, catalog.name])


def test_a_codex_home_is_read_and_written_as_utf_8_whatever_the_locale(tmp_path: Path) -> None:
    """Codex's files are UTF-8. Under a locale that is not (``LC_ALL=C`` without Python's
    UTF-8 mode: ASCII), a comment in French and the accented entry of a catalog named
    before are kept, instead of the write failing or that catalog being dropped."""
    home = tmp_path / "home"
    home.mkdir()
    theirs = tmp_path / "their-models.json"
    their_model = {"slug": "modèle-à-eux", "display_name": "Le leur"}
    theirs.write_text(json.dumps({"models": [their_model]}, ensure_ascii=False), encoding="utf-8")
    (home / "config.toml").write_text(f'# réglages de Zoé\nmodel_catalog_json = "{theirs}"\n', encoding="utf-8")
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        assert not sys.flags.utf8_mode and locale.getencoding() == "ANSI_X3.4-1968", "run without PYTHONUTF8=1"
        config, catalog = write_codex_home(home, setup_for(CodexModel("qwen3")))
    finally:
        locale.setlocale(locale.LC_CTYPE, before)
    assert config.read_text(encoding="utf-8").startswith("# réglages de Zoé\n")
    assert json.loads(catalog.read_text(encoding="utf-8"))["models"][1:] == [their_model]
