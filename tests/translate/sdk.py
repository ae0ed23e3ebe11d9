"""What the official SDK makes of the events and Response objects the translators write.

``sdk_event`` validates an event exactly as a client built with
``_strict_response_validation=True`` does; ``strict_checkable`` swaps out the one
documented deviation from the SDK's enums; ``without_parsed`` drops what the SDK adds
when it parses (``parsed``, ``parsed_arguments``), to compare with what was sent.
"""

from __future__ import annotations

from typing import Any

import pytest
from openai._models import validate_type
from openai.types.responses import ResponseFailedEvent, ResponseStreamEvent
from pydantic import ValidationError

JSON = dict[str, Any]


def sdk_event(event: JSON) -> Any:
    """The event as an SDK client with ``_strict_response_validation=True`` parses it."""
    return validate_type(type_=ResponseStreamEvent, value=event)  # type: ignore[arg-type]


def strict_checkable(event: JSON) -> JSON:
    """The event with the one documented deviation from the SDK's enums swapped out.

    ``response.error.code == "context_length_exceeded"`` is what Codex needs and is not
    in the SDK's ``ResponseError.code`` enum; the test asserts that this field, and
    nothing else, is what strict validation rejects.
    """
    response = event.get("response")
    if (
        not isinstance(response, dict)
        or (response.get("error") or {}).get("code") != "context_length_exceeded"
    ):
        return event
    with pytest.raises(ValidationError) as caught:
        validate_type(type_=ResponseFailedEvent, value=event)
    assert [error["loc"] for error in caught.value.errors()] == [("response", "error", "code")]
    return {
        **event,
        "response": {**response, "error": {**response["error"], "code": "server_error"}},
    }


def without_parsed(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: without_parsed(v)
            for k, v in value.items()
            if k not in ("parsed", "parsed_arguments")
        }
    if isinstance(value, list):
        return [without_parsed(v) for v in value]
    return value
