"""What the gateway was told at start-up that is not the backends themselves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from toolwire.codex_config import CodexModel
from toolwire.compaction import CompactionKeySource, ProcessCompactionKey
from toolwire.config import DEFAULT_MAX_BODY_BYTES
from toolwire.keys import KeyGate
from toolwire.store import ResponseStore

from ._history import KnownConversations

CONFIG_ENV = "TOOLWIRE_SERVE_CONFIG"
"""Where ``toolwire serve`` puts the configuration, as JSON, for each worker process."""


@dataclass(frozen=True, slots=True)
class WebSocketSettings:
    """Responses over WebSocket: its bounds, and the one the server's protocol enforces."""

    max_message_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Told to clients in the handshake; uvicorn closes with 1009 above it (``ws_max_size``)."""
    max_lifetime: float = 3600.0
    """Seconds a connection lasts; the Open Responses limit is 60 minutes."""


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    # Exchanges in progress at once, over HTTP or WebSocket; None: no cap (StreamSlots).
    max_streams: int | None = None
    # Who may call, with which models and limits (client keys, static and stored); None
    # lets everyone in.
    gate: KeyGate | None = field(default=None, repr=False)
    # Where responses are kept for previous_response_id and GET /v1/responses/{id};
    # None keeps nothing.
    store: ResponseStore | None = None
    # The parsed conversations of the responses stored lately, so that a continuation by
    # previous_response_id reads and parses only what is new (bounded: --history-cache-bytes).
    conversations: KnownConversations = field(default_factory=KnownConversations, repr=False)
    # Serialized JSON in, the same with every configured key replaced: applied to error
    # texts before they reach a client (an upstream may echo a key in its message).
    redact: Callable[[bytes], bytes] = field(default=lambda raw: raw, repr=False)
    websocket: WebSocketSettings = WebSocketSettings()
    # The configured models as Codex's model catalog describes them
    # (GET /v1/models?client_version=...).
    codex_models: tuple[CodexModel, ...] = ()
    # The key compactions are sealed with: beside the store (compaction_key_for), so that
    # gateways sharing a store open each other's; by default this process's own.
    compaction_key: CompactionKeySource = field(default_factory=ProcessCompactionKey, repr=False)
