"""The envelope toolwire puts in a reasoning item's ``encrypted_content``.

A Chat backend's reasoning text (DeepSeek's ``reasoning_content``, Ollama's
``reasoning``) has no place in a Responses item that stateless clients are sure to
send back, except ``encrypted_content``: Codex replays it verbatim. toolwire seals the
text there and opens it on the next turn. Anything without our prefix is foreign (an
OpenAI blob) and is never sent to another backend.

A backend whose reasoning is signed (Anthropic's ``thinking`` blocks with their
``signature``, ``redacted_thinking``) must get its blocks back unchanged: the envelope
carries them too (``blocks``), beside the text any other backend reads.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

ENVELOPE_PREFIX = "toolwire.r1."


def seal_reasoning(text: str, *, blocks: list[dict[str, Any]] | None = None) -> str:
    """The ``encrypted_content`` value that carries ``text`` (and the backend's own
    reasoning ``blocks``, if any) to the next turn."""
    envelope: dict[str, Any] = {"text": text}
    if blocks:
        envelope["blocks"] = blocks
    return ENVELOPE_PREFIX + base64.urlsafe_b64encode(orjson.dumps(envelope)).decode("ascii")


def open_reasoning(encrypted_content: str | None) -> str | None:
    """The text sealed by ``seal_reasoning``, or None for a foreign or damaged value."""
    payload = _opened(encrypted_content)
    text = payload.get("text") if payload is not None else None
    return text if isinstance(text, str) else None


def open_reasoning_blocks(encrypted_content: str | None) -> list[dict[str, Any]] | None:
    """The backend's own reasoning blocks sealed by ``seal_reasoning``, unchanged; None
    when there are none (text only, foreign or damaged)."""
    payload = _opened(encrypted_content)
    blocks = payload.get("blocks") if payload is not None else None
    if not isinstance(blocks, list) or not all(isinstance(block, dict) for block in blocks):
        return None
    return blocks or None


def _opened(encrypted_content: str | None) -> dict[str, Any] | None:
    if not encrypted_content or not encrypted_content.startswith(ENVELOPE_PREFIX):
        return None
    try:
        payload = orjson.loads(base64.urlsafe_b64decode(encrypted_content[len(ENVELOPE_PREFIX) :]))
    except (ValueError, orjson.JSONDecodeError):
        return None
    return payload if isinstance(payload, dict) else None
