"""Where continued conversations come from: the store, and a WebSocket connection's own memory."""

from __future__ import annotations

import pytest

from toolwire.errors import RequestError
from toolwire.server._history import (
    CATCH_UP_RESPONSES,
    CONNECTION_RESPONSES_KEPT,
    EMPTY,
    ConnectionHistory,
    Conversation,
    History,
    KnownConversations,
    StoreHistory,
)
from toolwire.store import MemoryResponseStore, PreviousResponseNotFound, StoredResponse


def record(n: int, previous: str | None = None, owner: str | None = None) -> StoredResponse:
    response = {"id": f"resp_{n}", "created_at": n, "output": [{"type": "message", "role": "assistant",
                                                                "content": [{"type": "output_text", "text": f"answer {n}"}]}]}
    return StoredResponse.from_exchange(response, f"question {n}", previous_response_id=previous, owner=owner)


def unparsable(n: int, previous: str | None = None) -> StoredResponse:
    """A record whose output message does not parse (its content is a number)."""
    response = {"id": f"resp_{n}", "created_at": n, "output": [{"type": "message", "role": "assistant", "content": 7}]}
    return StoredResponse.from_exchange(response, f"question {n}", previous_response_id=previous)


def texts(conversation: Conversation) -> list[str]:
    items = [item.dump() for item in conversation.items]
    return [str(part["text"]) for item in items for part in item["content"]]


async def keep(history: History, record: StoredResponse, before: Conversation = EMPTY, *, store: bool) -> Conversation:
    """Keep ``record`` as a request that continued ``before`` does; what it makes."""
    after = before.grown(record)
    assert after is not None
    await history.keep(record, before=before, after=after, store_requested=store)
    return after


async def test_only_a_store_keeps_records_building_on_an_earlier_input() -> None:
    # A connection grows its conversations from each record's whole input; a gateway
    # without a store keeps nothing, and says so by keeping what it is given as kept.
    store = StoreHistory(MemoryResponseStore(ttl_seconds=None, max_entries=None))
    assert store.builds_on_inputs() is True
    assert ConnectionHistory(store).builds_on_inputs() is False
    nowhere = StoreHistory(None)
    assert nowhere.builds_on_inputs() is False
    assert await nowhere.keep(record(1), before=EMPTY, after=None, store_requested=True) is True
    assert await store.keep(record(2), before=EMPTY, after=None, store_requested=False) is True
    assert await store.store.get("resp_2") is None  # (store: false)


async def test_a_connection_continues_its_own_responses_without_the_store() -> None:
    history = ConnectionHistory(StoreHistory(None))
    await keep(history, record(1), store=False)
    first = await history.conversation("resp_1", None)
    await keep(history, record(2, "resp_1"), first, store=False)
    assert texts(await history.conversation("resp_2", None)) == ["question 1", "answer 1", "question 2", "answer 2"]
    with pytest.raises(PreviousResponseNotFound):
        await history.conversation("resp_elsewhere", None)  # no store: not "needs a store", just unknown


async def test_a_connection_keeps_its_newest_responses_and_forgets_a_failed_one() -> None:
    history = ConnectionHistory(StoreHistory(None))
    for n in range(CONNECTION_RESPONSES_KEPT + 1):
        await keep(history, record(n), store=False)
    with pytest.raises(PreviousResponseNotFound):
        await history.conversation("resp_0", None)  # the oldest went
    await history.conversation("resp_1", None)  # used: now the newest
    await keep(history, record(99), store=False)
    assert texts(await history.conversation("resp_1", None)) == ["question 1", "answer 1"]
    history.forget("resp_1")
    with pytest.raises(PreviousResponseNotFound):
        await history.conversation("resp_1", None)
    history.forget("resp_1")  # a failed continuation of a response the connection no longer has (or never had:
    history.forget("resp_stored")  # one from the store): nothing to forget, and the connection goes on
    assert texts(await history.conversation("resp_99", None)) == ["question 99", "answer 99"]


async def test_the_store_keeps_only_what_may_be_stored_and_backs_the_connection() -> None:
    store = MemoryResponseStore(ttl_seconds=None, max_entries=None)
    await keep(ConnectionHistory(StoreHistory(store)), record(1), store=True)
    await keep(ConnectionHistory(StoreHistory(store)), record(2), store=False)
    assert await store.get("resp_1") is not None and await store.get("resp_2") is None
    another_connection = ConnectionHistory(StoreHistory(store))
    assert texts(await another_connection.conversation("resp_1", None)) == ["question 1", "answer 1"]
    with pytest.raises(PreviousResponseNotFound):
        await another_connection.conversation("resp_2", None)


