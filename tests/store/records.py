"""Building stored responses for the tests: a user turn in, an assistant message out."""

from __future__ import annotations

from typing import Any

from toolwire.store import StoredResponse


def response_object(response_id: str, answer: str, previous: str | None = None) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1_760_000_000,
        "status": "completed",
        "model": "qwen3",
        "previous_response_id": previous,
        "store": True,
        "output": [
            {
                "type": "message",
                "id": f"msg_out_{response_id}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": answer, "annotations": []}],
            }
        ],
    }


def exchange(response_id: str, question: str, previous: str | None = None) -> StoredResponse:
    """``question`` asked, answered with ``"re: " + question``."""
    return StoredResponse.from_exchange(
        response_object(response_id, f"re: {question}", previous), question, previous_response_id=previous
    )


def resent(response_id: str, question: str, *, on: StoredResponse, items_before: int) -> StoredResponse:
    """The record of a request that resent ``on``'s whole input (``items_before`` items),
    ``on``'s answer and then ``question``: building on ``on``'s input, it holds those last
    two items only."""
    own = [
        {"type": "message", "role": "assistant", "content": on.output_items[0]["content"]},
        {"role": "user", "content": question},
    ]
    return StoredResponse.from_exchange(
        response_object(response_id, f"re: {question}"), own, input_base=on.id, items_before=items_before
    )


def texts(items: list[dict[str, Any]]) -> list[str]:
    """The conversation as ``role: text`` lines."""
    lines = []
    for item in items:
        lines.append(f"{item['role']}: {item['content'][0]['text']}")
    return lines
