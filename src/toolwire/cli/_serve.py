"""``toolwire serve``: the gateway, configured by a file and flags over it.

Only argument handling lives here: ``with_flags`` lays the flags over the file,
``serve_problems`` (``_checks``) says what stops it from starting, ``serving_lines``
(``_summary``) what it will serve, logged as it starts, and uvicorn serves the app that
``toolwire.server`` builds from the configuration in every worker.
"""

from __future__ import annotations

import enum
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from toolwire.config import GatewayConfig, ServerConfig
    from toolwire.errors import UpstreamError
    from toolwire.keys import KeyStore
    from toolwire.store import ResponseStore

T = TypeVar("T")


class LogLevel(enum.StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


def serve(
    upstream: Annotated[
        str | None,
        typer.Option(
            help="The backend: a Chat Completions base URL (http://127.0.0.1:11434/v1), a shortcut "
            "(ollama, vllm, llama.cpp, lmstudio, openai, deepseek, openrouter, dashscope, moonshot, zhipu; "
            "Anthropic Messages APIs: anthropic, deepseek-anthropic, kimi-anthropic, glm-anthropic, "
            "minimax-anthropic), or 'mock' for the built-in scripted model. A URL with --preset of "
            "another kind (--preset anthropic) is that kind. Becomes the default upstream."
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option(help="A toolwire.toml file; flags override it.")] = None,
    host: Annotated[str | None, typer.Option(help="Address to listen on [127.0.0.1].")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on [8787].")] = None,
    upstream_key_env: Annotated[
        str | None, typer.Option(help="Name of the environment variable holding the upstream API key.")
    ] = None,
    preset: Annotated[str | None, typer.Option(help="Backend quirks preset for --upstream (deepseek, ollama, anthropic, ...).")] = None,
    model: Annotated[str | None, typer.Option(help="Send this model name to the --upstream instead of the client's.")] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(help="Name of the environment variable holding the client API keys (comma-separated)."),
    ] = None,
    admin_key_env: Annotated[
        str | None,
        typer.Option(help="Name of the environment variable holding the admin API's key(s) (/admin/keys)."),
    ] = None,
    insecure_no_auth: Annotated[
        bool, typer.Option("--insecure-no-auth", help="Allow listening on a non-loopback address without client keys.")
    ] = False,
    max_body_bytes: Annotated[int | None, typer.Option(help="Largest request body accepted (413 above) [32 MiB].")] = None,
    upstream_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds to wait for the upstream's first byte (504), or between reads; with the time to move the bodies "
            "at 1 MiB/s, also for an answer's head, and a whole answer's body, to come whole [300]."
        ),
    ] = None,
    upstream_event_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds a stream may send only keep-alives (SSE comments), no event, before it fails; a whole answer "
            "to a streamed request is one event [1800]."
        ),
    ] = None,
    upstream_retries: Annotated[
        int | None, typer.Option(help="Attempts for a failed connect or a 5xx before anything streamed [3].")
    ] = None,
    shutdown_grace: Annotated[
        float | None, typer.Option(help="On SIGTERM, seconds running streams get to finish before they are failed [30].")
    ] = None,
    ws_max_message_bytes: Annotated[
        int | None, typer.Option(help="Largest WebSocket message accepted; a larger one closes the connection with 1009 [--max-body-bytes].")
    ] = None,
    ws_max_lifetime: Annotated[
        float | None, typer.Option(help="Seconds a WebSocket connection lasts before it is closed [3600].")
    ] = None,
    ws_ping_interval: Annotated[
        float | None, typer.Option(help="Seconds between pings on an open WebSocket; 0 sends none [20].")
    ] = None,
    ws_ping_timeout: Annotated[
        float | None, typer.Option(help="Seconds a WebSocket client gets to answer a ping before it is dropped [20].")
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
    store_max_bytes: Annotated[
        int | None, typer.Option(help="Most bytes of stored responses kept, least recently used out first [1 GiB].")
    ] = None,
    capture: Annotated[
        Path | None, typer.Option(help="Write each exchange (all four sides, redacted) as JSON lines into DIR.")
    ] = None,
    capture_max_bytes: Annotated[int | None, typer.Option(help="Rotate capture files at this size [64 MiB].")] = None,
    inspector: Annotated[
        bool | None, typer.Option("--inspector/--no-inspector", help="Serve the web inspector at /ui; it keeps recent traffic in memory [off].")
    ] = None,
    history_cache_bytes: Annotated[
        int | None,
        typer.Option(
            help="Memory for the histories of recent conversations, so that each turn only parses and translates "
            "what is new (0: none) [128 MiB]; as much again for the stored ones continued by previous_response_id."
        ),
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
    """Serve the Responses API in front of Chat Completions, Responses or other backends."""
    import uvicorn
    from pydantic import ValidationError

    from toolwire.config import ConfigError, GatewayConfig, load_config
    from toolwire.server._capacity import capacity, raise_open_files_limit
    from toolwire.server._factory import MODEL_OVERRIDE_ENV
    from toolwire.server._settings import CONFIG_ENV
    from toolwire.server._workers import configure_logging, reuse_port_supported, run_workers

    from ._checks import serve_problems
    from ._summary import serving_lines

    try:
        file_config = load_config(config) if config is not None else GatewayConfig()
    except ConfigError as exc:
        _fail(str(exc))
    overrides = {
        "host": host,
        "port": port,
        "api_key_env": api_key_env,
        "admin_key_env": admin_key_env,
        "max_body_bytes": max_body_bytes,
        "upstream_timeout": upstream_timeout,
        "upstream_event_timeout": upstream_event_timeout,
        "upstream_retries": upstream_retries,
        "shutdown_grace": shutdown_grace,
        "ws_max_message_bytes": ws_max_message_bytes,
        "ws_max_lifetime": ws_max_lifetime,
        "ws_ping_interval": ws_ping_interval,
        "ws_ping_timeout": ws_ping_timeout,
        "workers": workers,
        "store": store,
        "store_ttl_seconds": store_ttl,
        "store_max_entries": store_max_entries,
        "store_max_bytes": store_max_bytes,
        "capture_dir": str(capture) if capture is not None else None,
        "capture_max_bytes": capture_max_bytes,
        "inspector": inspector,
        "history_cache_bytes": history_cache_bytes,
        "insecure_no_auth": True if insecure_no_auth else None,
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
    }
    try:
        settings = with_flags(
            file_config, overrides, upstream=upstream, upstream_key_env=upstream_key_env, preset=preset
        )
    except ValidationError as exc:
        _fail("; ".join(map(_validation_words, exc.errors())))
    except ValueError as exc:
        _fail(str(exc))
    problems = serve_problems(
        settings, os.environ, store_has_keys=lambda: _store_has_keys(settings.server.store)
    )
    if problems:
        for problem in problems:
            typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)
    server = settings.server
    trouble, upstream_troubles = _troubles(settings)
    if trouble is not None and server.store.lower().startswith("sqlite:"):
        _fail(
            f"the store cannot be used: {trouble} Give a file toolwire can create and write "
            "(--store sqlite:///path/to/toolwire.sqlite3), or --store memory:// (kept by this process only)."
        )
    open_files = raise_open_files_limit()
    try:
        caps = capacity(server.max_connections, server.max_streams, open_files)
    except ValueError as exc:
        _fail(str(exc))
    os.environ[CONFIG_ENV] = settings.model_dump_json()
    os.environ[MODEL_OVERRIDE_ENV] = model or ""
    configure_logging(log_level.value)
    log = logging.getLogger("toolwire.server")
    log.info(
        "per process: at most %d client connections and %d streams (open files limit %d)",
        caps.max_connections, caps.max_streams, open_files,
    )
    for line in serving_lines(settings, model_override=model):
        log.info(line)
    if trouble is not None:
        log.warning(
            "the store cannot be reached now: %s Until it can, the requests that need it are answered 503 (each "
            "one whose client key is looked up there, each one that keeps or continues a response), and so is "
            "/readyz.", trouble,
        )
    for line in _upstream_warnings(settings, upstream_troubles):
        log.warning(line)
    uvicorn_config: dict[str, Any] = {
        "app": "toolwire.server._factory:app_from_env",
        "factory": True,
        "host": server.host,
        "port": server.port,
        "log_level": log_level.value,
        "access_log": False,
        "loop": "uvloop" if sys.platform != "win32" else "asyncio",
        "timeout_keep_alive": server.keep_alive_timeout,  # a float works: it goes to call_later
        "timeout_graceful_shutdown": server.shutdown_grace,  # a float works: it goes to asyncio.wait_for
        **uvicorn_protocols(server),
    }
    if server.workers > 1 and reuse_port_supported():
        raise typer.Exit(run_workers(uvicorn_config, server.workers, log_level.value))
    uvicorn.run(**uvicorn_config, workers=server.workers)


def uvicorn_protocols(server: ServerConfig) -> dict[str, Any]:
    """uvicorn's protocol settings: httptools for HTTP/1.1 with every client read bounded
    (``toolwire.server._connections``) and the sans-I/O ``websockets`` protocol for
    WebSocket, finishing responses on shutdown (``toolwire.server._uvicorn``), with the
    WebSocket bounds.

    Per-message deflate is off: the events are small and the clients local or near, so
    compressing every message would cost CPU (and a zlib context per connection) for
    little; SSE is not compressed either.
    """
    return {
        "http": "toolwire.server._connections:BoundedHttpToolsProtocol",
        "ws": "toolwire.server._uvicorn:DrainingWebSocketProtocol",
        "ws_max_size": server.ws_message_limit,
        "ws_ping_interval": server.ws_ping_interval or None,
        "ws_ping_timeout": server.ws_ping_timeout,
        "ws_per_message_deflate": False,
    }


def with_flags(
    config: GatewayConfig,
    overrides: dict[str, Any],
    *,
    upstream: str | None = None,
    upstream_key_env: str | None = None,
    preset: str | None = None,
) -> GatewayConfig:
    """``config`` with the ``[server]`` settings the flags set (None: not set) laid over it,
    and ``--upstream`` as its default upstream. Raises ``ValidationError`` or ``ValueError``."""
    from toolwire.config import GatewayConfig, ServerConfig, upstream_from_flag

    server = ServerConfig.model_validate(
        {**config.server.model_dump(), **{key: value for key, value in overrides.items() if value is not None}}
    )
    upstreams = list(config.upstreams)
    if upstream is not None:
        flagged = upstream_from_flag(upstream, api_key_env=upstream_key_env, preset=preset)
        upstreams = [u.model_copy(update={"default": False}) for u in upstreams if u.name != flagged.name]
        upstreams.append(flagged)
    return GatewayConfig(server=server, upstreams=upstreams, models=config.models)


def _store_has_keys(store: str) -> bool:
    """Whether the store ``toolwire serve`` will use holds client keys (it then needs them)."""
    if store == "none":
        return False
    import asyncio

    from toolwire.errors import ToolwireError

    try:
        return asyncio.run(_asked(store, lambda keys, responses: keys.has_keys()))
    except ToolwireError as exc:
        _fail(f"cannot tell whether the store holds client keys: {exc.message}")


def _troubles(settings: GatewayConfig) -> tuple[str | None, dict[str, UpstreamError | str]]:
    """What cannot answer now, asked once before serving, as ``/readyz`` asks it: why the
    store cannot (None: it can, or there is none), and what may keep each upstream from
    serving (``ModelRouter.troubles``), by name. Asked together: neither waits for the other."""
    import asyncio

    async def both() -> tuple[str | None, dict[str, UpstreamError | str]]:
        return await asyncio.gather(_store_trouble(settings.server.store), _upstream_troubles(settings))

    return asyncio.run(both())


async def _store_trouble(store: str) -> str | None:
    """Why the store cannot answer now (None: it can, or there is none): whether it holds
    client keys, and how many bytes of responses. The first use of a SQLite file creates it."""
    if store == "none":
        return None
    from toolwire.errors import ToolwireError

    async def both(keys: KeyStore, responses: ResponseStore) -> None:
        await keys.has_keys()
        await responses.stored_bytes()

    try:
        await _asked(store, both)
    except ToolwireError as exc:
        return exc.message
    return None


async def _upstream_troubles(settings: GatewayConfig) -> dict[str, UpstreamError | str]:
    from toolwire.server import build_router

    router = build_router(settings)  # (without --model: the name it sends never reaches a check)
    try:
        return await router.troubles()
    finally:
        await router.aclose()


def _upstream_warnings(settings: GatewayConfig, troubles: dict[str, UpstreamError | str]) -> list[str]:
    """A warning of each upstream's trouble, with the gateway's secrets taken out: an
    upstream may echo the key it refuses."""
    from toolwire.errors import UpstreamError
    from toolwire.server.observe import Redactor, known_secrets

    redact = Redactor(known_secrets(settings, (), os.environ)).text
    warnings = []
    for name, trouble in troubles.items():
        if isinstance(trouble, UpstreamError):
            warnings.append(
                f"upstream '{name}' does not answer now: {redact(trouble.message)} Until it does, the requests sent "
                "to it are answered 502, and /readyz 503."
            )
        else:
            warnings.append(f"upstream '{name}' answers, but {redact(trouble)}")
    return warnings


async def _asked(store: str, question: Callable[[KeyStore, ResponseStore], Awaitable[T]]) -> T:
    """``question`` put to the key store and the response store ``store`` names, opened
    for it and closed after (``ToolwireError``: they could not answer). Opening does no
    I/O: a store the question leaves alone is not reached."""
    from toolwire.keys import open_key_store
    from toolwire.store import open_store

    keys, responses = open_key_store(store), open_store(store)
    try:
        return await question(keys, responses)
    finally:
        await keys.aclose()
        await responses.aclose()


def _validation_words(error: Any) -> str:
    """One of pydantic's errors as the user reads it: where, when it is somewhere, then what."""
    from toolwire.config import config_key, validator_message

    where = config_key(error["loc"])
    message = validator_message(error)
    return f"{where}: {message}" if where else message


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