async def test_what_a_connection_keeps_the_store_history_holds_parsed_for_every_other_continuation() -> None:
    stored = StoreHistory(MemoryResponseStore(ttl_seconds=None, max_entries=None))
    after = await keep(ConnectionHistory(stored), record(1), store=True)
    assert await stored.conversation("resp_1", None) is after  # over HTTP, or another connection
    assert (stored.known.continued, stored.known.read) == (1, 0)


async def test_without_a_store_http_continuations_say_so() -> None:
    with pytest.raises(RequestError, match="response store"):
        await StoreHistory(None).conversation("resp_1", None)


async def test_a_stored_response_is_continued_by_its_owner_only() -> None:
    store = MemoryResponseStore(ttl_seconds=None, max_entries=None)
    mine = StoredResponse.from_exchange(
        {"id": "resp_7", "created_at": 7, "output": []}, "question 7", owner="key:alice"
    )
    await store.put(mine)
    history = ConnectionHistory(StoreHistory(store))
    assert texts(await history.conversation("resp_7", "key:alice")) == ["question 7"]
    for stranger in ("key:bob", None):
        with pytest.raises(PreviousResponseNotFound):
            await history.conversation("resp_7", stranger)
        with pytest.raises(PreviousResponseNotFound):
            await StoreHistory(store).conversation("resp_7", stranger)


async def test_a_stored_conversation_is_continued_from_what_was_kept_while_the_store_holds_its_chain() -> None:
    store = MemoryResponseStore(ttl_seconds=None, max_entries=None)
    history = StoreHistory(store, KnownConversations())
    first = await keep(history, record(1), store=True)
    second = await keep(history, record(2, "resp_1"), await history.conversation("resp_1", None), store=True)
    assert await history.conversation("resp_2", None) is second  # nothing read or parsed again
    assert texts(second) == ["question 1", "answer 1", "question 2", "answer 2"]
    assert second.chain == ("resp_1", "resp_2") and second.walked is not None
    assert len(history.known) == 1  # the conversation it continued went when it was kept
    assert (history.known.continued, history.known.read) == (2, 0)
    parsed_again = await StoreHistory(store, KnownConversations()).conversation("resp_2", None)  # another gateway
    assert parsed_again.items == second.items and parsed_again.chain == second.chain
    again = await history.conversation("resp_1", None)  # no longer kept: read from the store again
    assert again is not first and (again.items, again.chain) == (first.items, first.chain)
    await store.delete("resp_1")  # the chain has a gap now: what was kept is not used
    with pytest.raises(PreviousResponseNotFound) as gone:
        await history.conversation("resp_2", None)
    assert gone.value.missing_id == "resp_1"
    await store.delete("resp_2")  # the response itself gone: not found, though it was kept
    with pytest.raises(PreviousResponseNotFound) as itself:
        await history.conversation("resp_2", None)
    assert itself.value.missing_id == "resp_2" and itself.value.message == "Previous response with id 'resp_2' not found."


@pytest.mark.parametrize("owner", [None, "key:alice"])
async def test_a_conversation_kept_a_few_responses_before_is_caught_up_on_them_alone(owner: str | None) -> None:
    # Another gateway behind the same store answered the turns after the one kept here.
    store = MemoryResponseStore(ttl_seconds=None, max_entries=None)
    here, there = StoreHistory(store, KnownConversations()), StoreHistory(store, KnownConversations())
    first = await keep(here, record(1, owner=owner), store=True)
    before = first
    for n in (2, 3):
        continued = await there.conversation(f"resp_{n - 1}", owner)
        before = await keep(there, record(n, f"resp_{n - 1}", owner), continued, store=True)
    caught_up = await here.conversation("resp_3", owner)
    assert texts(caught_up) == texts(before) and caught_up.chain == ("resp_1", "resp_2", "resp_3")
    assert caught_up.walked is first.walked  # the translation resumes from what it derived then
    assert first.weight < caught_up.weight < 2 * before.weight  # an estimate, as its own would be
    assert (here.known.continued, here.known.caught_up, here.known.read) == (0, 1, 0)
    assert here.known.get("resp_1", owner) is None and here.known.get("resp_3", owner) is caught_up  # in its place
    assert await here.conversation("resp_3", owner) is caught_up  # kept, so continued as its own
    assert (here.known.continued, here.known.caught_up, here.known.read) == (1, 1, 0)
    await keep(there, record(4, "resp_3", owner), await there.conversation("resp_3", owner), store=True)
    assert (await here.conversation("resp_4", owner)).chain == ("resp_1", "resp_2", "resp_3", "resp_4")
    assert (here.known.continued, here.known.caught_up, here.known.read) == (1, 2, 0)  # and again
    await store.put(record(5, "resp_4", owner))
    await store.delete("resp_4")  # a response caught up on is gone: the store's walk says which
    with pytest.raises(PreviousResponseNotFound) as gone:
        await here.conversation("resp_5", owner)
    assert gone.value.missing_id == "resp_4" and here.known.caught_up == 2


