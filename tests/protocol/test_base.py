"""WireModel's dumps and the discriminator that picks each item's, part's and tool's model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from toolwire.protocol import FunctionCallItem, MessageItem
from toolwire.protocol._base import type_tag
from toolwire.protocol._items import ITEM_TYPES


def test_dump_gives_json_values_whatever_python_built_the_item() -> None:
    # The agent builds items in Python; what dump gives goes on the wire as JSON.
    item = MessageItem(role="user", content="hi", x_tags=("a", "b"))
    assert item.dump() == {"role": "user", "content": "hi", "x_tags": ["a", "b"]}


def item_tag() -> Callable[[Any], str]:
    """The tag the Item union uses (toolwire.protocol._items): every modelled type is its
    own tag, an object without ``type`` is a message, compaction_summary is a compaction.
    Built by each test (not at import), so that the test runs what type_tag does now."""
    tag: Callable[[Any], str] = type_tag(ITEM_TYPES, "unknown", default="message", aliases={"compaction_summary": "compaction"})
    return tag


@pytest.mark.parametrize(
    ("value", "tag"),
    [
        ({"type": "function_call"}, "function_call"),
        ({"type": "compaction_summary"}, "compaction"),
        ({"role": "user", "content": "hi"}, "message"),
        ({"type": None, "role": "user"}, "message"),
        ({"type": "codex_future_item"}, "unknown"),
        ({"type": ["message"]}, "unknown"),
        ({"type": 5}, "unknown"),
        ("not an object", "message"),
        (FunctionCallItem(type="function_call", call_id="c", name="n", arguments="{}"), "function_call"),
        (MessageItem(role="user", content="hi"), "message"),
    ],
    ids=[
        "known",
        "alias",
        "no-type",
        "null-type",
        "unknown-type",
        "list-type",
        "number-type",
        "not-an-object",
        "a-call-item",
        "a-message-item",
    ],
)
def test_the_item_tag(value: Any, tag: str) -> None:
    assert item_tag()(value) == tag


def test_without_a_default_a_missing_type_is_the_fallback() -> None:
    tool_tag = type_tag(frozenset({"function", "custom"}), "hosted")
    assert [tool_tag(v) for v in ({"type": "custom"}, {"name": "x"}, {"type": "web_search"})] == [
        "custom",
        "hosted",
        "hosted",
    ]
    # Only the aliases given apply.
    assert type_tag(frozenset({"a"}), "other", aliases={"b": "a"})({"type": "b"}) == "a"
    assert tool_tag({"type": "compaction_summary"}) == "hosted"

