"""The ``toolwire`` command line. Only argument handling lives here."""

from __future__ import annotations

import enum
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from toolwire.config import (
    ConfigError,
    GatewayConfig,
    ServerConfig,
    load_config,
    upstream_from_flag,
)


class LogLevel(enum.StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


app = typer.Typer(
    help="toolwire: the Responses API (Codex, openai SDK) in front of any Chat Completions backend.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _commands() -> None:
    """toolwire: the Responses API (Codex, openai SDK) in front of any Chat Completions backend."""


@app.command()
def serve(
    upstream: Annotated[
        str | None,
        typer.Option(
            help="The backend: a Chat Completions base URL (http://127.0.0.1:11434/v1), a shortcut "
            "(ollama, vllm, llama.cpp, lmstudio, openai, deepseek, openrouter, dashscope, moonshot, zhipu), "
            "or 'mock' for the built-in scripted model. Becomes the default upstream."
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option(help="A toolwire.toml file; flags override it.")] = None,
    host: Annotated[str | None, typer.Option(help="Address to listen on [127.0.0.1].")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on [8787].")] = None,
    upstream_key_env: Annotated[
        str | None, typer.Option(help="Name of the environment variable holding the upstream API key.")
    ] = None,
    preset: Annotated[str | None, typer.Option(help="Backend quirks preset for --upstream (deepseek, ollama, ...).")] = None,
    model: Annotated[str | None, typer.Option(help="Send this model name to the --upstream instead of the client's.")] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(help="Name of the environment variable holding the client API keys (comma-separated)."),
    ] = None,
    insecure_no_auth: Annotated[
        bool, typer.Option(help="Allow listening on a non-loopback address without client keys.")
    ] = False,
    max_body_bytes: Annotated[int | None, typer.Option(help="Largest request body accepted (413 above) [32 MiB].")] = None,
    upstream_timeout: Annotated[
        float | None, typer.Option(help="Seconds to wait for the upstream's first byte (504), or between reads [300].")
    ] = None,
    upstream_retries: Annotated[
        int | None, typer.Option(help="Attempts for a failed connect or a 5xx before anything streamed [3].")
    ] = None,
    shutdown_grace: Annotated[
        float | None, typer.Option(help="On SIGTERM, seconds running streams get to finish before they are failed [30].")
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            help="Where stored responses live: sqlite:///path, sqlite:// (state directory), memory://, "
            "redis://host:port/db, or none [sqlite://]."
        ),
    ] = None,
    store_ttl: Annotated[float | None, typer.Option(help="Seconds a stored response is kept after last use [30 days].")] = None,
    store_max_entries: Annotated[int | None, typer.Option(help="Most stored responses kept [10000].")] = None,
    capture: Annotated[
        Path | None, typer.Option(help="Write each exchange (all four sides, redacted) as JSON lines into DIR.")
    ] = None,
    capture_max_bytes: Annotated[int | None, typer.Option(help="Rotate capture files at this size [64 MiB].")] = None,
    inspector: Annotated[
        bool | None, typer.Option("--inspector/--no-inspector", help="Serve the web inspector at /ui; it keeps recent traffic in memory [off].")
    ] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes (one per core is a good start) [1].")] = None,
    client_header_timeout: Annotated[
        float | None, typer.Option(help="Seconds a request's head may take to arrive (408 past it) [10].")
    ] = None,
    max_header_bytes: Annotated[int | None, typer.Option(help="Largest request head accepted (431 above) [64 KiB].")] = None,
    client_body_timeout: Annotated[
        float | None, typer.Option(help="Seconds for a request body's first bytes, and slack for --client-body-min-rate (408) [30].")
    ] = None,
    client_body_min_rate: Annotated[
        int | None, typer.Option(help="Bytes a second a request body must arrive at, on average, after that (408) [8 KiB].")
    ] = None,
    client_send_timeout: Annotated[
        float | None, typer.Option(help="Seconds a client may take none of its answer before it is dropped [60].")
    ] = None,
    keep_alive_timeout: Annotated[float | None, typer.Option(help="Seconds an idle keep-alive connection is kept [30].")] = None,
    max_connections: Annotated[
        int | None, typer.Option(help="Client connections per process (503 + retry-after past it) [from ulimit -n, at most 4096].")
    ] = None,
    max_streams: Annotated[
        int | None, typer.Option(help="/v1/responses exchanges in progress per process (503 + retry-after past it) [from ulimit -n, at most 1024].")
    ] = None,
    upstream_max_line_bytes: Annotated[
        int | None, typer.Option(help="Longest SSE line accepted from an upstream; the stream fails past it [16 MiB].")
    ] = None,
    upstream_max_event_bytes: Annotated[
        int | None, typer.Option(help="Largest SSE event accepted from an upstream; the stream fails past it [16 MiB].")
    ] = None,
    upstream_max_body_bytes: Annotated[
        int | None, typer.Option(help="Largest non-streamed upstream answer, decompressed (502 past it) [32 MiB].")
    ] = None,
    upstream_max_stream_bytes: Annotated[
        int | None, typer.Option(help="Longest streamed upstream answer, decompressed; the stream fails past it [128 MiB].")
    ] = None,
    log_level: Annotated[LogLevel, typer.Option(help="How much the gateway logs.")] = LogLevel.info,
) -> None:
    """Serve POST /v1/responses in front of Chat Completions backends."""
    import uvicorn

    from toolwire.server._auth import is_loopback, parse_client_keys
    from toolwire.server._capacity import capacity, raise_open_files_limit
    from toolwire.server._factory import MODEL_OVERRIDE_ENV
    from toolwire.server._settings import CONFIG_ENV
    from toolwire.server._workers import LOG_FORMAT, reuse_port_supported, run_workers
    from toolwire.upstream import proxy_for

    try:
        settings = load_config(config) if config is not None else GatewayConfig()
    except ConfigError as exc:
        _fail(str(exc))
    overrides = {
        key: value
        for key, value in {
            "host": host,
            "port": port,
            "api_key_env": api_key_env,
            "max_body_bytes": max_body_bytes,
            "upstream_timeout": upstream_timeout,
            "upstream_retries": upstream_retries,
            "shutdown_grace": shutdown_grace,
            "workers": workers,
            "store": store,
            "store_ttl_seconds": store_ttl,
            "store_max_entries": store_max_entries,
            "capture_dir": str(capture) if capture is not None else None,
            "capture_max_bytes": capture_max_bytes,
            "inspector": inspector,
            "client_header_timeout": client_header_timeout,
            "max_header_bytes": max_header_bytes,
            "client_body_timeout": client_body_timeout,
            "client_body_min_rate": client_body_min_rate,
            "client_send_timeout": client_send_timeout,
            "keep_alive_timeout": keep_alive_timeout,
            "max_connections": max_connections,
            "max_streams": max_streams,
            "upstream_max_line_bytes": upstream_max_line_bytes,
            "upstream_max_event_bytes": upstream_max_event_bytes,
            "upstream_max_body_bytes": upstream_max_body_bytes,
            "upstream_max_stream_bytes": upstream_max_stream_bytes,
        }.items()
        if value is not None
    }
    if insecure_no_auth:
        overrides["insecure_no_auth"] = True
    try:
        server = ServerConfig.model_validate({**settings.server.model_dump(), **overrides})
        upstreams = list(settings.upstreams)
        if upstream is not None:
            flagged = upstream_from_flag(upstream, api_key_env=upstream_key_env, preset=preset)
            upstreams = [u.model_copy(update={"default": False}) for u in upstreams if u.name != flagged.name]
            upstreams.append(flagged)
        settings = GatewayConfig(server=server, upstreams=upstreams, models=settings.models)
    except ValidationError as exc:
        _fail("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)))
    except ValueError as exc:
        _fail(str(exc))
    if not settings.upstreams:
        _fail("no upstream: pass --upstream URL (or a shortcut such as ollama, or mock), or --config FILE.")
    for problem in settings.problems():
        _fail(f"{'.'.join(map(str, problem[0]))}: {problem[1]}")
    for needed in settings.upstreams:
        if needed.api_key_env is None:
            continue
        key = os.environ.get(needed.api_key_env)
        if key is None:
            _fail(f"the upstream '{needed.name}' takes its key from {needed.api_key_env}, which is not set.")
        if key and needed.base_url and "@" in needed.base_url.split("/")[2]:
            _fail(
                f"the upstream '{needed.name}' has credentials in its URL and a key in "
                f"{needed.api_key_env}: give one of them."
            )
    for reached in settings.upstreams:
        if reached.base_url is not None:
            try:
                proxy_for(reached.base_url, os.environ)
            except ValueError as exc:
                _fail(f"the upstream '{reached.name}': {exc}")
    server = settings.server
    if server.store != "none":
        from toolwire.store import open_store

        try:
            open_store(server.store, ttl_seconds=server.store_ttl_seconds, max_entries=server.store_max_entries)
        except ValueError as exc:
            _fail(f"--store: {exc}")
    client_keys = parse_client_keys(os.environ.get(server.api_key_env, "")) if server.api_key_env else ()
    if server.api_key_env and not client_keys:
        _fail(f"--api-key-env names {server.api_key_env}, which holds no key.")
    if not client_keys and not is_loopback(server.host) and not server.insecure_no_auth:
        _fail(
            f"refusing to listen on {server.host} without client keys: anyone who can reach it could use "
            "your upstream. Set --api-key-env VAR (VAR holding comma-separated keys), or pass "
            "--insecure-no-auth if this is really what you want."
        )
    open_files = raise_open_files_limit()
    try:
        caps = capacity(server.max_connections, server.max_streams, open_files)
    except ValueError as exc:
        _fail(str(exc))
    os.environ[CONFIG_ENV] = settings.model_dump_json()
    os.environ[MODEL_OVERRIDE_ENV] = model or ""
    logging.basicConfig(level=log_level.value.upper(), format=LOG_FORMAT)
    logging.getLogger("toolwire.server").info(
        "per process: at most %d client connections and %d streams (open files limit %d)",
        caps.max_connections, caps.max_streams, open_files,
    )
    uvicorn_config: dict[str, Any] = {
        "app": "toolwire.server._factory:app_from_env",
        "factory": True,
        "host": server.host,
        "port": server.port,
        "log_level": log_level.value,
        "access_log": False,
        "loop": "uvloop" if sys.platform != "win32" else "asyncio",
        # uvicorn's httptools protocol with every client read bounded (see its module).
        "http": "toolwire.server._connections:BoundedHttpToolsProtocol",
        "timeout_keep_alive": server.keep_alive_timeout,  # a float works: it goes to call_later
        "timeout_graceful_shutdown": server.shutdown_grace,  # a float works: it goes to asyncio.wait_for
    }
    if server.workers > 1 and reuse_port_supported():
        raise typer.Exit(run_workers(uvicorn_config, server.workers, log_level.value))
    uvicorn.run(**uvicorn_config, workers=server.workers)


def _register_commands() -> None:
    from toolwire.agent import agent_command
    from toolwire.codex_config import codex_config_command
    from toolwire.demo import demo_command

    app.command("agent", help="Run a task with tools against a Responses endpoint until the model answers.")(
        agent_command
    )
    app.command("codex-config", help="Print, or write into a Codex home, the Codex config for the gateway's models.")(
        codex_config_command
    )
    app.command("demo", help="Run a tool-calling exchange through the gateway on the mock model and show both sides.")(
        demo_command
    )


_register_commands()


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def main() -> None:
    app()