async def test_a_conversation_kept_too_long_before_or_by_another_owner_is_read_whole() -> None:
    store = MemoryResponseStore(ttl_seconds=None, max_entries=None)
    here, there = StoreHistory(store, KnownConversations()), StoreHistory(store, KnownConversations())
    await keep(here, record(0), store=True)
    last = CATCH_UP_RESPONSES + 1
    for n in range(1, last + 1):
        await keep(there, record(n, f"resp_{n - 1}"), await there.conversation(f"resp_{n - 1}", None), store=True)
    assert len((await here.conversation(f"resp_{last}", None)).chain) == last + 1
    assert (here.known.caught_up, here.known.read) == (0, 1)  # one response too many to catch up on
    assert len((await here.conversation(f"resp_{last - 1}", None)).chain) == last  # exactly as many: caught up
    assert (here.known.caught_up, here.known.read) == (1, 1)
    known = KnownConversations()
    mine = EMPTY.grown(StoredResponse.from_exchange({"id": "resp_a", "created_at": 1, "output": []}, "q", owner="key:a"))
    assert mine is not None
    known.keep("key:a", mine, replacing=EMPTY)
    assert known.kept_before(("resp_a", "resp_b"), "key:a") is mine
    assert known.kept_before(("resp_a", "resp_b"), "key:b") is None  # another owner's
    assert known.kept_before(("resp_z", "resp_a", "resp_b"), "key:a") is None  # another chain through that id
    assert known.kept_before(("resp_a",), "key:a") is None  # the chain itself is no continuation of it


async def test_a_kept_conversation_is_its_owners_only() -> None:
    store = MemoryResponseStore(ttl_seconds=None, max_entries=None)
    history = StoreHistory(store, KnownConversations())
    mine = StoredResponse.from_exchange({"id": "resp_7", "created_at": 7, "output": []}, "question 7", owner="key:alice")
    kept = await keep(history, mine, store=True)
    assert await history.conversation("resp_7", "key:alice") is kept  # continued from what was kept
    assert (history.known.continued, history.known.read) == (1, 0)
    for stranger in ("key:bob", None):
        assert history.known.get("resp_7", stranger) is None
        with pytest.raises(PreviousResponseNotFound):
            await history.conversation("resp_7", stranger)


def test_the_kept_conversations_are_bounded_in_entries_and_in_bytes() -> None:
    conversations = [EMPTY.grown(record(n)) for n in range(5)]
    assert all(conversation is not None for conversation in conversations)
    weight = conversations[0].weight  # type: ignore[union-attr]
    assert weight > 10 * len(b'"question 0"')
    by_entries = KnownConversations(max_entries=2)
    by_bytes = KnownConversations(max_bytes=3 * weight)
    for conversation in conversations:
        by_entries.keep(None, conversation, replacing=EMPTY)  # type: ignore[arg-type]
        by_bytes.keep(None, conversation, replacing=EMPTY)  # type: ignore[arg-type]
    assert [n for n in range(5) if by_entries.get(f"resp_{n}", None)] == [3, 4]
    assert [n for n in range(5) if by_bytes.get(f"resp_{n}", None)] == [2, 3, 4]
    assert by_bytes.weight == 3 * weight
    nothing = KnownConversations(max_bytes=0)
    nothing.keep(None, conversations[0], replacing=EMPTY)  # type: ignore[arg-type]
    assert len(nothing) == 0 and nothing.weight == 0


