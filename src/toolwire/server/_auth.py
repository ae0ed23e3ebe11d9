"""Client authentication: ``Authorization: Bearer <key>`` on every ``/v1/*`` request.

``ClientAuth`` asks the ``KeyGate`` who the caller is (``gate.authenticate``): a key of
the store, a static key (``--api-key-env``), or nobody on a gateway without keys; it
answers 401 for a missing, unknown, revoked or expired key and 503 when the key store
cannot be reached, and otherwise leaves the caller in the scope (``principal_of``) for
the endpoints: admission, stored responses' owners and metrics read it there. The
client's key is checked here and goes no further: the upstream gets the gateway's own.

A WebSocket is authenticated by its handshake, like any request: without a valid key
the upgrade is refused with the same error (or, where the server cannot send a body with
a refused handshake, a plain refusal: 403).
"""

from __future__ import annotations

import ipaddress

import orjson

from toolwire.keys import InvalidKey, KeyGate, Principal

from ._asgi import send_bytes
from ._errors import as_toolwire_error
from .types import ASGIApp, Receive, Scope, Send

PRINCIPAL_SCOPE_KEY = "toolwire.principal"


def parse_client_keys(raw: str) -> tuple[bytes, ...]:
    """``"k1, k2"`` -> the non-empty keys, as bytes."""
    return tuple(key.strip().encode() for key in raw.split(",") if key.strip())


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def principal_of(scope: Scope) -> Principal | None:
    """Who sent the request (None: a gateway without keys, or a path ``ClientAuth`` skips)."""
    principal: Principal | None = scope.get(PRINCIPAL_SCOPE_KEY)
    return principal


def authorization_of(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            authorization: bytes = value
            return authorization
    return None


class ClientAuth:
    """ASGI middleware that lets a ``/v1/*`` request through only with a key ``gate`` accepts."""

    def __init__(self, app: ASGIApp, gate: KeyGate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind in ("http", "websocket") and scope["path"].startswith("/v1/"):
            try:
                scope[PRINCIPAL_SCOPE_KEY] = await self.gate.authenticate(authorization_of(scope))
            except Exception as exc:
                error = as_toolwire_error(exc)
                headers = [(b"www-authenticate", b"Bearer")] if isinstance(exc, InvalidKey) else []
                body = orjson.dumps(error.to_body())
                if kind == "http":
                    await send_bytes(send, error.status, body, b"application/json", headers)
                elif "websocket.http.response" in scope.get("extensions", {}):
                    await send_bytes(send, error.status, body, b"application/json", headers, prefix="websocket.")
                else:
                    await send({"type": "websocket.close", "code": 1008})
                return
        await self.app(scope, receive, send)
