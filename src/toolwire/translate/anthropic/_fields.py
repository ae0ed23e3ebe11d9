"""The generation fields of a Messages request: ``max_tokens``, ``thinking``, sampling.

* ``max_tokens`` is required: ``max_output_tokens``, else the model's known limit, else
  the profile's default.
* ``reasoning.effort`` becomes a thinking budget (``thinking: {"type": "enabled",
  "budget_tokens": N}``), smaller than ``max_tokens`` and at least 1024 (the API's
  minimum); ``minimal``/``none`` or no room turns thinking off. Thinking forbids a
  changed ``temperature`` and forcing a tool, so with thinking those are not sent and
  with a forced tool thinking is off (the client's explicit choice wins).
* ``temperature`` is lowered to the profile's maximum (Anthropic takes 0-1, Responses 0-2).

A field with no Messages equivalent (``text.format`` other than text included) is not
sent, and one warning names them all (``.._fields``: also the fields no wire
translates); the Responses server's own bookkeeping (``store``, ``metadata``, ...) is
dropped silently.
"""

from __future__ import annotations

from typing import Any

from toolwire.protocol import ResponsesRequest

from .._fields import note_lost_fields, read_text_format
from .._notes import Notes
from .profile import MessagesProfile

JSON = dict[str, Any]

MIN_THINKING_BUDGET = 1024
THINKING_BUDGETS = {"low": 2048, "medium": 8192, "high": 16384, "xhigh": 32000}
_NO_THINKING = frozenset({"minimal", "none"})

def thinking_budget(request: ResponsesRequest) -> int | None:
    """The thinking budget ``reasoning.effort`` asks for; None: no thinking."""
    effort = (request.reasoning or {}).get("effort")
    if not isinstance(effort, str) or effort in _NO_THINKING:
        return None
    return THINKING_BUDGETS.get(effort, THINKING_BUDGETS["medium"])


def add_generation_fields(
    body: JSON,
    request: ResponsesRequest,
    profile: MessagesProfile,
    notes: Notes,
    *,
    model: str,
    thinking: int | None,
) -> None:
    """``max_tokens``, ``thinking`` (a budget, or None), ``temperature``, ``top_p``, ``stream``."""
    lost: list[str] = []
    max_tokens = request.max_output_tokens or profile.max_output(model)
    body["max_tokens"] = max_tokens
    if thinking is not None:
        budget = min(thinking, max_tokens - MIN_THINKING_BUDGET)
        if budget < MIN_THINKING_BUDGET:
            notes.warn(f"reasoning not enabled: max_tokens {max_tokens} leaves no room for a thinking budget")
            thinking = None
        else:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            notes.convert("reasoning.effort sent as a thinking budget")
    if request.temperature is not None:
        if thinking is not None:
            lost.append("temperature (not allowed with thinking)")
        else:
            body["temperature"] = min(request.temperature, profile.max_temperature)
            if request.temperature > profile.max_temperature:
                notes.convert(f"temperature lowered to {profile.max_temperature:g}")
    if request.top_p is not None:
        if thinking is not None and request.top_p < 0.95:
            lost.append("top_p (below 0.95 is not allowed with thinking)")
        else:
            body["top_p"] = request.top_p
    output_format = read_text_format(request.text or {}, lost)
    if output_format is not None and output_format.get("type") not in (None, "text"):
        lost.append(f"text.format ({output_format.get('type')})")
    for key, value in (request.reasoning or {}).items():
        if value is not None and key not in ("effort", "context", "summary"):
            lost.append(f"reasoning.{key}")
    if request.stream:
        body["stream"] = True
    note_lost_fields(request, lost, notes, "Messages API")
