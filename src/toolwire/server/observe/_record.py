"""An ``Exchange`` written down: the summary (a log line, a row of the inspector) and the
full record with its four sides (a capture line, the inspector's detail).

The summary's keys are the log line's format, documented on ``summarize``. The full
record, one JSON object, is ``summarize``'s keys plus:

``time``
    when the request arrived, ISO 8601 UTC.
``usage``
    the usage object of the response, as sent to the client.
``client_request``
    the client's Responses request as it was sent (a string if it was not JSON).
``upstream_request``
    the Chat Completions request sent upstream (null if the request failed before).
``upstream_chunks``
    what the upstream answered: its stream's chunks in order, or one completion.
``events``
    the Responses stream events sent back (streaming requests).
``response``
    the Response object sent back (requests that did not stream).
``traffic_omitted``
    present only when the four sides were left out (too large to keep, not redactable,
    still in progress), saying why; the record then has no traffic keys.

Records are serialized with orjson in one go; the client's body is embedded as it came
(``orjson.Fragment``), not decoded again.
"""

from __future__ import annotations

import datetime
from typing import Any

import orjson

from .._exchange import Exchange
from ._redact import Redactor


def summarize(exchange: Exchange, redactor: Redactor | None = None) -> dict[str, Any]:
    """The exchange in one flat JSON object, without its traffic. Keys, always present:

    ``request_id`` (the response id), ``model`` (as the client asked), ``upstream`` (the
    configured backend's name), ``upstream_model``, ``stream``, ``status`` (HTTP),
    ``outcome`` (completed | incomplete | failed | error | disconnected | pending),
    ``latency_ms``, ``ttft_ms`` (to the first upstream chunk), ``input_tokens``,
    ``output_tokens``, ``tool_calls`` (``[{name, namespace, type}]``, type being
    function_call | custom_tool_call | tool_search_call), ``conversions`` (labels such as
    "custom apply_patch restored"). Only when there is one: ``key`` (the client key's
    name, never the key), ``previous_response_id`` (the response the request continued),
    ``error`` and ``error_kind``; ``warnings``. The free-text fields (``error``,
    ``warnings``) go through ``redactor``,
    in case an upstream echoed a key.
    """
    usage = exchange.usage or {}
    line: dict[str, Any] = {
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
    if exchange.key_name is not None:
        line["key"] = exchange.key_name
    if exchange.previous_response_id:
        line["previous_response_id"] = exchange.previous_response_id
    if exchange.error:
        line["error"] = redactor.text(exchange.error) if redactor else exchange.error
        line["error_kind"] = exchange.error_kind
    if exchange.warnings:
        line["warnings"] = [redactor.text(w) for w in exchange.warnings] if redactor else exchange.warnings
    return line


def arrival_time(exchange: Exchange) -> str:
    return datetime.datetime.fromtimestamp(exchange.received_at, datetime.UTC).isoformat(timespec="milliseconds")


def summary_with_time(exchange: Exchange, redactor: Redactor | None = None) -> dict[str, Any]:
    """``summarize`` plus ``time`` and ``usage``: the record's fields other than traffic."""
    summary = summarize(exchange, redactor)
    summary["time"] = arrival_time(exchange)
    summary["usage"] = exchange.usage
    return summary


def encode_record(exchange: Exchange) -> bytes:
    """The full record (see the module docstring) as JSON bytes, secrets not yet removed."""
    record = summary_with_time(exchange)
    record["client_request"] = _client_request(exchange)
    record["upstream_request"] = exchange.upstream_request
    record["upstream_chunks"] = exchange.upstream_chunks
    record["events"] = exchange.events
    record["response"] = None if exchange.stream else exchange.response
    return orjson.dumps(record)


class RecordEncoder:
    """Finished exchanges as records (JSON bytes), plain or redacted.

    The capture and the inspector share one encoder, so an exchange both keep is encoded
    once: the last record made of each kind is remembered.
    """

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._last_plain: tuple[str, bytes] | None = None
        self._last_redacted: tuple[str, bytes] | None = None

    def plain(self, exchange: Exchange) -> bytes:
        """``encode_record``, secrets still in: for keeping in memory and redacting when shown."""
        if self._last_plain is None or self._last_plain[0] != exchange.request_id:
            try:
                record = encode_record(exchange)
            except orjson.JSONEncodeError as exc:  # a value orjson cannot write: keep the rest
                record = traffic_omitted(summary_with_time(exchange), self.redactor, f"not encodable: {exc}")
            self._last_plain = (exchange.request_id, record)
        return self._last_plain[1]

    def redacted(self, exchange: Exchange) -> bytes:
        """The record with secrets removed; if that fails, the record without its traffic."""
        if self._last_redacted is None or self._last_redacted[0] != exchange.request_id:
            record = self.redact(self.plain(exchange))
            if record is None:
                record = traffic_omitted(summary_with_time(exchange), self.redactor, "the record could not be redacted")
            self._last_redacted = (exchange.request_id, record)
        return self._last_redacted[1]

    def redact(self, record: bytes) -> bytes | None:
        """A plain record, redacted; None if it cannot be (nesting deeper than orjson allows)."""
        try:
            return self.redactor.redact_json(record)
        except (orjson.JSONDecodeError, orjson.JSONEncodeError):
            return None


def traffic_omitted(summary: dict[str, Any], redactor: Redactor, reason: str) -> bytes:
    """A record of only the summary fields (redacted) and ``traffic_omitted``: ``reason``."""
    return redactor.redact_json(orjson.dumps({**summary, "traffic_omitted": reason}))


def _client_request(exchange: Exchange) -> Any:
    body = exchange.client_request
    if exchange.model is not None:
        return orjson.Fragment(body)  # it parsed as a request, so it is JSON
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace")


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)
