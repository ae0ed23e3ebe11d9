"""Small ASGI helpers: sending a whole response, reading a bounded body (decoded when compressed)."""

from __future__ import annotations

from toolwire.errors import RequestError

from ._content_coding import BodyDecoder, body_decoder
from ._limits import count_limit
from .types import Receive, Scope, Send


class ClientDisconnected(Exception):
    """The client went away before the request body was read."""


async def send_bytes(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    prefix: str = "",
) -> None:
    """A whole response; ``prefix="websocket."`` sends it as a refused WebSocket handshake."""
    raw_headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    raw_headers.extend(headers or ())
    await send({"type": prefix + "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": prefix + "http.response.body", "body": body})


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The request body, refusing (413) one larger than ``limit`` without reading it whole.

    A body sent with ``Content-Encoding: gzip`` or ``zstd`` is decoded as it arrives; the
    limit applies to it both as sent and decoded (``_content_coding``).
    """
    decoder: BodyDecoder | None = None
    for name, value in scope["headers"]:
        if name == b"content-encoding":
            decoder = body_decoder(value, limit)
        elif name == b"content-length":
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
        chunks.append(chunk if decoder is None else decoder.decode(chunk))
        if not message.get("more_body", False):
            if decoder is not None:
                decoder.flush()
            return b"".join(chunks)


def _too_large(limit: int) -> RequestError:
    count_limit("max_body_bytes")
    return RequestError(
        f"The request body is larger than the gateway's limit of {limit} bytes.",
        code="request_too_large",
        status=413,
    )
