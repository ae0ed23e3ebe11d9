"""``upstream_failure``: what an error a backend sent inside its stream says.

Its message, and the code to fail the response with: ``context_length_exceeded`` when the
backend says the prompt did not fit (Codex recognises a context overflow by exactly this
code), else ``server_error``. Chat servers send ``{"error": {...}}`` objects (or vLLM's
older flat ``{"object": "error", ...}``); Anthropic an ``error`` event of the same shape.
"""

from __future__ import annotations

import re
from typing import Any

JSON = dict[str, Any]

_CONTEXT_LENGTH = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|too many tokens"
    r"|(prompt|input) is too long|maximum (input|prompt) length",
    re.IGNORECASE,
)


def upstream_failure(chunk: JSON) -> tuple[str, str] | None:
    """``(message, code)`` for an in-stream error object (nested, or vLLM's older flat form)."""
    error = chunk.get("error")
    if not error and chunk.get("object") == "error":
        error = chunk
    if not error:
        return None
    message = "The upstream reported an error."
    upstream_code: Any = None
    if isinstance(error, dict):
        if isinstance(error.get("message"), str) and error["message"]:
            message = error["message"]
        upstream_code = error.get("code")
    elif isinstance(error, str):
        message = error
    context = upstream_code == "context_length_exceeded" or _CONTEXT_LENGTH.search(message)
    return message, "context_length_exceeded" if context else "server_error"
