"""``generate: false``: a response created without asking the model (a prewarm).

Codex begins each WebSocket turn with a ``response.create`` that says ``generate: false``:
the request's tools, instructions and input, which its next request continues
(``previous_response_id``) with only its new items. Nothing is sampled, so nothing goes
upstream: ``UnsampledMachine`` stands in for the backend's stream machine. The backend's
own machine begins the stream (its ``response.created``, echoing the request; one is
written from its Response object when that machine waits for its upstream to begin),
and the response completes at once with no output and no usage.
"""

from __future__ import annotations

import time
from typing import Any

from toolwire.translate import AnswerTranslator

JSON = dict[str, Any]


class UnsampledMachine:
    """A ``AnswerTranslator`` whose stream ends, completed and empty, as soon as it starts."""

    def __init__(self, machine: AnswerTranslator) -> None:
        self._machine = machine
        self.conversions = machine.conversions
        self._next_sequence_number = 0
        self._completed: JSON | None = None

    @property
    def finished(self) -> bool:
        return self._completed is not None or self._machine.finished

    @property
    def response(self) -> JSON:
        return self._completed if self._completed is not None else self._machine.response

    def start(self) -> list[Any]:
        events = self._machine.start()
        if not any(event["type"] == "response.created" for event in events):
            events.insert(0, {"type": "response.created", "sequence_number": 0, "response": dict(self._machine.response)})
        self._next_sequence_number = 1 + max(event.get("sequence_number", 0) for event in events)
        return events

    def feed(self, item: JSON) -> list[Any]:
        return []  # nothing was asked upstream, so nothing arrives

    def finish(self, *, completed_at: int | None = None, ended_cleanly: bool = True) -> list[Any]:
        if self.finished:
            return []
        completed = {
            **self._machine.response,
            "status": "completed",
            "completed_at": completed_at if completed_at is not None else int(time.time()),
            "output": [],
            "usage": None,
        }
        self._completed = completed
        return [{"type": "response.completed", "sequence_number": self._next_sequence_number, "response": completed}]

    def fail(self, message: str, *, code: str = "server_error") -> list[Any]:
        return self._machine.fail(message, code=code)

    def translate_whole(self, answer: JSON) -> JSON:
        return self._machine.translate_whole(answer)
