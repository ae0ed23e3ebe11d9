"""The observer every gateway has: one structured log line per request."""

from __future__ import annotations

import logging

import orjson

from .._exchange import Exchange
from .._log_lines import line_handler_for
from ._record import summarize
from ._redact import Redactor

log = logging.getLogger("toolwire.exchange")


class LogObserver:
    """One JSON line per finished request on the ``toolwire.exchange`` logger.

    The line is ``_record.summarize``'s object: ``request_id``, ``model``, ``upstream``,
    ``upstream_model``, ``stream``, ``status``, ``outcome``, ``latency_ms``, ``ttft_ms``,
    ``input_tokens``, ``output_tokens``, ``tool_calls`` (``[{name, namespace, type}]``),
    ``conversions``, and, when there are any, ``key`` (the client key's name), ``error``,
    ``error_kind`` and ``warnings``.
    For example::

        {"request_id":"resp_9f..","model":"gpt-5.5","upstream":"local","upstream_model":"qwen3",
         "stream":true,"status":200,"outcome":"completed","latency_ms":812.4,"ttft_ms":95.1,
         "input_tokens":1830,"output_tokens":41,"tool_calls":[{"name":"apply_patch",
         "namespace":null,"type":"custom_tool_call"}],"conversions":["custom tool apply_patch
         wrapped as function","custom apply_patch restored"]}

    Failed and errored requests log at WARNING, the rest at INFO. Nothing here reads
    headers or bodies; the free-text fields (``error``, ``warnings``) go through the
    ``redactor`` in case an upstream echoed a key. When the process logs with toolwire's
    own handler alone (``toolwire serve``), the line goes to it without a log record
    (``line_handler_for``): the same line, written the same way.
    """

    wants_traffic = False

    def __init__(self, redactor: Redactor | None = None) -> None:
        self.redactor = redactor if redactor is not None else Redactor()

    def started(self, exchange: Exchange) -> None:
        return None

    def finished(self, exchange: Exchange) -> None:
        line = summarize(exchange, self.redactor)
        level = logging.WARNING if exchange.outcome in ("failed", "error") else logging.INFO
        text = orjson.dumps(line).decode()  # logged with no arguments: the line is not formatted again
        handler = line_handler_for(log, level)
        if handler is None:
            log.log(level, text)
        else:
            handler.emit_line(level, log.name, text)
