"""Map any failure to an HTTP error response: the one place where errors meet statuses."""

from __future__ import annotations

import logging

import orjson

from toolwire.errors import InternalError, ToolwireError
from toolwire.tools import ConfigurationError

from ._asgi import send_bytes
from .types import Send

log = logging.getLogger("toolwire.server")


def as_toolwire_error(exc: BaseException) -> ToolwireError:
    """Any exception as a ToolwireError: ours as they are, a bug as an opaque 500."""
    if isinstance(exc, ToolwireError):
        return exc
    if isinstance(exc, ConfigurationError):
        from toolwire.errors import RequestError

        return RequestError(exc.message, param="tools", code="invalid_tools")
    log.error("internal error", exc_info=exc)
    return InternalError("The gateway failed to handle this request (an internal error; see its log).")


async def send_error(send: Send, exc: BaseException) -> None:
    """Send ``exc`` as an OpenAI-shaped JSON error with the matching status."""
    error = as_toolwire_error(exc)
    headers: list[tuple[bytes, bytes]] = []
    if error.retry_after:
        headers.append((b"retry-after", error.retry_after.encode("latin-1", "replace")))
    await send_bytes(send, error.status, orjson.dumps(error.to_body()), b"application/json", headers)
