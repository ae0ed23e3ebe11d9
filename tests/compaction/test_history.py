"""``open_compactions`` and ``summary_request``: what a backend is sent when a
conversation holds compactions, and when it is to be compacted."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.compaction import (
    COMPACTION_PROMPT,
    SUMMARY_HEADING,
    CompactionSeal,
    Unreadable,
    UnreadableCompaction,
    has_trigger,
    open_compactions,
    retained_messages,
    summary_request,
)
from toolwire.protocol import Item, MessageItem, dump_item, parse_item, parse_request
from toolwire.tools import ToolCatalog

SEAL = CompactionSeal(bytes(32))
JSON = dict[str, Any]


def items(*raw: JSON) -> list[Item]:
    return [parse_item(item) for item in raw]


def user(text: str) -> JSON:
    return {"type": "message", "role": "user", "content": text}


def compaction(summary: str, owner: str | None = "alice") -> JSON:
    return {"type": "compaction", "id": "cmp_1", "encrypted_content": SEAL.seal(summary, owner)}


CALL = {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": '{"cmd":"ls"}'}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}
ASSISTANT = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}


def texts(opened: list[Item]) -> list[str]:
    found = []
    for item in opened:
        dumped = dump_item(item)
        if dumped.get("type", "message") == "message":
            content = dumped["content"]
            found.append(content if isinstance(content, str) else content[0]["text"])
        else:
            found.append(dumped["type"])
    return found


def test_a_compaction_becomes_its_summary_in_its_place() -> None:
    opened = open_compactions(items(user("first"), compaction("S1"), user("next")), SEAL, "alice")
    assert texts(opened.items) == ["first", f"{SUMMARY_HEADING}\n\nS1", "next"]
    assert type(opened.items[1]) is MessageItem and opened.items[1].role == "user"
    assert "compaction items opened into their summaries" in opened.conversions


def test_what_the_latest_summarised_is_left_out_but_the_users_messages() -> None:
    """A stored chain still holds what a compaction summarised: only the user, developer
    and system messages before it stay; an older summary is superseded."""
    conversation = items(
        {"role": "developer", "content": "rules"},
        user("one"),
        CALL,
        OUTPUT,
        compaction("older"),
        ASSISTANT,
        user("two"),
        {"type": "compaction_trigger"},
        compaction("newer"),
        user("three"),
    )
    opened = open_compactions(conversation, SEAL, "alice")
    assert texts(opened.items) == ["rules", "one", "two", f"{SUMMARY_HEADING}\n\nnewer", "three"]
    assert "items a compaction summarised left out" in opened.conversions


def test_triggers_are_never_passed_on() -> None:
    opened = open_compactions(items(user("a"), {"type": "compaction_trigger"}), None, None)
    assert texts(opened.items) == ["a"] and opened.conversions == []


def test_a_foreign_compaction_is_refused_naming_it() -> None:
    foreign = {"type": "compaction", "encrypted_content": "gAAAAABforeign"}
    with pytest.raises(UnreadableCompaction) as caught:
        open_compactions(items(user("a"), foreign), SEAL, "alice")
    assert caught.value.reason is Unreadable.FOREIGN and caught.value.param == "input[1].encrypted_content"


def test_a_foreign_compaction_goes_to_a_backend_that_made_it() -> None:
    foreign = {"type": "compaction", "encrypted_content": "gAAAAABforeign"}
    opened = open_compactions(items(user("a"), foreign, compaction("ours")), SEAL, "alice", keep_foreign=True)
    assert texts(opened.items) == ["a", f"{SUMMARY_HEADING}\n\nours"]
    opened = open_compactions(items(user("a"), foreign), None, None, keep_foreign=True)
    assert [dump_item(item) for item in opened.items] == [user("a"), foreign]


def test_errors_name_the_place_the_caller_gives() -> None:
    with pytest.raises(UnreadableCompaction) as caught:
        open_compactions(items(compaction("x", owner="bob")), SEAL, "alice", where=lambda index: "previous_response_id")
    assert caught.value.reason is Unreadable.OTHER_OWNER and caught.value.param == "previous_response_id"


def test_has_trigger() -> None:
    assert has_trigger(parse_request({"model": "m", "input": [user("a"), {"type": "compaction_trigger"}]}))
    assert not has_trigger(parse_request({"model": "m", "input": [user("a"), compaction("x")]}))
    assert not has_trigger(parse_request({"model": "m", "input": "a"}))


def test_the_summary_request_offers_no_tool() -> None:
    """Tools, additional_tools items and what tool searches loaded: none is offered, and
    the calls made stay in the history; our prompt is the last message."""
    request = parse_request(
        {
            "model": "m",
            "instructions": "You are Codex.",
            "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}],
            "tool_choice": "required",
            "text": {"format": {"type": "json_object"}},
            "input": [
                {"type": "additional_tools", "role": "developer", "tools": [{"type": "function", "name": "extra"}]},
                user("list files"),
                CALL,
                OUTPUT,
                {"type": "tool_search_call", "call_id": "s1", "execution": "client", "arguments": {"query": "x"}},
                {
                    "type": "tool_search_output",
                    "call_id": "s1",
                    "execution": "client",
                    "status": "completed",
                    "tools": [{"type": "function", "name": "loaded"}],
                },
            ],
        }
    )
    summary = summary_request(request)
    assert len(ToolCatalog.from_request(request)) == 3
    assert len(ToolCatalog.from_request(summary)) == 0
    assert summary.tools is None and summary.tool_choice is None and summary.text is None
    assert summary.instructions == "You are Codex."
    sent = [dump_item(item) for item in summary.input_items()]
    assert [item.get("type", "message") for item in sent] == [
        "message",
        "function_call",
        "function_call_output",
        "tool_search_call",
        "tool_search_output",
        "message",
    ]
    assert sent[-1]["content"][0]["text"] == COMPACTION_PROMPT


def test_the_compact_endpoint_keeps_the_users_messages_newest_first_within_a_budget() -> None:
    conversation = items(user("a" * 10), ASSISTANT, user("b" * 10), CALL, OUTPUT, user("c" * 10))
    kept = retained_messages(conversation, budget=25)
    assert [message["content"][0]["text"] for message in kept] == ["b" * 10, "c" * 10]
    assert all(message["type"] == "message" and message["role"] == "user" for message in kept)
    assert all(message["status"] == "completed" for message in kept)


def test_errors_name_the_item_the_callers_place_gives() -> None:
    with pytest.raises(UnreadableCompaction) as caught:
        open_compactions(
            items(user("a"), compaction("x", owner="bob")), SEAL, "alice", where=lambda index: f"history[{index}]"
        )
    assert caught.value.param == "history[1]"


def test_a_compaction_of_ours_needs_the_seal() -> None:
    with pytest.raises(ValueError) as caught:
        open_compactions(items(compaction("x")), None, "alice")
    assert str(caught.value) == "a toolwire compaction needs the seal to open it"


def test_what_a_compaction_right_after_the_first_item_summarised_is_left_out() -> None:
    opened = open_compactions(items(ASSISTANT, compaction("S"), user("next")), SEAL, "alice")
    assert texts(opened.items) == [f"{SUMMARY_HEADING}\n\nS", "next"]
    assert opened.conversions == [
        "compaction items opened into their summaries",
        "items a compaction summarised left out",
    ]


def test_nothing_is_said_left_out_when_only_kept_messages_came_before() -> None:
    opened = open_compactions(items(user("one"), compaction("S")), SEAL, "alice")
    assert texts(opened.items) == ["one", f"{SUMMARY_HEADING}\n\nS"]
    assert opened.conversions == ["compaction items opened into their summaries"]


def test_every_older_summary_is_superseded_by_the_latest() -> None:
    opened = open_compactions(
        items(compaction("first"), user("a"), compaction("second"), user("b"), compaction("third")), SEAL, "alice"
    )
    assert texts(opened.items) == ["a", "b", f"{SUMMARY_HEADING}\n\nthird"]


def test_the_summary_goes_to_a_backend_as_a_whole_message() -> None:
    [message] = open_compactions(items(compaction("S")), SEAL, "alice").items
    assert dump_item(message) == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": f"{SUMMARY_HEADING}\n\nS"}],
    }


def test_the_summary_request_ends_with_our_prompt_and_stores_nothing() -> None:
    for store in (True, None):
        body: JSON = {"model": "m", "input": [user("a")]}
        if store is not None:
            body["store"] = store
        summary = summary_request(parse_request(body))
        sent = summary.dump()
        assert sent["store"] is False
        assert sent["input"][-1] == {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": COMPACTION_PROMPT}],
        }


def test_retained_messages_fill_the_budget_exactly_in_their_full_form() -> None:
    conversation = items(
        {"type": "message", "id": "msg_a", "role": "user", "content": "a" * 10},
        user("b" * 15),
    )
    kept = retained_messages(conversation, budget=25)
    assert kept == [
        {"type": "message", "role": "user", "status": "completed", "content": [{"type": "input_text", "text": "a" * 10}], "id": "msg_a"},
        {"type": "message", "role": "user", "status": "completed", "content": [{"type": "input_text", "text": "b" * 15}]},
    ]
    assert retained_messages(conversation, budget=24) == kept[1:]
