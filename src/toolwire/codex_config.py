"""``toolwire codex-config``: describe a toolwire gateway and its models to the Codex CLI.

Codex chooses a model's prompt, tool set and limits from its model catalog. A slug it
does not know gets fallback metadata (no ``apply_patch``, a 272k context window,
``reasoning.summary`` sent) and the warning "Model metadata for `X` not found". This
module writes the two things that fix that: the provider section of Codex's
``config.toml`` and a ``model_catalog_json`` file with one entry per model.

Codex reaches the gateway one of two ways (``CodexSetup.builtin``): a provider of its
own (``[model_providers.toolwire]``, HTTP + SSE), or its built-in OpenAI provider
re-pointed with ``openai_base_url`` (WebSocket first, remote compaction; its key in
``OPENAI_API_KEY``, or ``CODEX_API_KEY`` for ``codex exec``). The catalog is the same.

What Codex 0.169.0 accepts, measured with the real CLI (``codex debug models`` renders
the catalog it loaded; ``codex exec`` shows the request it then sends):

* A catalog that does not parse is a hard error at start-up ("failed to parse
  model_catalog_json ..."), not a silent fallback: ``apply_patch_tool_type: "function"``
  is an unknown variant (only ``"freeform"`` or null), and an entry needs ``slug``,
  ``display_name``, ``supported_reasoning_levels``, ``shell_type``, ``visibility``,
  ``supported_in_api``, ``priority``, ``support_verbosity``, ``truncation_policy``,
  ``experimental_supported_tools`` and instructions: ``base_instructions`` (stored as
  ``model_messages.instructions_template``). Unknown fields are ignored.
* The instructions are the whole base prompt: ``""`` is accepted and sends none at all
  (the fallback sends Codex's own ~17 kB prompt), so entries carry
  ``DEFAULT_INSTRUCTIONS`` or the user's ``--instructions-file``.
* The catalog replaces Codex's bundled one: with it set, bundled slugs such as
  ``gpt-5.5`` fall back too. Entries of a catalog the config already named are kept.
* ``apply_patch_tool_type: "freeform"`` adds the custom ``apply_patch`` tool;
  ``supports_search_tool`` adds ``tool_search`` (and defers the multi-agent tools to
  it); ``default_reasoning_level`` null sends ``reasoning: {}``, a level sends
  ``reasoning.effort``; ``supports_reasoning_summary_parameter: false`` stops
  ``reasoning.summary``; ``shell_type: "shell_command"`` is read as unified exec
  (``exec_command`` + ``write_stdin``), as in the bundled catalog.

The builders are pure (``build_catalog``, ``provider_settings``, ``update_config``);
``write_codex_home`` is the I/O around them; the command is ``toolwire.cli``'s.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import tomlkit
from tomlkit.items import InlineTable, Table

__all__ = [
    "CATALOG_FILE_NAME",
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_INSTRUCTIONS",
    "CodexModel",
    "CodexSetup",
    "build_catalog",
    "default_codex_home",
    "merge_catalogs",
    "model_entry",
    "models_of",
    "normalize_base_url",
    "provider_settings",
    "render_config",
    "update_config",
    "write_codex_home",
]

CATALOG_FILE_NAME = "toolwire-models.json"
DEFAULT_CONTEXT_WINDOW = 128_000
# Provider ids Codex defines itself: a user entry cannot override them.
BUILT_IN_PROVIDERS = frozenset(
    {"openai", "ollama", "lmstudio", "amazon-bedrock", "amazon-bedrock-runtime"}
)

DEFAULT_INSTRUCTIONS = """\
You are Codex, a coding agent working in the user's workspace through the Codex CLI.

Carry the task through to the end: look at the relevant code, make the change, check \
that it works (run the tests or the program when you can), then report.

Tools:
- exec_command runs a shell command in the workspace; prefer `rg` to search files.
- apply_patch edits files. Its input is the patch text itself, not JSON:
  *** Begin Patch
  *** Update File: src/app.py
  @@ def greet():
  -    return "hi"
  +    return "hello"
  *** End Patch
  A new file is "*** Add File: path" followed by lines starting with "+"; \
"*** Delete File: path" removes one.

