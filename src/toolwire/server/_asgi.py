"""Small ASGI helpers: typed aliases, sending a whole response, reading a bounded body."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from toolwire.errors import RequestError

from ._limits import count_limit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class ClientDisconnected(Exception):
    """The client went away before the request body was read."""


async def send_bytes(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    raw_headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    raw_headers.extend(headers or ())
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The request body, refusing (413) one larger than ``limit`` without reading it whole."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                raise RequestError("Invalid Content-Length header.", param="content-length") from None
            if declared > limit:
                raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _too_large(limit: int) -> RequestError:
    count_limit("max_body_bytes")
    return RequestError(
        f"The request body is larger than the gateway's limit of {limit} bytes.",
        code="request_too_large",
        status=413,
    )
