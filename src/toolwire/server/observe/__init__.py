"""Seeing what crosses the gateway: logs, metrics, captures, the inspector, and redaction.

``observability(config)`` gives the observers and routes a gateway's configuration asks for.

Always: the log line per request (``LogObserver``) and Prometheus metrics at
``/metrics`` (``MetricsObserver``). With ``server.capture_dir``: every exchange on disk
(``CaptureObserver``). With ``server.inspector`` (off by default): the web inspector at
``/ui`` (``RecentExchanges`` and its routes). The capture and the inspector record
traffic; without them no exchange keeps its chunks and events. In a worker of
``--workers N``, ``/metrics`` and the inspector show every worker's (``_gathered``).

All of them redact with one ``Redactor`` that knows the secrets in play: the upstream
keys (read from the environment, as the backends read them) and the client keys.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import NamedTuple

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from toolwire.config import GatewayConfig
from toolwire.store import ResponseStore

from .._exchange import ExchangeObserver
from .._history import KnownConversations
from .._siblings import Siblings
from ._capture import CaptureObserver
from ._inspector import RecentExchanges, inspector_routes
from ._key_usage import KeyUsageObserver
from ._known_secrets import known_secrets
from ._log import LogObserver
from ._metrics import MetricsObserver
from ._record import RecordEncoder, summarize
from ._redact import REDACTED, Redactor, is_secret_field

__all__ = [
    "REDACTED",
    "CaptureObserver",
    "KeyUsageObserver",
    "LogObserver",
    "MetricsObserver",
    "Observability",
    "RecentExchanges",
    "RecordEncoder",
    "Redactor",
    "is_secret_field",
    "known_secrets",
    "observability",
    "summarize",
]


class Observability(NamedTuple):
    observers: list[ExchangeObserver]
    routes: list[BaseRoute]
    redactor: Redactor


def observability(
    config: GatewayConfig,
    *,
    client_keys: Sequence[bytes] = (),
    admin_keys: Sequence[bytes] = (),
    requires_key: Callable[[], Awaitable[bool]] | None = None,
    environ: Mapping[str, str] | None = None,
    conversations: KnownConversations | None = None,
    store: ResponseStore | None = None,
    siblings: Siblings | None = None,
) -> Observability:
    """What ``config.server`` enables. The static ``client_keys`` and the ``admin_keys``
    guard the inspector's API (keys of the store do not open it: it shows everyone's
    traffic, and ``requires_key`` tells it when the store has keys); the redactor hides
    all of them, and any string shaped like a stored key. ``conversations``: the gateway's
    kept stored conversations, and ``store`` its response store, which ``/metrics`` reports.
    ``siblings``: the other workers of the gateway, whose metrics and exchanges are shown
    beside this worker's."""
    server = config.server
    environ = os.environ if environ is None else environ
    redactor = Redactor(known_secrets(config, (*client_keys, *admin_keys), environ))
    encoder = RecordEncoder(redactor)
    metrics = MetricsObserver(conversations=conversations, store=store, siblings=siblings)
    observers: list[ExchangeObserver] = [LogObserver(redactor), metrics]
    routes: list[BaseRoute] = [metrics.route]
    if server.capture_dir:
        observers.append(
            CaptureObserver(
                server.capture_dir, max_bytes=server.capture_max_bytes, keep=server.capture_keep, encoder=encoder
            )
        )
    if server.inspector:
        recent = RecentExchanges(
            max_exchanges=server.inspector_max_exchanges, max_bytes=server.inspector_max_bytes, encoder=encoder
        )
        observers.append(recent)
        routes.extend(inspector_routes(recent, (*client_keys, *admin_keys), requires_key, siblings=siblings))
    else:
        routes.append(Route("/ui", _inspector_off, methods=["GET"]))
        routes.append(Route("/ui/", _inspector_off, methods=["GET"]))
    return Observability(observers, routes, redactor)


async def _inspector_off(request: Request) -> Response:
    return HTMLResponse(
        "<!doctype html><title>toolwire inspector</title><p>The inspector is off. Start the gateway "
        "with <code>--inspector</code> (or <code>inspector = true</code> under <code>[server]</code>) "
        "to see each exchange here.</p>",
        status_code=404,
    )