Keep changes small and in the style of the code around them, and do not undo changes \
you did not make. Be concise: when done, say what you changed and how you checked it.
"""

_REASONING_LEVELS = [
    {"effort": "low", "description": "Fast responses with lighter reasoning"},
    {"effort": "medium", "description": "Balances speed and reasoning depth"},
    {"effort": "high", "description": "Greater reasoning depth for complex problems"},
]


@dataclass(frozen=True, slots=True)
class CodexModel:
    """One model the gateway serves, as Codex should know it."""

    name: str
    context_window: int = DEFAULT_CONTEXT_WINDOW
    reasoning: bool = False
    tool_search: bool = False


@dataclass(frozen=True, slots=True)
class CodexSetup:
    """Everything ``codex-config`` writes."""

    base_url: str
    models: tuple[CodexModel, ...]
    provider_id: str = "toolwire"
    api_key_env: str | None = None
    instructions: str = DEFAULT_INSTRUCTIONS
    catalog_path: str = field(default="")
    """Where the catalog file is (``model_catalog_json``); set by the writer."""
    builtin: bool = False
    """Re-point Codex's built-in OpenAI provider (``openai_base_url``) instead of adding one."""

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("at least one --model is needed")
        if self.builtin:
            if self.api_key_env:
                raise ValueError(
                    "--api-key-env does not apply with --builtin: Codex's built-in provider reads "
                    "its key from OPENAI_API_KEY (or CODEX_API_KEY for codex exec)"
                )
            return
        if self.provider_id in BUILT_IN_PROVIDERS:
            raise ValueError(
                f"--provider-id {self.provider_id!r} is one of Codex's built-in providers, which "
                "a config entry cannot override; pick another id"
            )
        if not self.provider_id or any(c in self.provider_id for c in ' ."'):
            raise ValueError(f"--provider-id {self.provider_id!r} must be a plain TOML key")


# ---------------------------------------------------------------- the catalog


def model_entry(
    model: CodexModel, *, base_url: str, instructions: str, priority: int
) -> dict[str, Any]:
    """The catalog entry for ``model`` (the fields Codex 0.169.0 requires, and those that
    choose its tools; see the module docstring)."""
    return {
        "slug": model.name,
        "display_name": model.name,
        "description": f"Served by toolwire at {base_url}",
        "base_instructions": instructions,
        "default_reasoning_level": "medium" if model.reasoning else None,
        "supported_reasoning_levels": _REASONING_LEVELS if model.reasoning else [],
        "supports_reasoning_summary_parameter": False,
        "default_reasoning_summary": "none",
        "shell_type": "shell_command",
        "apply_patch_tool_type": "freeform",
        "supports_search_tool": model.tool_search,
        "supports_parallel_tool_calls": True,
        "use_responses_lite": False,
        "visibility": "list",
        "supported_in_api": True,
        "priority": priority,
        "upgrade": None,
        "availability_nux": None,
        "support_verbosity": False,
        "default_verbosity": None,
        "truncation_policy": {"mode": "tokens", "limit": 10_000},
        "context_window": model.context_window,
        "max_context_window": model.context_window,
        "experimental_supported_tools": [],
        "input_modalities": ["text", "image"],
    }


def build_catalog(setup: CodexSetup) -> dict[str, Any]:
    """The ``model_catalog_json`` document for ``setup``'s models, in the order given."""
    return {
        "models": [
            model_entry(
                model, base_url=setup.base_url, instructions=setup.instructions, priority=index
            )
            for index, model in enumerate(setup.models, start=1)
        ]
    }


def merge_catalogs(ours: dict[str, Any], previous: Any) -> dict[str, Any]:
    """``ours``, then the entries of a catalog the user had before whose slug is not ours."""
    slugs = {entry["slug"] for entry in ours["models"]}
    kept = []
    if isinstance(previous, dict) and isinstance(previous.get("models"), list):
        kept = [
            entry
            for entry in previous["models"]
            if isinstance(entry, dict) and entry.get("slug") not in slugs
        ]
    return {**ours, "models": [*ours["models"], *kept]}


# ---------------------------------------------------------------- config.toml


