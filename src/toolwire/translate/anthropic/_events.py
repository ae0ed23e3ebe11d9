"""What the Messages stream's events mean, read into plain values for the translator.

* ``message_events``: a whole (non-streamed) Message as the events that would have
  streamed it, so streamed and whole answers cannot disagree;
* ``map_usage``: Anthropic's usage (input without the cached part, cache reads and
  writes apart) as Responses usage (input in total, ``cached_tokens`` the reads);
* ``finish_reason``: a ``stop_reason`` as the finish reason ``decide_stream_end`` knows.
"""

from __future__ import annotations

from typing import Any

import orjson

from toolwire.protocol import token_count

JSON = dict[str, Any]

# stop_reason -> the finish reason decide_stream_end reads.
_FINISH_REASONS = {
    "end_turn": "end_turn",
    "tool_use": "tool_calls",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
    "pause_turn": "stop",  # a server tool loop paused: what came is a whole answer so far
}


def finish_reason(stop_reason: str) -> str:
    return _FINISH_REASONS.get(stop_reason, stop_reason)


def map_usage(usage: JSON | None) -> JSON | None:
    """Messages ``usage`` -> Responses ``usage``; None when there was none."""
    if not usage:
        return None
    uncached = token_count(usage.get("input_tokens"))
    reads = token_count(usage.get("cache_read_input_tokens"))
    writes = token_count(usage.get("cache_creation_input_tokens"))
    output = token_count(usage.get("output_tokens"))
    input_tokens = uncached + reads + writes
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": reads, "cache_write_tokens": writes},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output,
    }


def merge_usage(usage: JSON | None, update: Any) -> JSON | None:
    """``message_delta``'s usage (cumulative counts) laid over ``message_start``'s."""
    if not isinstance(update, dict):
        return usage
    merged = dict(usage or {})
    merged.update({key: value for key, value in update.items() if value is not None})
    return merged


def message_events(message: JSON) -> list[JSON]:
    """The stream events equivalent to a whole Message (or its error body)."""
    if message.get("type") == "error":
        return [message]
    events: list[JSON] = [{"type": "message_start", "message": {**message, "content": [], "stop_reason": None}}]
    content = message.get("content")
    for index, block in enumerate(content if isinstance(content, list) else []):
        if isinstance(block, dict):
            events.extend(_block_events(index, block))
    stop_reason = message.get("stop_reason")
    if stop_reason is not None:
        events.append({"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": message.get("usage") or {}})
        events.append({"type": "message_stop"})
    return events


def _block_events(index: int, block: JSON) -> list[JSON]:
    kind = block.get("type")
    deltas: list[JSON] = []
    start = dict(block)
    if kind == "text":
        start["text"] = ""
        deltas.append({"type": "text_delta", "text": block.get("text") or ""})
    elif kind == "thinking":
        start["thinking"], start["signature"] = "", ""
        deltas.append({"type": "thinking_delta", "thinking": block.get("thinking") or ""})
        if block.get("signature"):
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind in ("tool_use", "server_tool_use"):
        start["input"] = {}
        deltas.append({"type": "input_json_delta", "partial_json": orjson.dumps(block.get("input") or {}).decode()})
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        *({"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas),
        {"type": "content_block_stop", "index": index},
    ]
