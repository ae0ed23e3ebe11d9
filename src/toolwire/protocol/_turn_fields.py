"""``TurnFields``: the fields a connection's turns resend, decoded and validated once.

Over a WebSocket, Codex continues its own last response: every turn sends the same fields
(``model``, ``instructions``, ``tools``, ``client_metadata``, ...), the
``previous_response_id`` of the response before it and only its new ``input``. Parsed whole,
each turn decoded and validated those fields again. A connection keeps the fields of its
last continuing request: their bytes, as orjson writes them, and what they validated to,
as a ``RequestShell``. A turn that continues a response and whose other fields write to
the same bytes has the same fields, so only its ``input`` and ``previous_response_id`` are
validated (as a request of their own, as the whole path validates a body: its depth, the
tool lists of its items through the tool-list cache, an error that says where,
``input[0].content``) and the rest is the shell's, copied. The WebSocket hands over what it
decoded the message to, so the turn is decoded once: reading a V1 turn (8 kB) from its
message took 102 µs, hot, and takes 54.

Anything else is parsed whole (``parse_request``), and reports its errors as always: a
body that is not an object, a turn with no ``previous_response_id`` (it starts a
conversation over, and a resent history has its own short path), a field added, removed,
changed or written in another order. A continuing turn parsed whole leaves its fields for
the next. What is kept is one connection's, never shared.
"""

from __future__ import annotations

from typing import Any

import orjson

from ._history import RequestShell
from ._request import ResponsesRequest, _validated, parse_request

__all__ = ["TurnFields"]

_OWN = ("input", "previous_response_id")
"""What a continuing turn sends of its own."""


class TurnFields:
    """One connection's last continuing request, but for what a turn sends of its own."""

    __slots__ = ("_shell",)

    def __init__(self) -> None:
        self._shell: RequestShell | None = None
        """The last continuing request's: its ``tail`` the bytes of its other fields."""

    def parse(self, body: bytes, decoded: dict[str, Any]) -> ResponsesRequest:
        """``body`` as ``parse_request`` reads it, its kept fields not validated again;
        ``decoded`` is what ``body`` decodes to (read only)."""
        if type(decoded.get("previous_response_id")) is not str:
            return parse_request(body)
        try:
            fields = orjson.dumps({key: value for key, value in decoded.items() if key not in _OWN})
        except orjson.JSONEncodeError:
            return parse_request(body)  # too deep: the whole body's error
        shell = self._shell
        if shell is not None and fields == shell.tail:
            return self._continued(shell, {key: decoded[key] for key in _OWN if key in decoded})
        request = parse_request(body)
        self._shell = RequestShell.of_request(fields, request)
        return request

    @staticmethod
    def _continued(shell: RequestShell, own: dict[str, Any]) -> ResponsesRequest:
        turn = _validated({"model": shell.request.model, **own})  # depth, tool lists, model: as the whole path
        return shell.filled(turn.input, previous_response_id=turn.previous_response_id)
