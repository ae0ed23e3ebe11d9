"""``toolwire keys create|list|revoke|usage``: the keys of a shared gateway, from a shell.

Every command works on the store ``toolwire serve`` uses: ``--store URL``, else the
``[server] store`` of ``--config FILE``, else the default SQLite file. ``create`` prints
what it made and then the key, alone on the last line of stdout, the only time it is
shown. Exit codes: 0 done, 1 the store refused or failed (a name in use, no such key,
unreachable), 2 bad usage. Only argument handling and display live here.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import orjson
import typer

if TYPE_CHECKING:
    from toolwire.keys import KeyStore

T = TypeVar("T")

EXIT_FAILED = 1
EXIT_USAGE = 2

keys_app = typer.Typer(
    help="Client keys for a gateway shared by a team: create, list, revoke, and see their usage.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # plain help, as the app's
)

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Where the gateway keeps its keys: sqlite:///path, sqlite:// (state directory) or "
        "redis://host:port/db [the config file's, else sqlite://].",
    ),
]
ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="A toolwire.toml whose [server] store to use.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@keys_app.command("create")
def create_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Who or what the key is for (alice, ci-bot): shown in usage and /metrics.")],
    models: Annotated[
        str | None, typer.Option(help="The models the key may use, comma-separated [all].")
    ] = None,
    rpm: Annotated[int | None, typer.Option(help="Requests per minute [no limit].")] = None,
    tpm: Annotated[int | None, typer.Option(help="Tokens (input + output) per minute [no limit].")] = None,
    max_concurrent: Annotated[int | None, typer.Option(help="Requests at once [no limit].")] = None,
    budget_tokens: Annotated[
        int | None, typer.Option(help="Tokens (input + output) over the key's life [no limit].")
    ] = None,
    expires: Annotated[str | None, typer.Option(help="Expire after this long: 30d, 12h, 90m, 1w [never].")] = None,
    store: StoreOption = None,
    config: ConfigOption = None,
) -> None:
    """Create a key and print it once, alone on the last line."""
    from pydantic import ValidationError

    from toolwire.keys import KeySpec, create_key

    try:
        spec = KeySpec(
            name=name,
            models=models.split(",") if models is not None else None,
            rpm=rpm,
            tpm=tpm,
            max_concurrent=max_concurrent,
            budget_tokens=budget_tokens,
            expires=expires,
        )
    except ValidationError as exc:
        _fail_usage("; ".join(_flag_error(error) for error in exc.errors(include_url=False)))
    record, key = _run(store, config, lambda keys: create_key(keys, spec))
    described = record.describe(record.created_at)
    typer.echo(f"Created the key '{record.name}' ({record.prefix}): {_rules(described)}.")
    typer.echo("This is the only time the key is shown; give it to its holder now:")
    typer.echo(key)


@keys_app.command("list")
def list_command(store: StoreOption = None, config: ConfigOption = None, json_output: JsonOption = False) -> None:
    """List every key: name, visible prefix, status, models and limits."""
    from toolwire.keys import list_keys

    keys = _run(store, config, list_keys)
    if json_output:
        typer.echo(orjson.dumps(keys, option=orjson.OPT_INDENT_2).decode())
        return
    rows = [
        [key["name"], key["prefix"], key["status"], _when(key["created_at"]), _when(key["expires_at"]), _rules(key, expiry=False)]
        for key in keys
    ]
    _table(["NAME", "PREFIX", "STATUS", "CREATED", "EXPIRES", "RULES"], rows, empty="No keys yet.")


@keys_app.command("revoke", short_help="Revoke the active key of that name.")
def revoke_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The name of the key to revoke.")],
    store: StoreOption = None,
    config: ConfigOption = None,
) -> None:
    """Revoke the active key of that name: every gateway refuses it from now on."""
    from toolwire.keys import revoke_key

    revoked = _run(store, config, lambda keys: revoke_key(keys, name))
    typer.echo(f"Revoked the key '{revoked.name}' ({revoked.prefix}).")


@keys_app.command("usage", short_help="Requests and tokens per key and model.")
def usage_command(
    name: Annotated[str | None, typer.Argument(metavar="NAME", help="Only the keys of this name [all].")] = None,
    store: StoreOption = None,
    config: ConfigOption = None,
    json_output: JsonOption = False,
) -> None:
    """Requests, input, output and cached tokens and last use, per key and model."""
    from toolwire.keys import usage_report

    rows = _run(store, config, lambda keys: usage_report(keys, name))
    if json_output:
        typer.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        return
    table = [
        [
            row["name"],
            row["prefix"],
            row["model"],
            str(row["requests"]),
            str(row["input_tokens"]),
            str(row["output_tokens"]),
            str(row["cached_tokens"]),
            _when(row["last_used_at"]),
        ]
        for row in rows
    ]
    _table(["NAME", "PREFIX", "MODEL", "REQUESTS", "INPUT", "OUTPUT", "CACHED", "LAST USED"], table, empty="No usage yet.")


def store_url(store: str | None, config: Path | None) -> str:
    """The store ``toolwire serve`` would use with the same ``--store`` and ``--config``."""
    if store is not None:
        return store
    if config is not None:
        from toolwire.config import ConfigError, load_config

        try:
            return load_config(config).server.store
        except ConfigError as exc:
            _fail_usage(str(exc))
    from toolwire.store import DEFAULT_STORE_URL

    return DEFAULT_STORE_URL


def _run(store: str | None, config: Path | None, action: Callable[[KeyStore], Awaitable[T]]) -> T:
    from toolwire.errors import ToolwireError
    from toolwire.keys import open_key_store

    url = store_url(store, config)
    if url == "none":
        _fail_usage("the gateway keeps no store (store = 'none'): keys need sqlite:// or redis://")
    try:
        keys = open_key_store(url, for_cli=True)
    except ValueError as exc:
        _fail_usage(f"--store: {exc}")

    async def run() -> T:
        try:
            return await action(keys)
        finally:
            await keys.aclose()

    try:
        return asyncio.run(run())
    except ToolwireError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(EXIT_FAILED) from None


def _rules(key: dict[str, Any], *, expiry: bool = True) -> str:
    parts = [f"models {', '.join(key['models'])}" if key["models"] is not None else "every model"]
    for field, unit in (("rpm", "requests/min"), ("tpm", "tokens/min"), ("max_concurrent", "at once")):
        if key[field] is not None:
            parts.append(f"{key[field]} {unit}")
    if key["budget_tokens"] is not None:
        parts.append(f"budget {key['budget_tokens']} tokens")
    if expiry and key["expires_at"] is not None:
        parts.append(f"expires {_when(key['expires_at'])}")
    return "; ".join(parts)


def _when(moment: float | None) -> str:
    if moment is None:
        return "-"
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], *, empty: str) -> None:
    if not rows:
        typer.echo(empty)
        return
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    for row in [header, *rows]:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _flag_error(error: Any) -> str:
    from toolwire.config import validator_message

    field = str(error["loc"][0]) if error["loc"] else "key"
    flag = "NAME" if field == "name" else "--" + field.replace("_", "-")
    return f"{flag}: {validator_message(error)}"


def _fail_usage(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(EXIT_USAGE)
