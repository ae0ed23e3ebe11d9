"""The configuration as typed values (what ``toolwire.toml`` may contain)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from toolwire.translate import ToolCallText
from toolwire.upstream import (
    DEFAULT_UPSTREAM_EVENT_TIMEOUT,
    DEFAULT_UPSTREAM_MAX_BODY_BYTES,
    DEFAULT_UPSTREAM_MAX_EVENT_BYTES,
    DEFAULT_UPSTREAM_MAX_LINE_BYTES,
    DEFAULT_UPSTREAM_MAX_STREAM_BYTES,
    DEFAULT_UPSTREAM_TIMEOUT,
    KINDS,
    backend_kind,
    unusable_url,
)

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
DEFAULT_CAPTURE_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_CAPTURE_KEEP = 10
DEFAULT_INSPECTOR_MAX_EXCHANGES = 200
DEFAULT_INSPECTOR_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_HISTORY_CACHE_BYTES = 128 * 1024 * 1024


class _Strict(BaseModel):
    # A misspelt key is an error, not a silently ignored setting.
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    api_key_env: str | None = None
    # The admin API (/admin/keys): the variable holding its key(s), comma-separated.
    admin_key_env: str | None = None
    insecure_no_auth: bool = False
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, gt=0)
    upstream_timeout: float = Field(default=DEFAULT_UPSTREAM_TIMEOUT, gt=0)
    upstream_event_timeout: float = Field(default=DEFAULT_UPSTREAM_EVENT_TIMEOUT, gt=0)
    upstream_retries: int = Field(default=3, ge=1, le=10)
    shutdown_grace: float = Field(default=30.0, ge=0)
    # Responses over WebSocket (GET /v1/responses with Upgrade: websocket): a larger
    # message closes the connection with 1009 (None: max_body_bytes); a connection is
    # closed after ws_max_lifetime seconds (the Open Responses limit: 60 minutes); it is
    # pinged every ws_ping_interval seconds (0: never) and dropped when the pong does not
    # come within ws_ping_timeout.
    ws_max_message_bytes: int | None = Field(default=None, gt=0)
    ws_max_lifetime: float = Field(default=3600.0, gt=0)
    ws_ping_interval: float = Field(default=20.0, ge=0)
    ws_ping_timeout: float = Field(default=20.0, gt=0)
    # Stored responses (previous_response_id, GET /v1/responses/{id}): sqlite:///path,
    # sqlite:// (under the user's state directory), memory://, redis://host:port/db, or
    # "none" to keep nothing.
    store: str = "sqlite://"
    store_ttl_seconds: float | None = Field(default=30 * 24 * 3600, gt=0)
    store_max_entries: int | None = Field(default=10_000, gt=0)
    store_max_bytes: int | None = Field(default=1 << 30, gt=0)  # of records in all
    workers: int = Field(default=1, ge=1)
    # Observability (toolwire.server.observe): /metrics is always served.
    capture_dir: str | None = None  # each exchange as a JSON line, redacted; off when None
    capture_max_bytes: int = Field(default=DEFAULT_CAPTURE_MAX_BYTES, gt=0)  # per file, then rotate
    capture_keep: int = Field(default=DEFAULT_CAPTURE_KEEP, ge=1)  # newest files kept
    # The web inspector at /ui. Off by default: it keeps every request's traffic (prompts
    # included) in memory while it runs, about 150 kB per open Codex stream.
    inspector: bool = False
    inspector_max_exchanges: int = Field(default=DEFAULT_INSPECTOR_MAX_EXCHANGES, ge=1)
    inspector_max_bytes: int = Field(default=DEFAULT_INSPECTOR_MAX_BYTES, gt=0)
    # Bounds on every read from a client (toolwire.server._connections, _limits).
    client_header_timeout: float = Field(default=10.0, gt=0)  # a request's head, from its first byte (408)
    max_header_bytes: int = Field(default=64 * 1024, ge=1024)  # a request's head (431)
    client_body_timeout: float = Field(default=30.0, gt=0)  # the body's first bytes, and slack for the rate (408)
    client_body_min_rate: int = Field(default=8 * 1024, ge=1)  # bytes a second a body must keep up, on average
    client_send_timeout: float = Field(default=60.0, gt=0)  # a client that reads nothing of its answer is dropped
    keep_alive_timeout: float = Field(default=30.0, gt=0)  # an idle keep-alive connection is closed
    # Connections and /v1/responses exchanges per process, past which clients get 503 and
    # retry-after; None: as many as the process's open-files limit allows (ulimit -n).
    max_connections: int | None = Field(default=None, ge=1)
    max_streams: int | None = Field(default=None, ge=1)
    # Bounds on every read from an upstream (toolwire.upstream._limits).
    upstream_max_line_bytes: int = Field(default=DEFAULT_UPSTREAM_MAX_LINE_BYTES, ge=1024)
    upstream_max_event_bytes: int = Field(default=DEFAULT_UPSTREAM_MAX_EVENT_BYTES, ge=1024)
    upstream_max_body_bytes: int = Field(default=DEFAULT_UPSTREAM_MAX_BODY_BYTES, ge=1024)
    upstream_max_stream_bytes: int = Field(default=DEFAULT_UPSTREAM_MAX_STREAM_BYTES, ge=1024)
    # The histories of recent conversations, kept so that a request resending one (Codex
    # sends the whole conversation every turn) is parsed and translated only past it
    # (toolwire.protocol.KNOWN_HISTORIES): at most this many bytes, as estimated (an
    # 800-turn, 1.4 MB Codex session takes about 14 MB); 0 keeps none.
    history_cache_bytes: int = Field(default=DEFAULT_HISTORY_CACHE_BYTES, ge=0)

    @property
    def ws_message_limit(self) -> int:
        """The largest WebSocket message accepted, in bytes."""
        return self.ws_max_message_bytes if self.ws_max_message_bytes is not None else self.max_body_bytes


class UpstreamConfig(_Strict):
    """A backend: its kind (``toolwire.upstream.KINDS``: chat, responses, mock, ...) and address.

    ``kind``, ``preset`` and the settings that only one kind reads are checked against
    the registry of kinds.
    """

    name: str
    kind: str = "chat"
    base_url: str | None = None
    api_key_env: str | None = None
    preset: str = "generic"
    # Requests for models not listed under [[models]] go here, model name unchanged.
    default: bool = False
    # kind = "responses" only: what the backend's own /responses understands beyond V1
    # function tools. What it lacks is downgraded on the way there and restored on the
    # way back (toolwire.translate.ResponsesCapabilities); all false suits any V1 server.
    supports_additional_tools: bool = False
    supports_custom_tools: bool = False
    supports_namespaces: bool = False
    supports_tool_search: bool = False
    supports_hosted_tools: bool = False
    # kind = "responses" only: the backend compacts conversations itself (/responses/compact,
    # compaction_trigger); otherwise the gateway writes the summary with the backend's model.
    supports_compaction: bool = False
    # kind = "chat": tool calls the model wrote into the answer's text (a server without
    # a tool parser) are recovered in these formats: "auto" (every known one), "off", or
    # one family (hermes, qwen3_coder, mistral, deepseek, kimi_k2, glm45).
    tool_call_text: ToolCallText = "auto"

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        backend_kind(kind)
        return kind

    @field_validator("base_url")
    @classmethod
    def _usable_url(cls, url: str | None) -> str | None:
        problem = unusable_url(url) if url else None
        if problem:
            raise ValueError(problem)
        return url

    @field_validator("preset")
    @classmethod
    def _preset_of_its_kind(cls, preset: str, info: ValidationInfo) -> str:
        kind = KINDS.get(info.data.get("kind", ""))
        if kind is not None and preset not in kind.presets:
            raise ValueError(
                f"unknown preset '{preset}' for kind '{kind.name}' (known: {', '.join(sorted(kind.presets))})"
            )
        return preset

    @model_validator(mode="after")
    def _fits_its_kind(self) -> UpstreamConfig:
        kind = backend_kind(self.kind)
        if kind.needs_base_url and not self.base_url:
            raise ValueError(f"upstream '{self.name}' of kind '{self.kind}' needs a base_url")
        for other in KINDS.values():
            if other is kind:
                continue
            foreign = [
                name
                for name in other.settings
                if name not in kind.settings and getattr(self, name) != type(self).model_fields[name].default
            ]
            if foreign:
                raise ValueError(
                    f"upstream '{self.name}': {', '.join(foreign)} can only be set for kind = '{other.name}'"
                )
        return self


class ModelConfig(_Strict):
    """A model clients may ask for, and where it is served."""

    name: str
    upstream: str
    upstream_model: str | None = None
    context_window: int | None = Field(default=None, gt=0)
    reasoning: bool = False
    description: str | None = None


class GatewayConfig(_Strict):
    server: ServerConfig = ServerConfig()
    upstreams: list[UpstreamConfig] = Field(default_factory=list)
    models: list[ModelConfig] = Field(default_factory=list)

    @property
    def default_upstream(self) -> str | None:
        """The name of the upstream that takes the models not listed under ``[[models]]``
        (the first marked ``default``: ``problems`` refuses a second), if any."""
        return next((upstream.name for upstream in self.upstreams if upstream.default), None)

    def problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        """Cross-references that do not hold, each with the location it concerns."""
        found: list[tuple[tuple[str | int, ...], str]] = []
        names: list[str] = []
        for index, upstream in enumerate(self.upstreams):
            if upstream.name in names:
                found.append((("upstreams", index, "name"), f"two upstreams are named '{upstream.name}'"))
            names.append(upstream.name)
        defaults = [i for i, u in enumerate(self.upstreams) if u.default]
        if len(defaults) > 1:
            found.append((("upstreams", defaults[1], "default"), "only one upstream can be the default"))
        seen: set[str] = set()
        for index, model in enumerate(self.models):
            if model.upstream not in names:
                found.append((("models", index, "upstream"), f"unknown upstream '{model.upstream}' (known: {', '.join(names) or 'none'})"))
            if model.name in seen:
                found.append((("models", index, "name"), f"model '{model.name}' is listed twice"))
            seen.add(model.name)
        return found

    def upstream(self, name: str) -> UpstreamConfig:
        return next(u for u in self.upstreams if u.name == name)
