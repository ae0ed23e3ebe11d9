"""``toolwire codex-config``: print, or write into a Codex home, the Codex config for the gateway.

Only argument handling and output live here; the builders are ``toolwire.codex_config``'s.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from toolwire.codex_config import (
    CATALOG_FILE_NAME,
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_INSTRUCTIONS,
    CodexSetup,
    build_catalog,
    default_codex_home,
    models_of,
    normalize_base_url,
    render_config,
    write_codex_home,
)


def codex_config_command(
    base_url: Annotated[
        str,
        typer.Option(
            help="The gateway's URL as Codex should call it, e.g. http://127.0.0.1:8787/v1."
        ),
    ],
    model: Annotated[
        list[str],
        typer.Option(
            "--model",
            "-m",
            help="A model the gateway serves (repeatable; the first is Codex's default).",
        ),
    ],
    codex_home: Annotated[
        Path | None,
        typer.Option(
            help="Write into this Codex home (config.toml, keeping your other settings, and "
            f"{CATALOG_FILE_NAME}) instead of printing."
        ),
    ] = None,
    context_window: Annotated[
        int, typer.Option(min=1024, help="Context window of the models, in tokens.")
    ] = DEFAULT_CONTEXT_WINDOW,
    reasoning: Annotated[
        bool, typer.Option("--reasoning", help="The models take a reasoning effort (low, medium, high).")
    ] = False,
    tool_search: Annotated[
        bool, typer.Option("--tool-search", help="Let Codex send tool_search and defer tools to it.")
    ] = False,
    builtin: Annotated[
        bool,
        typer.Option(
            "--builtin",
            help="Re-point Codex's built-in OpenAI provider (openai_base_url: WebSocket, remote "
            "compaction; key in OPENAI_API_KEY or CODEX_API_KEY) instead of adding a provider."
        ),
    ] = False,
    provider_id: Annotated[
        str, typer.Option(help="The model_providers id in config.toml.")
    ] = "toolwire",
    api_key_env: Annotated[
        str | None,
        typer.Option(
            help="Environment variable holding the gateway's client key (Codex's env_key)."
        ),
    ] = None,
    instructions_file: Annotated[
        Path | None,
        typer.Option(
            help="Base instructions for the models (default: toolwire's short coding-agent prompt)."
        ),
    ] = None,
) -> None:
    """Print, or write into a Codex home, the Codex config for the gateway's models."""
    try:
        instructions = (
            instructions_file.read_text(encoding="utf-8")
            if instructions_file is not None
            else DEFAULT_INSTRUCTIONS
        )
        setup = CodexSetup(
            base_url=normalize_base_url(base_url),
            models=models_of(
                model, context_window=context_window, reasoning=reasoning, tool_search=tool_search
            ),
            provider_id=provider_id,
            api_key_env=api_key_env,
            instructions=instructions,
            builtin=builtin,
        )
        if codex_home is not None:
            config_path, catalog_path = write_codex_home(codex_home, setup)
            typer.echo(f"updated {config_path}")
            provider = "Codex's built-in provider" if builtin else f"provider {setup.provider_id}"
            typer.echo(f"wrote {catalog_path} ({len(setup.models)} model(s) for {provider})")
            if builtin:
                typer.echo("Codex reads the gateway's client key from OPENAI_API_KEY (CODEX_API_KEY for codex exec).")
            return
        catalog_path = (default_codex_home() / CATALOG_FILE_NAME).resolve()
        setup = replace(setup, catalog_path=str(catalog_path))
    except (OSError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"# In {default_codex_home() / 'config.toml'} (keys above any [table]):")
    typer.echo(render_config(setup).rstrip("\n"))
    typer.echo("")
    typer.echo(f"# Save as {catalog_path}:")
    typer.echo(json.dumps(build_catalog(setup), indent=2, ensure_ascii=False))
