"""What the gateway was told at start-up that is not the backends themselves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from toolwire.config._model import DEFAULT_MAX_BODY_BYTES
from toolwire.store import ResponseStore

CONFIG_ENV = "TOOLWIRE_SERVE_CONFIG"
"""Where ``toolwire serve`` puts the configuration, as JSON, for each worker process."""


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    # POST /v1/responses exchanges in progress at once; None: no cap (StreamLimit).
    max_streams: int | None = None
    client_keys: tuple[bytes, ...] = field(default=(), repr=False)
    # Where responses are kept for previous_response_id and GET /v1/responses/{id};
    # None keeps nothing.
    store: ResponseStore | None = None
    # Serialized JSON in, the same with every configured key replaced: applied to error
    # texts before they reach a client (an upstream may echo a key in its message).
    redact: Callable[[bytes], bytes] = field(default=lambda raw: raw, repr=False)
