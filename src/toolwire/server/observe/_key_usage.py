"""``KeyUsageObserver``: each finished exchange of a stored client key, charged to it.

What the exchange used is the upstream's reported usage as the client got it (the
Response's ``usage``), streaming or not; a stream the client cut counts the usage the
upstream had reported until then. Charging gives the key's concurrency lease back and
counts its tokens (``KeyGate.record_soon``), off the request's path.
"""

from __future__ import annotations

from toolwire.keys import KeyGate, TokenUsage

from .._exchange import Exchange


class KeyUsageObserver:
    wants_traffic = False

    def __init__(self, gate: KeyGate) -> None:
        self.gate = gate

    def started(self, exchange: Exchange) -> None:
        return None

    def finished(self, exchange: Exchange) -> None:
        if exchange.lease is not None:
            self.gate.record_soon(exchange.lease, TokenUsage.from_response_usage(exchange.usage))
