"""The envelope toolwire puts in a reasoning item's ``encrypted_content``.

A Chat backend's reasoning text (DeepSeek's ``reasoning_content``, Ollama's
``reasoning``) has no place in a Responses item that stateless clients are sure to
send back, except ``encrypted_content``: Codex replays it verbatim. toolwire seals the
text there and opens it on the next turn. Anything without our prefix is foreign (an
OpenAI blob) and is never sent to another backend.
"""

from __future__ import annotations

import base64

import orjson

ENVELOPE_PREFIX = "toolwire.r1."


def seal_reasoning(text: str) -> str:
    """The ``encrypted_content`` value that carries ``text`` to the next turn."""
    payload = orjson.dumps({"text": text})
    return ENVELOPE_PREFIX + base64.urlsafe_b64encode(payload).decode("ascii")


def open_reasoning(encrypted_content: str | None) -> str | None:
    """The text sealed by ``seal_reasoning``, or None for a foreign or damaged value."""
    if not encrypted_content or not encrypted_content.startswith(ENVELOPE_PREFIX):
        return None
    try:
        payload = orjson.loads(base64.urlsafe_b64decode(encrypted_content[len(ENVELOPE_PREFIX) :]))
    except (ValueError, orjson.JSONDecodeError):
        return None
    text = payload.get("text") if isinstance(payload, dict) else None
    return text if isinstance(text, str) else None
