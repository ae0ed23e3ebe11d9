"""The exception tree shared by the whole package, and whose fault each error is.

::

    ToolwireError
    ├── ClientError              the client's request is wrong            -> 4xx
    │   ├── RequestError         malformed or invalid request body         -> 400 (or .status)
    │   └── NotFoundError        an id or model the client named is unknown -> 404
    ├── UpstreamError            the backend failed or broke the protocol  -> 502 / its own status
    │   ├── UpstreamProtocolError  the backend sent bytes we cannot read
    │   └── UpstreamLimitError     the backend sent more than a read limit allows -> 502
    └── InternalError            a bug in toolwire                         -> 500

Every error carries an HTTP status hint and an OpenAI-shaped error body; the
server maps errors to responses in exactly one place (``toolwire.server``).
The tool layer has its own failures (``toolwire.tools``): those are about a
model's tool call, not about HTTP.
"""

from __future__ import annotations

from typing import Any


class ToolwireError(Exception):
    """Base of every error toolwire raises on purpose."""

    status: int = 500
    error_type: str = "server_error"
    retry_after: str | None = None
    """The ``retry-after`` header's value to answer with, if any."""

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code

    def to_body(self) -> dict[str, Any]:
        """The OpenAI-shaped error body: ``{"error": {message, type, param, code}}``."""
        return {
            "error": {
                "message": self.message,
                "type": self.error_type,
                "param": self.param,
                "code": self.code,
            }
        }


class ClientError(ToolwireError):
    """The client sent something wrong; retrying the same request will not help."""

    status = 400
    error_type = "invalid_request_error"


class RequestError(ClientError):
    """A request body that is not valid JSON, not UTF-8, or not a valid Responses request.

    ``param`` names where the problem is, e.g. ``input[3].arguments``.
    """

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = "invalid_request",
        status: int = 400,
    ) -> None:
        super().__init__(message, param=param, code=code)
        self.status = status


class NotFoundError(ClientError):
    """The client named something that does not exist (a model, a stored response)."""

    status = 404
    error_type = "not_found_error"


class UpstreamError(ToolwireError):
    """The backend failed: an error status, unreachable, too slow, or a broken stream.

    ``status`` is the HTTP status to give the client when nothing was streamed yet;
    ``upstream_status`` the status the upstream itself answered with, if it answered;
    ``retry_after`` keeps a 429's ``retry-after`` header.
    """

    error_type = "upstream_error"

    def __init__(
        self,
        message: str,
        *,
        status: int = 502,
        param: str | None = None,
        code: str | None = None,
        error_type: str | None = None,
        retry_after: str | None = None,
        upstream_status: int | None = None,
    ) -> None:
        super().__init__(message, param=param, code=code)
        self.status = status
        self.upstream_status = upstream_status
        if error_type is not None:
            self.error_type = error_type
        self.retry_after = retry_after


class UpstreamProtocolError(UpstreamError):
    """The backend answered with bytes that are not the protocol it claims to speak."""


class UpstreamLimitError(UpstreamError):
    """The backend sent more than the gateway holds for one answer (a line, an event,
    a body); ``limit`` is the setting that bounds it, e.g. ``upstream_max_line_bytes``."""

    def __init__(self, message: str, *, limit: str) -> None:
        super().__init__(message, status=502, code="upstream_response_too_large")
        self.limit = limit


class InternalError(ToolwireError):
    """A bug in toolwire. The client sees a generic message; the log has the cause."""