def test_the_bounds_of_the_kept_conversations_are_inclusive_and_default_to_256_entries() -> None:
    conversations = [EMPTY.grown(record(n)) for n in range(258)]
    assert all(conversation is not None for conversation in conversations)
    weight = conversations[0].weight  # type: ignore[union-attr]
    exactly = KnownConversations(max_bytes=weight)
    exactly.keep(None, conversations[0], replacing=EMPTY)  # type: ignore[arg-type]
    one = KnownConversations(max_entries=1)
    one.keep(None, conversations[0], replacing=EMPTY)  # type: ignore[arg-type]
    fresh = KnownConversations()
    for conversation in conversations[1:]:
        fresh.keep(None, conversation, replacing=EMPTY)  # type: ignore[arg-type]
    assert (len(exactly), len(one), len(fresh)) == (1, 1, 256)
    assert fresh.get("resp_1", None) is None and fresh.get("resp_2", None) is not None


def test_a_continuation_too_heavy_to_keep_leaves_the_conversation_it_continues() -> None:
    first = EMPTY.grown(record(1))
    assert first is not None
    known = KnownConversations(max_bytes=first.weight + 1)
    known.keep(None, first, replacing=EMPTY)
    second = first.grown(record(2, "resp_1"))
    assert second is not None and second.weight > known.max_bytes
    known.keep(None, second, replacing=first)
    assert known.get("resp_1", None) is first and known.get("resp_2", None) is None


def test_a_continuation_replaces_the_conversation_it_continues() -> None:
    known = KnownConversations()
    first, other = EMPTY.grown(record(1)), EMPTY.grown(record(9))
    assert first is not None and other is not None
    known.keep(None, first, replacing=EMPTY)
    known.keep(None, other, replacing=EMPTY)
    second = first.grown(record(2, "resp_1"))
    assert second is not None and second.weight > first.weight
    known.keep(None, second, replacing=first)
    assert known.get("resp_1", None) is None and known.get("resp_2", None) is second
    assert known.weight == other.weight + second.weight
    retried = first.grown(record(3, "resp_1"))  # a turn retried from resp_1 (read from the store)
    assert retried is not None
    known.keep(None, retried, replacing=first)  # replaces nothing: resp_1 went already
    assert [n for n in (1, 2, 3, 9) if known.get(f"resp_{n}", None)] == [2, 3, 9]
    again = EMPTY.grown(record(2))  # resp_2 kept again (a retried write): the newest counts, once
    assert again is not None
    known.keep(None, again, replacing=EMPTY)
    assert known.get("resp_2", None) is again
    assert known.weight == again.weight + retried.weight + other.weight


async def test_a_stored_item_that_does_not_parse_is_named_by_its_place_in_the_continuing_request() -> None:
    store = MemoryResponseStore(ttl_seconds=None, max_entries=None)
    await store.put(record(1))
    await store.put(unparsable(2, "resp_1"))
    with pytest.raises(RequestError, match=r"input\[3\]"):  # question 1, answer 1, question 2, then the bad answer
        await StoreHistory(store, KnownConversations()).conversation("resp_2", None)


async def test_a_conversation_caught_up_over_an_item_that_does_not_parse_is_read_whole_and_says_where() -> None:
    store = MemoryResponseStore(ttl_seconds=None, max_entries=None)
    here = StoreHistory(store, KnownConversations())
    await keep(here, record(1), store=True)
    await store.put(unparsable(2, "resp_1"))
    await store.put(record(3, "resp_2"))  # answered elsewhere after the bad one
    with pytest.raises(RequestError, match=r"input\[3\]"):
        await here.conversation("resp_3", None)
    assert (here.known.caught_up, here.known.read) == (0, 1)


async def test_a_conversation_read_from_the_store_weighs_what_its_growing_would() -> None:
    store = MemoryResponseStore(ttl_seconds=None, max_entries=None)
    grown = EMPTY
    for n in range(1, 6):
        stored = record(n, f"resp_{n - 1}" if n > 1 else None)
        next_one = grown.grown(stored)
        assert next_one is not None
        grown = next_one
        await store.put(stored)
    read = await StoreHistory(store, KnownConversations()).conversation("resp_5", None)
    assert read.items == grown.items and read.walked is None
    assert 0.9 * grown.weight <= read.weight <= 1.1 * grown.weight  # an estimate of the same bytes


def test_a_conversation_whose_output_is_not_an_item_is_not_kept_parsed() -> None:
    assert EMPTY.grown(unparsable(1)) is None
