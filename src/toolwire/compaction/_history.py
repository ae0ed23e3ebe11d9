"""A conversation's ``compaction`` items, opened: the summary in the place of each.

A ``compaction`` item stands for everything before it. Before a request goes to a
backend that does not compact by itself, every compaction toolwire sealed is opened and
becomes one user message carrying its summary (``summary_message``), so whatever the
backend's wire (Chat, Responses, Messages), the model reads the summary where the
item was. What the latest one summarised is left out, as Codex does when it compacts:
of the items before it only the user, developer and system messages stay (a client that
keeps the compaction item has already dropped the rest; a stored chain has not).

A ``compaction`` item toolwire cannot open (another provider's, another gateway's,
another client key's, or altered) is an ``UnreadableCompaction`` (400) naming it, never
dropped in silence, unless the backend compacts by itself and made it: a backend's own
compaction then goes to it untouched. ``compaction_trigger`` items are control items,
never passed on (the gateway acts on the one the request itself holds).

Pure: the seal is given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from toolwire.protocol import (
    CompactionItem,
    CompactionTriggerItem,
    InputText,
    Item,
    MessageItem,
    ResponsesRequest,
)

from ._seal import CompactionSeal, Unreadable, UnreadableCompaction

__all__ = ["SUMMARY_HEADING", "OpenedHistory", "has_trigger", "open_compactions", "summary_message"]

SUMMARY_HEADING = (
    "The conversation above this point was compacted. This is its summary, written to "
    "continue the work from where it stands:"
)
_KEPT_ROLES = frozenset({"user", "developer", "system"})


@dataclass(frozen=True, slots=True)
class OpenedHistory:
    """The items to send, and what opening them changed (labels, each listed once)."""

    items: list[Item]
    conversions: list[str] = field(default_factory=list)


def has_trigger(request: ResponsesRequest) -> bool:
    """Whether ``request``'s input asks for a compaction (a ``compaction_trigger`` item)."""
    return request.input_holds(CompactionTriggerItem)


def summary_message(summary: str) -> MessageItem:
    """The user message that carries a compaction's summary to the model."""
    return MessageItem(
        type="message", role="user", content=[InputText(type="input_text", text=f"{SUMMARY_HEADING}\n\n{summary}")]
    )


def open_compactions(
    items: Sequence[Item],
    seal: CompactionSeal | None,
    owner: str | None,
    *,
    keep_foreign: bool = False,
    where: Callable[[int], str] | None = None,
) -> OpenedHistory:
    """``items`` with every compaction toolwire sealed (for ``owner``) opened into its
    summary, what the latest one summarised left out, and no ``compaction_trigger``.

    ``keep_foreign``: a compaction toolwire did not make goes on untouched (the backend
    made it) instead of being refused. ``where(i)`` names item ``i``'s sealed content in
    errors (default: ``input[i].encrypted_content``). ``seal`` may be None only when no
    item is toolwire's.
    """
    conversions: dict[str, None] = {}
    opened: list[Item] = []
    summaries: list[int] = []  # where each summary is in ``opened``
    for index, item in enumerate(items):
        if type(item) is CompactionTriggerItem:
            continue
        if type(item) is CompactionItem:
            param = where(index) if where is not None else f"input[{index}].encrypted_content"
            if not CompactionSeal.is_ours(item.encrypted_content):
                if not keep_foreign:
                    raise UnreadableCompaction(Unreadable.FOREIGN, param=param)
                opened.append(item)
                continue
            if seal is None:  # pragma: no cover - the caller's bug
                raise ValueError("a toolwire compaction needs the seal to open it")
            summary = seal.open(item.encrypted_content, owner, param=param)
            summaries.append(len(opened))
            opened.append(summary_message(summary))
            conversions["compaction items opened into their summaries"] = None
            continue
        opened.append(item)
    if summaries and summaries[-1] > 0:
        latest, earlier = summaries[-1], frozenset(summaries[:-1])
        before = [
            item
            for index, item in enumerate(opened[:latest])
            if index not in earlier and type(item) is MessageItem and item.role in _KEPT_ROLES
        ]
        if len(before) < latest:
            conversions["items a compaction summarised left out"] = None
        opened = [*before, *opened[latest:]]
    return OpenedHistory(opened, list(conversions))
