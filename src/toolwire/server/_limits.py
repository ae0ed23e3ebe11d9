"""Counting the bounds that tripped, and the per-process cap on ``/v1/responses`` exchanges.

Every bound on a read from a peer (``_connections`` for clients, ``toolwire.upstream``'s
``UpstreamLimits`` for backends, ``read_body`` for the request body) calls
``count_limit`` with the setting's name when it trips. The count is kept per process,
below any app: the connection layer that trips most of them runs in uvicorn, before
any request reaches an app. ``/metrics`` shows it as ``toolwire_limits_tripped_total``
with a ``limit`` label naming the setting (``client_header_timeout``,
``upstream_max_line_bytes``, ...).

``StreamLimit`` wraps the ``/v1/responses`` endpoint: past ``max_streams`` exchanges in
progress at once, from the request's head to its answer's last byte, a request is
answered 503 with ``retry-after`` at once, its body unread.
"""

from __future__ import annotations

import orjson
from prometheus_client import Counter
from starlette.types import ASGIApp, Receive, Scope, Send

from toolwire._memory import return_freed_memory_soon

RETRY_AFTER_SECONDS = 1

LIMITS_TRIPPED = Counter(
    "toolwire_limits_tripped",
    "Reads from clients and upstreams cut short by a bound, by the setting that bounds them.",
    ["limit"],
    registry=None,  # registered in each app's own registry (MetricsObserver)
)
_counts: dict[str, Counter] = {}


def count_limit(limit: str) -> None:
    """One more read cut short by the setting ``limit``; what it held goes back to the
    system once its exchange is over."""
    child = _counts.get(limit)
    if child is None:
        child = _counts[limit] = LIMITS_TRIPPED.labels(limit)
    child.inc()
    return_freed_memory_soon()


def busy_body(message: str) -> bytes:
    """The OpenAI-shaped body of a 503 that asks the client to retry."""
    error = {"message": message, "type": "service_unavailable", "param": None, "code": "gateway_busy"}
    return orjson.dumps({"error": error})


class StreamLimit:
    """At most ``max_streams`` exchanges of ``app`` at once; 503 + ``retry-after`` past it."""

    def __init__(self, app: ASGIApp, max_streams: int) -> None:
        self.app = app
        self.max_streams = max_streams
        self.in_progress = 0
        body = busy_body(
            f"The gateway is serving as many responses as it allows at once ({max_streams}, max_streams); "
            f"retry in {RETRY_AFTER_SECONDS} s."
        )
        self._refusal_start = {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
            ],
        }
        self._refusal_body = {"type": "http.response.body", "body": body}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.in_progress >= self.max_streams:
            count_limit("max_streams")
            await send(self._refusal_start)
            await send(self._refusal_body)
            return
        self.in_progress += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_progress -= 1
