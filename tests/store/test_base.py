"""The pure parts of the store seam: records, item ids, the conversation, the errors."""

from __future__ import annotations

from typing import Any

import pytest

import toolwire.store
from toolwire.errors import NotFoundError, RequestError, ToolwireError
from toolwire.store import (
    MAX_CHAIN_LENGTH,
    InputNotWhole,
    PreviousResponseNotFound,
    StoredResponse,
    StoreUnavailable,
    stored_items,
)
from toolwire.store._base import (
    check_chain_length,
    conversation_of,
    decode_record,
    encode_record,
    spliced,
)

from .records import exchange, response_object


def test_public_api() -> None:
    assert sorted(toolwire.store.__all__) == [
        "DEFAULT_MAX_BYTES",
        "DEFAULT_MAX_ENTRIES",
        "DEFAULT_REDIS_KEY_PREFIX",
        "DEFAULT_REDIS_SOCKET_TIMEOUT_SECONDS",
        "DEFAULT_STORE_URL",
        "DEFAULT_TTL_SECONDS",
        "InputNotWhole",
        "ItemDict",
        "MAX_CHAIN_LENGTH",
        "MAX_INPUT_BASES",
        "MemoryResponseStore",
        "PreviousResponseNotFound",
        "RedisServer",
        "ResponseStore",
        "SQLiteFile",
        "SQLiteResponseStore",
        "StoreUnavailable",
        "StoredResponse",
        "connect_sqlite",
        "default_sqlite_path",
        "open_store",
        "redact_url",
        "sqlite_path",
        "stored_items",
        "write_transaction",
    ]


def test_a_record_is_visible_to_its_owner_only() -> None:
    mine = StoredResponse.from_exchange(response_object("resp_1", "answer"), "question", owner="key:abc")
    assert decode_record(encode_record(mine)).owner == "key:abc"
    assert mine.visible_to("key:abc")
    assert not mine.visible_to("key:abd") and not mine.visible_to(None)
    anonymous = StoredResponse.from_exchange(response_object("resp_2", "answer"), "question")
    assert anonymous.visible_to(None) and not anonymous.visible_to("key:abc")


def test_from_exchange_takes_id_time_and_output_from_the_response() -> None:
    record = StoredResponse.from_exchange(
        response_object("resp_2", "answer", previous="resp_1"), "question", previous_response_id="resp_1"
    )
    assert record.id == "resp_2"
    assert record.created_at == 1_760_000_000
    assert record.previous_response_id == "resp_1"
    assert [item["type"] for item in record.output_items] == ["message"]
    [message] = record.input_items
    assert message == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "question"}],
        "id": message["id"],
    }


def test_short_hand_messages_are_stored_in_full_form() -> None:
    items: list[dict[str, Any]] = [
        {"role": "developer", "content": "be brief"},
        {"role": "assistant", "content": "earlier answer"},
        {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]},
    ]
    developer, assistant, image = StoredResponse.from_exchange(response_object("resp_1", "a"), items).input_items
    assert developer["content"] == [{"type": "input_text", "text": "be brief"}] and "status" not in developer
    assert assistant["content"] == [{"type": "output_text", "text": "earlier answer", "annotations": []}]
    assert assistant["status"] == "completed" and assistant["type"] == "message"
    assert image["content"] == items[2]["content"]


def test_input_items_without_an_id_get_one_by_type_and_keep_theirs() -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "message", "id": "msg_mine", "role": "user", "content": "kept"},
        {"type": "item_reference", "id": "rs_abc"},
        {"type": "something_new", "x": 1},
    ]
    record = StoredResponse.from_exchange(response_object("resp_1", "a"), items)
    ids = [item["id"] for item in record.input_items]
    assert [item_id.split("_")[0] for item_id in ids] == ["msg", "fc", "fco", "msg", "rs", "item"]
    assert ids[3] == "msg_mine" and ids[4] == "rs_abc"
    assert len(set(ids)) == len(ids)
    assert items[0] == {"role": "user", "content": "hi"}  # the caller's items are not changed
    assert StoredResponse.from_exchange(response_object("resp_1", "a"), items) == record  # reproducible
    other = StoredResponse.from_exchange(response_object("resp_2", "a"), items)
    assert other.input_items[0]["id"] != ids[0]


