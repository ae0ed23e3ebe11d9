"""What every wire does with the request fields beside the conversation and the tools.

Each wire translates the generation fields its own way (``chat/_fields``,
``anthropic/_fields``); what they share is here, once:

* ``read_text_format``: ``text.format`` must be an object (else a ``RequestError`` naming it);
  the other ``text`` fields have nowhere to go;
* ``note_lost_fields``: every field the client set that no wire translates (``truncation``
  at its default excepted) is lost, and one warning names everything the wire lost; the
  Responses server's own bookkeeping (``store``, ``metadata``, ``previous_response_id``,
  ...) is dropped silently: dropping it changes nothing the model does.
"""

from __future__ import annotations

from typing import Any

from toolwire.errors import RequestError
from toolwire.protocol import ResponsesRequest

from ._notes import Notes

JSON = dict[str, Any]

_TRANSLATED_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_output_tokens",
        "temperature",
        "top_p",
        "text",
        "reasoning",
        "stream",
    }
)
# Bookkeeping for the Responses server itself: dropping them changes nothing the model does.
_SILENTLY_DROPPED_FIELDS = frozenset(
    {
        "store",
        "include",
        "prompt_cache_key",
        "prompt_cache_retention",
        "client_metadata",
        "metadata",
        "user",
        "safety_identifier",
        "service_tier",
        "stream_options",
        # Resolved by the server from its response store before translation.
        "previous_response_id",
    }
)
_DEFAULT_VALUES: dict[str, Any] = {"truncation": "disabled"}


def read_text_format(text: JSON, lost: list[str]) -> JSON | None:
    """``text.format`` (None: not given); the other ``text`` fields added to ``lost``."""
    lost.extend(f"text.{key}" for key, value in text.items() if key != "format" and value is not None)
    value = text.get("format")
    if value is not None and not isinstance(value, dict):
        raise RequestError("Invalid 'text.format': expected an object.", param="text.format")
    return value


def note_lost_fields(request: ResponsesRequest, lost: list[str], notes: Notes, wire: str) -> None:
    """Add the fields the client set that no wire translates to ``lost``, then warn once
    naming all of them (``wire``: the API that has no equivalent)."""
    for name in request.model_fields_set:
        if name in _TRANSLATED_FIELDS or name in _SILENTLY_DROPPED_FIELDS:
            continue
        value = getattr(request, name, None)
        if value is not None and value is not False and _DEFAULT_VALUES.get(name) != value:
            lost.append(name)
    if lost:
        notes.warn(f"request fields not forwarded (no {wire} equivalent): {', '.join(sorted(lost))}")
