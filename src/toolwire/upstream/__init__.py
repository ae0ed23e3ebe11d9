"""Backends behind two seams: ``ChatBackend`` (Chat Completions) and ``ResponsesBackend``.

``HttpChatBackend`` and ``HttpResponsesBackend`` talk to real servers over HTTP with
pooled connections (``HttpEndpoint``); ``MockChatBackend`` is the built-in scripted
model (``--upstream mock``). Streams arrive as ``StreamBatches``: parsed objects, one
list per network read. ``proxy_for`` reads the proxy an upstream is reached through from
the environment (``HTTPS_PROXY``, ``NO_PROXY``, ...). ``UpstreamLimits`` bounds what
one answer may make the gateway hold.
"""

from ._base import ChatBackend, ListBatches, ResponsesBackend, StreamBatches
from ._chat_http import HttpChatBackend
from ._http import HttpEndpoint, RetryPolicy
from ._limits import UpstreamLimits
from ._mock import MockChatBackend
from ._proxy import Proxy, proxy_for
from ._responses_http import HttpResponsesBackend

__all__ = [
    "ChatBackend",
    "HttpChatBackend",
    "HttpEndpoint",
    "HttpResponsesBackend",
    "ListBatches",
    "MockChatBackend",
    "Proxy",
    "ResponsesBackend",
    "RetryPolicy",
    "StreamBatches",
    "UpstreamLimits",
    "proxy_for",
]
