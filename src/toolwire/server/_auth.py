"""Client authentication: ``Authorization: Bearer <key>`` on every ``/v1/*`` request.

A WebSocket is authenticated by its handshake, like any request: without a valid key
the upgrade is refused with the same 401 (or, where the server cannot send a body with
a refused handshake, a plain refusal: 403).

Keys are compared in constant time, against every configured key, so neither a key's
content nor which key matched leaks through timing. The client's key is checked here
and goes no further: the upstream gets the gateway's own key.
"""

from __future__ import annotations

import hmac
import ipaddress

import orjson

from ._asgi import send_bytes
from .types import ASGIApp, Receive, Scope, Send


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


_UNAUTHORIZED = {
    "error": {
        "message": "Missing or invalid API key: send 'Authorization: Bearer <key>'.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}


class ClientAuth:
    """ASGI middleware that answers 401 to a ``/v1/*`` request without a valid key."""

    def __init__(self, app: ASGIApp, keys: tuple[bytes, ...]) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind in ("http", "websocket") and scope["path"].startswith("/v1/") and not self._authorized(scope):
            body = orjson.dumps(_UNAUTHORIZED)
            if kind == "http":
                await send_bytes(send, 401, body, b"application/json", [(b"www-authenticate", b"Bearer")])
            elif "websocket.http.response" in scope.get("extensions", {}):
                await send_bytes(send, 401, body, b"application/json", [(b"www-authenticate", b"Bearer")],
                                 prefix="websocket.")
            else:
                await send({"type": "websocket.close", "code": 1008})
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        presented = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    presented = token.strip()
                break
        matched = False
        for key in self.keys:
            matched |= hmac.compare_digest(presented, key)
        return matched and bool(presented)
