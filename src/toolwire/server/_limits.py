"""Counting the bounds that tripped, and the per-process cap on exchanges in progress.

Every bound on a read from a peer (``_connections`` for clients, ``toolwire.upstream``'s
``UpstreamLimits`` for backends, ``read_body`` for the request body) calls
``count_limit`` with the setting's name when it trips. The count is kept per process,
below any app: the connection layer that trips most of them runs in uvicorn, before
any request reaches an app. ``/metrics`` shows it as ``toolwire_limits_tripped_total``
with a ``limit`` label naming the setting (``client_header_timeout``,
``upstream_max_line_bytes``, ...).

``StreamSlots`` is the cap on exchanges in progress (``max_streams``): the pipeline takes
a slot for every exchange it serves, whatever transport carries it (an HTTP request
from its head, before its body is read, to its answer's last byte; one
``response.create`` on a WebSocket), and past the cap the transport is handed
``refusal`` (503 with ``retry-after``) instead.
"""

from __future__ import annotations

from typing import Any

import orjson
from prometheus_client import Counter

from toolwire._memory import return_freed_memory_soon

from ._transport import ErrorAnswer

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


def busy_error(message: str) -> dict[str, Any]:
    """The OpenAI-shaped body of a 503 that asks the client to retry."""
    return {"error": {"message": message, "type": "service_unavailable", "param": None, "code": "gateway_busy"}}


def busy_body(message: str) -> bytes:
    return orjson.dumps(busy_error(message))


class StreamSlots:
    """At most ``max_streams`` exchanges in progress at once (None: no cap)."""

    def __init__(self, max_streams: int | None) -> None:
        self.max_streams = max_streams
        self.in_progress = 0
        message = (
            f"The gateway is serving as many responses as it allows at once ({max_streams}, max_streams); "
            f"retry in {RETRY_AFTER_SECONDS} s."
        )
        self.refusal = ErrorAnswer(503, busy_error(message), retry_after=str(RETRY_AFTER_SECONDS))
        """What a client is told when there is no slot for its exchange."""

    def take(self) -> StreamSlot | None:
        """A slot for one exchange, given back when the slot's ``with`` block ends; None
        (and the trip counted) past the cap."""
        if self.max_streams is not None and self.in_progress >= self.max_streams:
            count_limit("max_streams")
            return None
        self.in_progress += 1
        return StreamSlot(self)


class StreamSlot:
    """One exchange's place under ``max_streams``; given back once, however often released."""

    __slots__ = ("_slots",)

    def __init__(self, slots: StreamSlots) -> None:
        self._slots: StreamSlots | None = slots

    def release(self) -> None:
        if self._slots is not None:
            self._slots.in_progress -= 1
            self._slots = None

    def __enter__(self) -> StreamSlot:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
