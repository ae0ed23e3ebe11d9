"""The observers every gateway has: one structured log line per request."""

from __future__ import annotations

import logging

import orjson

from ._exchange import Exchange

log = logging.getLogger("toolwire.exchange")


class LogObserver:
    """One JSON log line per finished request. Keys never appear: nothing here reads headers."""

    wants_traffic = False

    def started(self, exchange: Exchange) -> None:
        return None

    def finished(self, exchange: Exchange) -> None:
        usage = exchange.usage or {}
        line = {
            "request_id": exchange.request_id,
            "model": exchange.model,
            "upstream": exchange.upstream,
            "upstream_model": exchange.upstream_model,
            "stream": exchange.stream,
            "status": exchange.status,
            "outcome": exchange.outcome,
            "latency_ms": _ms(exchange.latency),
            "ttft_ms": _ms(exchange.time_to_first_token),
            "input_tokens": usage.get("input_tokens"),
            "output_tokens": usage.get("output_tokens"),
            "tool_calls": [
                {"name": call.name, "namespace": call.namespace, "type": call.type} for call in exchange.tool_calls
            ],
            "conversions": exchange.conversions,
        }
        if exchange.error:
            line["error"] = exchange.error
            line["error_kind"] = exchange.error_kind
        if exchange.warnings:
            line["warnings"] = exchange.warnings
        level = logging.WARNING if exchange.outcome in ("failed", "error") else logging.INFO
        log.log(level, "%s", orjson.dumps(line).decode())


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)