def normalize_base_url(url: str) -> str:
    """``http://host:8787`` -> ``http://host:8787/v1`` (Codex appends ``/responses``).

    A URL with a path is taken as it is, without a trailing slash.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--base-url must be an http(s) URL, got {url!r}")
    url = url.rstrip("/")
    return url + "/v1" if not parts.path.strip("/") else url


def provider_settings(setup: CodexSetup) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The root keys and the ``[model_providers.<id>]`` table that ``setup`` sets (None
    with ``builtin``: the built-in provider needs only ``openai_base_url``)."""
    root: dict[str, Any] = (
        {"openai_base_url": setup.base_url}
        if setup.builtin
        else {"model_provider": setup.provider_id}
    )
    root["model"] = setup.models[0].name
    if setup.catalog_path:
        root["model_catalog_json"] = setup.catalog_path
    if setup.builtin:
        return root, None
    provider: dict[str, Any] = {
        # Never "OpenAI": that name switches on OpenAI-only behaviour in Codex.
        "name": setup.provider_id,
        "base_url": setup.base_url,
        "wire_api": "responses",
    }
    if setup.api_key_env:
        provider["env_key"] = setup.api_key_env
    return root, provider


def render_config(setup: CodexSetup) -> str:
    """The ``config.toml`` lines ``setup`` needs, for a new file or to paste."""
    return update_config("", setup)


def update_config(text: str, setup: CodexSetup) -> str:
    """``text`` (a ``config.toml``) with ``setup``'s keys set; comments, formatting and
    every other key kept. A provider table that exists is updated in place (its other
    keys kept), in the style it was written in (table or inline table). With
    ``builtin``, ``model_provider`` is removed (the built-in provider is the default)
    and provider tables are left as they are."""
    document = tomlkit.parse(text)
    root, provider = provider_settings(setup)
    for key, value in root.items():
        document[key] = value
    if provider is None:
        document.pop("model_provider", None)
        return tomlkit.dumps(document)
    providers = document.get("model_providers")
    if providers is None:
        providers = tomlkit.table(is_super_table=True)
        document["model_providers"] = providers
    if not isinstance(providers, Table | InlineTable):
        raise ValueError("config.toml: model_providers is not a table")
    existing = providers.get(setup.provider_id)
    if isinstance(existing, Table | InlineTable):
        for key, value in provider.items():
            existing[key] = value
    elif isinstance(providers, InlineTable):
        inline = tomlkit.inline_table()
        inline.update(provider)
        providers[setup.provider_id] = inline
    else:
        table = tomlkit.table()
        table.update(provider)
        table.add(tomlkit.nl())
        providers[setup.provider_id] = table
    return tomlkit.dumps(document)


# ---------------------------------------------------------------- the writer


def write_codex_home(codex_home: Path, setup: CodexSetup) -> tuple[Path, Path]:
    """Write ``config.toml`` (updated, or created) and the catalog beside it.

    Returns both paths. The entries of the catalog ``config.toml`` named before are kept
    (Codex reads one catalog only), so running it again adds models and removes none.
    Raises ``ValueError`` for a ``config.toml`` that is not valid TOML.
    """
    codex_home.mkdir(parents=True, exist_ok=True)
    config_path = codex_home / "config.toml"
    catalog_path = (codex_home / CATALOG_FILE_NAME).resolve()
    text = config_path.read_text(encoding="utf-8") if config_path.exists() else ""
    previous = _previous_catalog(text)
    setup = replace(setup, catalog_path=str(catalog_path))
    catalog = merge_catalogs(build_catalog(setup), previous)
    _replace(catalog_path, json.dumps(catalog, indent=2, ensure_ascii=False) + "\n")
    _replace(config_path, update_config(text, setup))
    return config_path, catalog_path


def _previous_catalog(config_text: str) -> Any:
    """The catalog ``config.toml`` named before (ours from an earlier run, or the user's
    own), or None if there was none or it cannot be read."""
    named = tomlkit.parse(config_text).get("model_catalog_json")
    if not isinstance(named, str):
        return None
    try:
        return json.loads(Path(named).expanduser().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a reader never sees half a file)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        if path.exists():
            os.chmod(temporary, path.stat().st_mode & 0o777)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def default_codex_home() -> Path:
    """``$CODEX_HOME``, else ``~/.codex``."""
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def models_of(
    names: Sequence[str], *, context_window: int, reasoning: bool, tool_search: bool
) -> tuple[CodexModel, ...]:
    """One ``CodexModel`` per distinct name, in order."""
    unique = [name for index, name in enumerate(names) if name and name not in names[:index]]
    return tuple(
        CodexModel(
            name, context_window=context_window, reasoning=reasoning, tool_search=tool_search
        )
        for name in unique
    )
