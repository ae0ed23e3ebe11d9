"""What the backend is asked when the gateway compacts a conversation itself.

``summary_request`` turns the request to compact (its conversation already opened by
``open_compactions``) into an ordinary request for the backend's model: the same
conversation and instructions, then our ``COMPACTION_PROMPT`` as the last user message,
and no tools offered (top-level tools, ``additional_tools`` items and what tool searches
loaded are all left out; the calls already made stay in the history, and a wire that
wants the tools they name declared does so itself, not to be called: the Messages API),
no output format, nothing for the backend to store. The model's answer is the summary (``CompactionAnswer``).

``retained_messages`` is what ``POST /v1/responses/compact`` keeps beside the new
compaction item, as the Responses API does: the user's own messages, newest first within
a budget, in their full form.

Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolwire.protocol import (
    AdditionalToolsItem,
    InputText,
    Item,
    MessageItem,
    ResponsesRequest,
    ToolSearchOutputItem,
    dump_item,
)

__all__ = ["COMPACTION_PROMPT", "RETAINED_TEXT_BUDGET", "retained_messages", "summary_request"]

COMPACTION_PROMPT = """\
Your context is about to be compacted: everything above will be replaced by what you \
write now, and the work goes on from it in a fresh context. Write a summary that lets \
the work continue seamlessly. Include:

- the user's goals, requirements and constraints, and any preferences they stated;
- what has been done so far, the decisions made and why;
- the current state: files, commands, results and errors, with the exact names, paths, \
identifiers and values needed to go on;
- what remains to be done, and the next step.

Write only the summary, as plain text. Do not call any tool."""

RETAINED_TEXT_BUDGET = 64_000
"""Characters of the user's own messages that ``/v1/responses/compact`` keeps, newest first."""


def summary_request(request: ResponsesRequest) -> ResponsesRequest:
    """The request that asks the backend's model for the summary of ``request``'s
    conversation (whose compactions are already opened)."""
    items: list[Item] = []
    for item in request.input_items():
        if type(item) is AdditionalToolsItem:
            continue  # tools declared inside the input: none are offered
        if type(item) is ToolSearchOutputItem:
            item = item.model_copy(update={"tools": []})  # what it loaded would be offered
        items.append(item)
    items.append(MessageItem(type="message", role="user", content=[InputText(type="input_text", text=COMPACTION_PROMPT)]))
    asked = {key: value for key, value in request.dump().items() if key not in _LEFT_OUT}
    asked["input"] = [dump_item(item) for item in items]
    asked["store"] = False  # nothing for a backend to keep: the summary is ours to seal
    return ResponsesRequest.model_validate(asked)


# Left out of the summary request, rather than sent as null: not every server takes nulls.
_LEFT_OUT = frozenset({"input", "tools", "tool_choice", "parallel_tool_calls", "text", "previous_response_id", "store"})


def retained_messages(items: Sequence[Item], *, budget: int = RETAINED_TEXT_BUDGET) -> list[dict[str, Any]]:
    """The user messages of ``items`` that fit ``budget`` characters, newest first kept,
    in their original order and full form (``type``, ``role``, ``status``, content parts)."""
    kept: list[dict[str, Any]] = []
    left = budget
    for item in reversed(items):
        if type(item) is not MessageItem or item.role != "user":
            continue
        message = _full_message(item)
        size = sum(len(part.get("text", "")) for part in message["content"])
        if size > left:
            break
        left -= size
        kept.append(message)
    kept.reverse()
    return kept


def _full_message(item: MessageItem) -> dict[str, Any]:
    dumped = item.dump()
    content = dumped.get("content")
    if isinstance(content, str):
        content = [{"type": "input_text", "text": content}]
    message: dict[str, Any] = {"type": "message", "role": "user", "status": "completed", "content": content}
    if item.id is not None:
        message["id"] = item.id
    return message
