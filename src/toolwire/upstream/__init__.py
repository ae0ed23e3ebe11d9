"""Backends behind one seam, ``Backend``, and the registry of their kinds.

Every configured upstream is a ``Backend`` built by its ``BackendKind`` (``kinds``:
``chat``, ``responses``, ``anthropic``, ``mock``): it translates a request for its wire
(``UpstreamCall``, with the ``AnswerTranslator`` that translates the answer back) and
sends it. The HTTP kinds share one client, ``HttpEndpoint`` (pooled connections,
retries, the upstream's errors kept, the proxy the environment names: ``proxy_for``).
Streams arrive as ``StreamBatches``: parsed objects, one list per network read (a Chat
stream's plain text chunks read from their bytes, as ``PlainChunks``).
``UpstreamLimits`` bounds what one answer may make the gateway hold. A backend that
compacts conversations by itself offers ``NativeCompaction``.
"""

from ._base import Backend, ListBatches, NativeCompaction, StreamBatches, UpstreamCall
from ._failures import unusable_url, without_credentials
from ._http import (
    DEFAULT_UPSTREAM_CONNECT_TIMEOUT,
    DEFAULT_UPSTREAM_TIMEOUT,
    HttpEndpoint,
    RetryPolicy,
)
from ._kind import BackendKind, BackendSetup
from ._limits import (
    DEFAULT_UPSTREAM_MAX_BODY_BYTES,
    DEFAULT_UPSTREAM_MAX_EVENT_BYTES,
    DEFAULT_UPSTREAM_MAX_LINE_BYTES,
    DEFAULT_UPSTREAM_MAX_STREAM_BYTES,
    UpstreamLimits,
)
from ._proxy import Proxy, UnusableProxy, proxy_for
from ._sse_batches import DEFAULT_UPSTREAM_EVENT_TIMEOUT
from .kinds import KINDS, backend_kind

__all__ = [
    "DEFAULT_UPSTREAM_CONNECT_TIMEOUT",
    "DEFAULT_UPSTREAM_EVENT_TIMEOUT",
    "DEFAULT_UPSTREAM_MAX_BODY_BYTES",
    "DEFAULT_UPSTREAM_MAX_EVENT_BYTES",
    "DEFAULT_UPSTREAM_MAX_LINE_BYTES",
    "DEFAULT_UPSTREAM_MAX_STREAM_BYTES",
    "DEFAULT_UPSTREAM_TIMEOUT",
    "KINDS",
    "Backend",
    "BackendKind",
    "BackendSetup",
    "HttpEndpoint",
    "ListBatches",
    "NativeCompaction",
    "Proxy",
    "RetryPolicy",
    "StreamBatches",
    "UnusableProxy",
    "UpstreamCall",
    "UpstreamLimits",
    "backend_kind",
    "proxy_for",
    "unusable_url",
    "without_credentials",
]