def test_the_previous_response_id_defaults_to_the_response_objects_own() -> None:
    record = StoredResponse.from_exchange(response_object("resp_2", "answer", previous="resp_1"), "q")
    assert record.previous_response_id == "resp_1"
    assert StoredResponse.from_exchange(response_object("resp_1", "a"), "q").previous_response_id is None


def test_a_response_without_an_id_cannot_be_stored() -> None:
    with pytest.raises(ValueError, match="no id"):
        StoredResponse.from_exchange({"object": "response", "output": []}, "hi")


def test_a_response_cannot_continue_itself() -> None:
    with pytest.raises(ValueError, match="cannot continue itself"):
        exchange("resp_1", "hi", previous="resp_1")


def test_a_record_builds_on_a_previous_response_or_on_an_input_never_both() -> None:
    with pytest.raises(ValueError, match="'resp_2' builds on a previous response and on an input at once"):
        StoredResponse.from_exchange(response_object("resp_2", "a"), "hi", previous_response_id="resp_1", input_base="resp_0")
    with pytest.raises(ValueError, match="cannot continue itself"):
        StoredResponse.from_exchange(response_object("resp_2", "a"), "hi", input_base="resp_2")


def test_a_record_building_on_an_input_numbers_its_items_after_it() -> None:
    # Its items get the ids the whole input would have given them at their places.
    whole = [{"role": "user", "content": f"q{n}"} for n in range(5)]
    built = StoredResponse.from_exchange(response_object("resp_2", "a"), whole[3:], input_base="resp_1", items_before=3)
    assert built.input_items == stored_items(whole, "resp_2")[3:]
    assert built.link == "resp_1" and exchange("resp_3", "q", previous="resp_2").link == "resp_2"
    assert decode_record(encode_record(built)) == built


def test_splicing_gives_a_record_the_items_of_the_one_it_builds_on() -> None:
    base = StoredResponse.from_exchange(response_object("resp_1", "a"), "q1", input_base="resp_0")
    later = StoredResponse.from_exchange(response_object("resp_2", "b"), "q2", input_base="resp_1", items_before=1)
    whole = spliced(later, base)
    assert (whole.input_base, whole.input_items) == ("resp_0", (*base.input_items, *later.input_items))
    with pytest.raises(ValueError, match="response 'resp_1' does not build on 'resp_2'"):
        spliced(base, later)


def test_input_not_whole_keeps_both_ids() -> None:
    gone = InputNotWhole("resp_3", "resp_1")
    assert (gone.response_id, gone.missing_id) == ("resp_3", "resp_1")


def test_records_round_trip_through_their_encoding() -> None:
    record = exchange("resp_2", "héllo 🌍", previous="resp_1")
    assert decode_record(encode_record(record)) == record


def test_the_conversation_is_each_input_then_its_output_oldest_first() -> None:
    first, second = exchange("resp_1", "one"), exchange("resp_2", "two", previous="resp_1")
    assert conversation_of([first, second]) == [
        *first.input_items, *first.output_items, *second.input_items, *second.output_items,
    ]  # fmt: skip


def test_stored_items_are_what_the_record_of_the_exchange_keeps() -> None:
    own = [{"role": "user", "content": "two"}, {"type": "function_call_output", "call_id": "c1", "output": "ok"}]
    record = StoredResponse.from_exchange(response_object("resp_2", "answer"), own)
    assert stored_items(own, "resp_2") == record.input_items
    assert stored_items("two", "resp_2") == StoredResponse.from_exchange(response_object("resp_2", "a"), "two").input_items
    assert stored_items(own, "resp_3") != record.input_items  # the ids come from the response's
    assert own == [{"role": "user", "content": "two"}, {"type": "function_call_output", "call_id": "c1", "output": "ok"}]


def test_previous_response_not_found_is_an_openai_shaped_404() -> None:
    error = PreviousResponseNotFound("resp_x")
    assert isinstance(error, NotFoundError) and error.status == 404
    assert error.to_body() == {
        "error": {
            "message": "Previous response with id 'resp_x' not found.",
            "type": "not_found_error",
            "param": "previous_response_id",
            "code": "previous_response_not_found",
        }
    }
    gap = PreviousResponseNotFound("resp_x", "resp_a")
    assert gap.missing_id == "resp_a" and "expired or was deleted" in gap.message


