"""A gateway app with the observability a configuration asks for, for in-process tests.

``observed_client`` builds the app exactly as the server does (``observability(config)``
then ``create_app``) in front of the scripted Chat upstream, and drives it with
Starlette's test client (lifespan included). ``exchange`` makes a finished ``Exchange``
by hand, for observers tested without any server.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from starlette.testclient import TestClient

from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV
from toolwire.config import GatewayConfig, ServerConfig, UpstreamConfig
from toolwire.keys import KeyGate
from toolwire.server import GatewaySettings, build_router, create_app
from toolwire.server._exchange import Exchange, ToolCallSummary
from toolwire.server.observe import Observability, observability

CUSTOM_PATCH_TOOL = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files with a patch.",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: /(.|\\n)+/"},
}
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"


def observed_config(upstream_url: str, **server: Any) -> GatewayConfig:
    """One default upstream, ``local``, whose key is in ``UPSTREAM_KEY_ENV``; the inspector on
    unless ``inspector=False`` (it is off by default in ``ServerConfig``)."""
    server.setdefault("inspector", True)
    upstream = UpstreamConfig(name="local", base_url=upstream_url, api_key_env=UPSTREAM_KEY_ENV, default=True)
    return GatewayConfig(server=ServerConfig(**server), upstreams=[upstream])


def observed_app(config: GatewayConfig, client_keys: Sequence[bytes] = ()) -> tuple[Any, Observability]:
    observed = observability(config, client_keys=client_keys, environ={UPSTREAM_KEY_ENV: UPSTREAM_KEY})
    settings = GatewaySettings(gate=KeyGate(static_keys=tuple(client_keys)) if client_keys else None)
    app = create_app(build_router(config), settings, observed.observers, routes=observed.routes)
    return app, observed


@contextmanager
def observed_client(
    config: GatewayConfig, *, client_keys: Sequence[bytes] = (), client_host: str = "127.0.0.1"
) -> Iterator[tuple[TestClient, Observability]]:
    app, observed = observed_app(config, client_keys)
    with TestClient(app, client=(client_host, 50000)) as test_client:
        yield test_client, observed


def exchange(request_id: str = "resp_1", **fields: Any) -> Exchange:
    """A finished exchange; ``fields`` set attributes, ``outcome``/``status``/``error*`` go to ``finish``."""
    finish = {key: fields.pop(key) for key in ("status", "error", "error_kind", "response") if key in fields}
    outcome = fields.pop("outcome", "completed")
    body = fields.pop("client_request", b'{"model":"m","input":"hi"}')
    tool_calls = fields.pop("tool_calls", [])
    made = Exchange(request_id, body, record_traffic=True)
    made.model = "m"
    made.upstream = "local"
    for key, value in fields.items():
        setattr(made, key, value)
    made.finish(outcome, **finish)
    if tool_calls:
        made.tool_calls = [ToolCallSummary(*call) for call in tool_calls]
    return made


def same_size(request_id: str) -> Exchange:
    """An exchange whose record is as long as every other one's (the same times)."""
    made = exchange(request_id)
    made.received_at, made.started_at, made.finished_at = 1_700_000_000.0, 10.0, 10.5
    return made