def test_store_unavailable_is_a_503_of_its_own() -> None:
    error = StoreUnavailable("The response store redis://cache:6379/0 is unreachable.")
    assert isinstance(error, ToolwireError) and not isinstance(error, NotFoundError)
    assert error.status == 503
    assert error.to_body()["error"] == {
        "message": "The response store redis://cache:6379/0 is unreachable.",
        "type": "service_unavailable",
        "param": None,
        "code": "store_unavailable",
    }


def test_a_chain_longer_than_the_guard_is_refused() -> None:
    check_chain_length("resp_x", MAX_CHAIN_LENGTH)
    with pytest.raises(RequestError) as caught:
        check_chain_length("resp_x", MAX_CHAIN_LENGTH + 1)
    assert caught.value.code == "previous_response_chain_too_long"


# What this version writes: every gateway process sharing a store (older and newer ones
# too) reads these bytes, and derives these ids for the same exchange.
WRITTEN = (
    b'{"v":1,"id":"resp_g","created_at":1700000000,"previous_response_id":null,'
    b'"response":{"id":"resp_g","created_at":1700000000,"output":[]},"input_items":['
    b'{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}],'
    b'"id":"msg_9c1ac467b3532a8d3a3ccaf5db945fb8"},'
    b'{"type":"function_call_output","call_id":"c","output":"x","id":"fco_cd46a41d29b1d6a73d2a223192474b29"}],'
    b'"owner":"key:k1"}'
)


def test_the_stored_form_is_the_one_every_process_reads() -> None:
    record = StoredResponse.from_exchange(
        {"id": "resp_g", "created_at": 1700000000, "output": []},
        [{"role": "user", "content": "hi"}, {"type": "function_call_output", "call_id": "c", "output": "x"}],
        owner="key:k1",
    )
    assert encode_record(record) == WRITTEN
    assert decode_record(WRITTEN) == record


def test_items_without_an_id_each_get_their_own() -> None:
    record = StoredResponse.from_exchange(response_object("resp_1", "a"), [{"role": "user", "content": "x"}] * 3)
    ids = [item["id"] for item in record.input_items]
    assert len(set(ids)) == 3


@pytest.mark.parametrize("response_id", [None, "", 123])
def test_a_response_without_a_string_id_cannot_be_stored(response_id: object) -> None:
    with pytest.raises(ValueError) as caught:
        StoredResponse.from_exchange({"id": response_id, "output": []}, "question")
    assert str(caught.value) == "the response object has no id"


def test_a_record_needs_an_id() -> None:
    with pytest.raises(ValueError) as caught:
        StoredResponse(id="", created_at=0, response={}, input_items=())
    assert str(caught.value) == "a stored response needs an id"


def test_the_previous_response_given_wins_over_the_response_objects() -> None:
    record = StoredResponse.from_exchange(
        response_object("resp_3", "a", previous="resp_1"), "q", previous_response_id="resp_2"
    )
    assert record.previous_response_id == "resp_2"


@pytest.mark.parametrize("created_at", [None, "yesterday"])
def test_a_response_without_a_time_is_stored_at_zero(created_at: object) -> None:
    record = StoredResponse.from_exchange({"id": "resp_1", "created_at": created_at, "output": []}, "q")
    assert record.created_at == 0


def test_a_chain_too_long_names_where_it_ends() -> None:
    with pytest.raises(RequestError) as caught:
        check_chain_length("resp_x", MAX_CHAIN_LENGTH + 1)
    assert caught.value.to_body()["error"] == {
        "message": f"The chain of previous responses ending at 'resp_x' is longer than {MAX_CHAIN_LENGTH} responses.",
        "type": "invalid_request_error",
        "param": "previous_response_id",
        "code": "previous_response_chain_too_long",
    }


def test_previous_response_not_found_keeps_both_ids() -> None:
    error = PreviousResponseNotFound("resp_x", "resp_a")
    assert (error.previous_response_id, error.missing_id) == ("resp_x", "resp_a")
    assert error.message == (
        "Previous response with id 'resp_x' cannot be continued: "
        "the earlier response 'resp_a' in its chain expired or was deleted."
    )
