"""Known histories: a body resending a history seen before is parsed only past it, and
nothing else changes.

What must hold: the request is equal to the one parsing the whole body gives (fields,
items, dump), the history is really continued where it can be (``history().known``),
any body that is unusual in any way (edited, truncated, a repeated ``input`` key, a
trailing comma, written otherwise than orjson writes it) is parsed whole, and errors
are the whole body's, with their exact place. The cache is bounded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from toolwire.errors import RequestError
from toolwire.protocol import (
    KNOWN_HISTORIES,
    CompactionItem,
    CompactionTriggerItem,
    KnownHistories,
    ReasoningItem,
    ResponsesRequest,
    dump_item,
    parse_request,
)
from toolwire.protocol._base import WireModel
from toolwire.protocol._depth import MAX_JSON_DEPTH
from toolwire.protocol._history import WEIGHT_PER_BODY_BYTE, RequestShell, _hint

JSON = dict[str, Any]
TOOLS = [{"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {}}}]


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def call(n: int) -> dict[str, Any]:
    return {"type": "function_call", "call_id": f"c{n}", "name": "exec_command", "arguments": '{"cmd":"ls"}'}


def output(n: int, text: str = "a.txt\nb.txt\n") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": f"c{n}", "output": text}


def turns(count: int) -> list[dict[str, Any]]:
    items = [user("list the files")]
    for n in range(count):
        items += [call(n), output(n)]
    return items


def body(items: list[Any], **fields: Any) -> bytes:
    """A body as Codex writes it: model and stream first, the input, then the rest."""
    return orjson.dumps({"model": "m", "stream": True, "input": items, "tools": TOOLS, **fields})


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[KnownHistories]:
    KNOWN_HISTORIES.clear()
    yield KNOWN_HISTORIES
    KNOWN_HISTORIES.configure(256, 128 * 1024 * 1024)
    KNOWN_HISTORIES.clear()


def whole(raw: bytes) -> ResponsesRequest:
    """The request parsing ``raw`` whole gives (no known history, no kept tool lists)."""
    return parse_request(orjson.loads(raw))


def known(request: ResponsesRequest) -> int:
    link = request.history()
    assert link is not None
    return link.known


def assert_same(raw: bytes) -> ResponsesRequest:
    request = parse_request(raw)
    expected = whole(raw)
    assert request == expected
    assert request.dump() == expected.dump() == orjson.loads(raw)
    return request


def error_of(raw: bytes | dict[str, Any]) -> tuple[str, str | None, str | None, int]:
    with pytest.raises(RequestError) as caught:
        parse_request(raw)
    return caught.value.message, caught.value.param, caught.value.code, caught.value.status


# ---------------------------------------------------------------- a growing conversation


def test_each_turn_continues_the_one_before() -> None:
    continued = KNOWN_HISTORIES.continued
    previous = 0
    for count in range(6):
        request = assert_same(body(turns(count)))
        assert known(request) == previous
        previous = len(request.input_items())
    assert KNOWN_HISTORIES.continued - continued == 5
    assert len(KNOWN_HISTORIES) == 1  # each turn's history replaces the one it continues


def test_a_body_sent_again_continues_its_own_history() -> None:
    raw = body(turns(3))
    first = assert_same(raw)
    again = assert_same(raw)
    assert known(first) == 0 and known(again) == len(turns(3))
    assert again.history().continues is first.history().own  # type: ignore[union-attr]


def test_the_fields_after_the_input_may_change_freely() -> None:
    parse_request(body(turns(1), prompt_cache_key="thread-1"))
    request = assert_same(
        body(turns(2), tools=[*TOOLS, {"type": "web_search"}], prompt_cache_key="thread-1", client_metadata={"turn": 2})
    )
    assert known(request) == len(turns(1))
    assert request.tools is not None and len(request.tools) == 2


def test_histories_are_looked_for_among_those_of_the_same_prompt_cache_key() -> None:
    for thread in range(20):
        parse_request(body([user(f"thread {thread}")], prompt_cache_key=f"thread-{thread}"))
    assert known(assert_same(body([user("thread 7"), user("more")], prompt_cache_key="thread-7"))) == 1
    # the same history under another key (a fork given a new thread id) is parsed whole
    assert known(assert_same(body([user("thread 8"), user("more")], prompt_cache_key="thread-9"))) == 0
    assert known(assert_same(body([user("thread 8"), user("more")]))) == 0  # no key at all
    parse_request(body([user("no key")]))
    assert known(assert_same(body([user("no key"), user("more")]))) == 1


def test_a_body_naming_its_previous_response_keeps_no_history() -> None:
    """Over a WebSocket (and with the SDK's ``store: true``) each turn sends its new items
    and names the response it continues: no later body starts with its bytes."""
    learned = KNOWN_HISTORIES.learned
    first = assert_same(body(turns(3), prompt_cache_key="thread-1"))
    for turn in range(20):
        request = assert_same(body([user(f"go on {turn}")], prompt_cache_key="thread-1", previous_response_id=f"resp_{turn}"))
        assert request.history() is None
    assert len(KNOWN_HISTORIES) == 1 and KNOWN_HISTORIES.learned - learned == 1
    # the history of the body that named none is continued as before
    assert known(assert_same(body([*turns(3), user("more")], prompt_cache_key="thread-1"))) == len(turns(3))
    assert first.history() is not None


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(lambda items: [user("something else"), *items[1:]], id="first item edited"),
        pytest.param(lambda items: [*items[:-3], {**items[-3], "arguments": "{}"}, *items[-2:]], id="last call edited"),
        pytest.param(lambda items: items[:-2], id="truncated"),
        pytest.param(lambda items: [user("summary of what came before"), *items[-2:]], id="compacted"),
    ],
)
def test_an_edited_or_shorter_history_is_parsed_whole(changed: Any) -> None:
    parse_request(body(turns(3)))
    request = assert_same(body([*changed(turns(3)), user("next")]))
    assert known(request) == 0


def test_another_model_or_field_before_the_input_is_another_history() -> None:
    parse_request(body(turns(2)))
    assert known(assert_same(body(turns(3), model="other"))) == 0  # "model" is rewritten in place, before the input
    instructions = orjson.dumps({"model": "m", "instructions": "be brief", "input": turns(3)})
    assert known(assert_same(instructions)) == 0


def test_two_clients_sharing_a_prefix_each_get_their_own_items() -> None:
    parse_request(body(turns(2)))
    mine = assert_same(body([*turns(2), user("mine")]))
    theirs = assert_same(body([*turns(2), user("theirs")]))
    assert known(mine) == len(turns(2))
    assert mine.input_items()[-1] != theirs.input_items()[-1]


def test_the_longest_known_history_is_continued() -> None:
    parse_request(body(turns(1)))
    parse_request(body([*turns(1), user("a fork")]))  # continues turns(1), which it replaces
    parse_request(body(turns(1)))  # known again, on its own
    request = assert_same(body([*turns(1), user("a fork"), user("more")]))
    assert known(request) == len(turns(1)) + 1


# ---------------------------------------------------------------- bodies that must be parsed whole


def test_a_client_writing_json_otherwise_is_parsed_whole_every_time() -> None:
    spaced = b'{"model": "m", "input": [' + b", ".join(orjson.dumps(item) for item in turns(2)) + b"]}"
    for _ in range(2):
        request = assert_same(spaced)
        assert request.history() is None
    escaped = body(turns(2)).replace(b'"list the files"', b'"list the \\u0066iles"')
    for _ in range(2):
        assert assert_same(escaped).history() is None
    # written otherwise, though what orjson writes would end where a "]" stands: the items
    # (one with four blanks before it, its text ending "]x") ...
    shifted = b'{"model":"m","input":[    {"type":"message","role":"user","content":"]x"}],"stream":true}'
    # ... or the fields before the input (a number spelled otherwise, in as many bytes)
    respelled = b'{"model":"m","top_p":1e0,"input":' + orjson.dumps(turns(1)) + b"}"
    for raw in (shifted, respelled):
        for _ in range(2):
            assert assert_same(raw).history() is None


def test_a_trailing_comma_after_known_items_is_the_whole_body_error() -> None:
    parse_request(body(turns(2)))
    raw = body(turns(2)).replace(b'],"tools"', b',],"tools"', 1)
    assert raw != body(turns(2))
    with pytest.raises(RequestError) as caught:
        parse_request(raw)
    assert caught.value.code == "invalid_json"


def test_a_body_cut_after_known_items_is_the_whole_body_error() -> None:
    raw = body(turns(2))
    parse_request(raw)
    end = raw.index(b',"tools"')
    for cut in (raw[:end], raw[: end - 1], raw[:end] + b",", raw[:end] + b',{"type"'):
        with pytest.raises(RequestError) as caught:
            parse_request(cut)
        assert caught.value.code == "invalid_json"


@pytest.mark.parametrize("key", [b'"input"', b'"\\u0069nput"'])
def test_a_second_input_key_replaces_the_whole_array_as_it_does_without_the_cache(key: bytes) -> None:
    parse_request(body(turns(2)))
    items = turns(3)
    # the new items repeated, exactly as written, under a second input key
    new = b",".join(orjson.dumps(item) for item in items[len(turns(2)) :])
    raw = body(items)[:-1] + b"," + key + b":[" + new + b"]}"
    request = assert_same(raw)
    assert len(request.input_items()) == 2
    assert request.history() is None or known(request) == 0


@pytest.mark.parametrize("comma", [b",", b" ,", b"\n,"])
def test_a_body_whose_fields_after_the_input_repeat_it_keeps_them_from_no_later_turn(comma: bytes) -> None:
    items = b",".join(orjson.dumps(item) for item in turns(1))
    repeated = comma + b'"input":[' + items + b"]}"
    learned = body(turns(1))[:-1] + repeated  # the same array twice: what it decodes to is known
    assert len(assert_same(learned).input_items()) == len(turns(1))
    raw = body(turns(2))[:-1] + repeated  # more items in the first array: the second one replaces them
    assert len(assert_same(raw).input_items()) == len(turns(1))
    # The same with a blank after the first array, where orjson writes none (so the fields after it are decoded)
    spaced = orjson.dumps({"model": "m", "input": turns(1)})[:-1] + b" " + comma + b'"input":[' + items + b"]}"
    assert len(assert_same(spaced).input_items()) == len(turns(1))
    grown = orjson.dumps({"model": "m", "input": turns(2)})[:-1] + b" " + comma + b'"input":[' + items + b"]}"
    assert len(assert_same(grown).input_items()) == len(turns(1))
    # Kept with no shell; the same items with plain fields after them continue it.
    plain = assert_same(body(turns(1)))
    link = plain.history()
    assert link is not None and link.continues is not None and link.continues.shell is None
    assert known(plain) == len(turns(1)) and link.own is link.continues


def test_an_invalid_new_item_is_reported_at_its_place_in_the_whole_body() -> None:
    parse_request(body(turns(2)))
    bad = {**call(9), "arguments": {"cmd": "ls"}}
    raw = body([*turns(2), bad])
    assert error_of(raw) == error_of(orjson.loads(raw))
    assert error_of(raw)[1] == f"input[{len(turns(2))}].arguments"


def test_a_new_item_nested_too_deep_is_the_whole_body_error() -> None:
    parse_request(body(turns(2)))
    deep: Any = "x"
    for _ in range(MAX_JSON_DEPTH):
        deep = [deep]
    raw = body([*turns(2), {**output(1), "output": deep}])
    assert error_of(raw)[2] == "too_deep"
    assert error_of(raw) == error_of(orjson.loads(raw))


def test_items_written_with_any_characters_are_continued() -> None:
    text = 'quote " backslash \\ newline \n tab \t bell \x07 escape \x1b del \x7f é 漢 \U0001f600 \u2028'
    parse_request(body([user(text)]))
    request = assert_same(body([user(text), user(text)]))
    assert known(request) == 1


def test_input_as_the_first_field_and_an_empty_input() -> None:
    first = orjson.dumps({"input": [], "model": "m"})
    assert_same(first)
    assert known(assert_same(first)) == 0  # an empty history continued: nothing new
    items = orjson.dumps({"input": turns(1), "model": "m"})
    assert_same(items)
    assert known(assert_same(orjson.dumps({"input": turns(2), "model": "m"}))) == len(turns(1))


def test_a_string_input_has_no_history() -> None:
    raw = orjson.dumps({"model": "m", "input": "hi"})
    assert assert_same(raw).history() is None
    assert assert_same(raw).history() is None


def test_a_body_given_as_a_dict_or_str_has_no_history() -> None:
    parse_request(body(turns(2)))
    assert parse_request(orjson.loads(body(turns(3)))).history() is None
    assert parse_request(body(turns(3)).decode()).history() is None


def test_items_given_other_items_lose_the_link() -> None:
    request = parse_request(body(turns(2)))
    assert request.history() is not None
    assert request.model_copy(update={"input": turns(1)}).history() is None
    assert request.model_copy().history() is not None


# ---------------------------------------------------------------- the fields after the input


def test_a_turn_with_the_same_fields_after_the_input_has_only_its_new_items_decoded_and_validated() -> None:
    histories = KnownHistories()
    given: list[dict[str, Any]] = []

    def validate(data: dict[str, Any]) -> ResponsesRequest:
        given.append(data)
        return parse_request(data)

    # A tool with a parameter named "input", as Codex's apply_patch has: the fields then hold
    # the word, and are decoded once to make sure it is no second input key.
    patch = {"type": "function", "name": "apply_patch",
             "parameters": {"type": "object", "properties": {"input": {"type": "string"}}}}
    fields = {"tools": [*TOOLS, patch], "client_metadata": {"window": "w1"}, "prompt_cache_key": "t1"}
    first = parse_request(body(turns(1), **fields))  # learned by KNOWN_HISTORIES, whole
    assert first.history() is not None and first.history().own.shell is not None  # type: ignore[union-attr]
    histories.learn(body(turns(1), **fields), orjson.loads(body(turns(1), **fields)), first)
    raw = body(turns(3), **fields)
    request = histories.parse_continued(raw, validate)
    assert request == whole(raw) and request.dump() == orjson.loads(raw)
    assert given == [{"model": "m", "input": turns(3)[len(turns(1)) :]}]  # the new items alone
    again = histories.parse_continued(raw, validate)
    assert again == request and len(given) == 1  # nothing new: nothing decoded or validated
    link = again.history()
    assert link is not None and link.own is link.continues  # and the history it continues is its own
    changed = body(turns(3), **{**fields, "client_metadata": {"window": "w2"}})
    assert histories.parse_continued(changed, validate) == whole(changed)
    assert len(given) == 2 and given[-1]["client_metadata"] == {"window": "w2"}  # the new fields, validated
    assert histories.parse_continued(changed, validate) == whole(changed)
    assert len(given) == 2  # and kept for the next turn


def test_requests_made_from_one_shell_do_not_share_what_they_may_change() -> None:
    fields = {"tools": TOOLS, "metadata": {"k": "v"}}
    parse_request(body(turns(1), **fields))
    one = parse_request(body(turns(2), **fields))
    two = parse_request(body(turns(2), **fields))
    assert known(one) == len(turns(1)) and known(two) == len(turns(2))
    assert one.tools is not None and two.tools is not None and one.tools is not two.tools
    one.tools.clear()
    one.input.clear()  # type: ignore[union-attr]
    one.stream = False
    assert assert_same(body(turns(3), **fields)).tools == two.tools


def test_a_shell_keeps_no_history_alive() -> None:
    for count in range(4):
        request = parse_request(body(turns(count)))
    link = request.history()
    assert link is not None and link.own is not None and link.own.shell is not None
    assert link.own.shell.request.history() is None and link.own.shell.request.input == []
    assert link.own.shell.request.__pydantic_private__ == {"_history": None}
    linked = body(turns(4))
    shell = RequestShell.of(linked, len(linked) - 1, request)  # made from a request linked to its history
    assert shell is not None and shell.request.__pydantic_private__ == {"_history": None}


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param([{}, {"tools": TOOLS}, {}, {"tools": TOOLS}], id="fields come and go"),
        pytest.param([{"tools": TOOLS}, {"tools": [*TOOLS, *TOOLS]}, {"tools": TOOLS}], id="tools change and come back"),
        pytest.param([{"text": {"verbosity": "low"}}, {"text": {"verbosity": "high"}}], id="a value changes"),
        pytest.param([{}, {"x": "]}"}], id="a new field ending as the old body did"),
    ],
)
def test_each_turn_has_its_own_fields_after_the_input(fields: list[dict[str, Any]]) -> None:
    for count, these in enumerate(fields, start=1):
        request = assert_same(body(turns(count), **these))
        assert count == 1 or known(request) == len(turns(count - 1))


_ITEM = b'{"type":"message","role":"user","content":"a"}'


@pytest.mark.parametrize(
    "after",
    [
        pytest.param(b',{"type":"message"]', id="a cut-off item"),
        pytest.param(b",1,2]", id="values that are not items"),
        pytest.param(b"," + _ITEM + b",]", id="a trailing comma after a new item"),
        pytest.param(b",]", id="a trailing comma"),
        pytest.param(b",]]", id="a closing bracket"),
        pytest.param(b"," + _ITEM + b'],"input":[]', id="a second input array"),
        pytest.param(b"," + _ITEM + b'],"model":"n","x":[]', id="fields between"),
        pytest.param(b",," + _ITEM + b"]", id="two commas"),
        pytest.param(b"x" + _ITEM + b"]", id="a stray byte for the comma"),
        pytest.param(b" x" + _ITEM + b"]", id="a blank and a stray byte"),
    ],
)
@pytest.mark.parametrize("fields", [{}, {"store": False}], ids=["the known fields after", "other fields after"])
def test_whatever_follows_the_known_items_is_read_as_the_whole_body_would_be(after: bytes, fields: JSON) -> None:
    learned, other = body(turns(1)), body(turns(1), **fields)
    raw = learned[: learned.index(b'],"tools"')] + after + other[other.index(b'],"tools"') + 1 :]
    expected = outcome(raw)  # nothing known yet
    KNOWN_HISTORIES.clear()
    parse_request(learned)
    assert outcome(raw) == expected


def test_an_empty_known_history_followed_by_a_comma_is_the_whole_body_error() -> None:
    parse_request(orjson.dumps({"input": [], "model": "m"}))
    for raw in (b'{"input":[,{"role":"user","content":"a"}],"model":"m"}', b'{"input":[,],"model":"m"}'):
        assert error_of(raw)[2] == "invalid_json"


def test_two_turns_continuing_one_history_at_once_are_both_kept() -> None:
    # Two requests continue the same history at once (two branches of a conversation, on
    # two threads): the first replaces it while the second is being validated. The second
    # finds it gone when it keeps its own, and keeps its own all the same.
    parse_request(body(turns(1)))
    first, second = body(turns(2)), body([*turns(1), user("branch")])

    def validated_while_the_first_is_kept(data: JSON) -> ResponsesRequest:
        assert known(parse_request(first)) == len(turns(1))
        return parse_request(data)

    request = KNOWN_HISTORIES.parse_continued(second, validated_while_the_first_is_kept)
    assert request is not None and known(request) == len(turns(1))
    assert request == whole(second)
    assert known(assert_same(body([*turns(1), user("branch"), user("more")]))) == len(turns(1)) + 1
    assert known(assert_same(body(turns(3)))) == len(turns(2))


def test_a_continued_request_dumps_its_input_as_it_was_parsed() -> None:
    # The known items are decoded again from their history's bytes, the new ones dumped:
    # the same objects either way, whatever the items hold (unknown fields, numbers, text).
    odd = {"type": "function_call_output", "call_id": "c0", "output": "é\n\u2028", "x": {"n": 1.5, "m": [None, True]}}
    for count, continued in enumerate([0, 2, 4]):
        request = parse_request(body([odd, *turns(count)]))
        link = request.history()
        assert link is not None and link.known == continued
        assert link.dumped_input() == [dump_item(item) for item in request.input] == [odd, *turns(count)]


def test_a_continued_request_dumps_only_its_new_items(monkeypatch: pytest.MonkeyPatch) -> None:
    parse_request(body(turns(3)))
    request = parse_request(body(turns(4)))
    dumped: list[object] = []
    dump = WireModel.dump
    monkeypatch.setattr(WireModel, "dump", lambda item: dumped.append(item) or dump(item))
    link = request.history()
    assert link is not None and link.dumped_input() == turns(4)
    assert dumped == request.input[len(turns(3)) :]


def outcome(raw: bytes) -> ResponsesRequest | tuple[str, str | None, str | None, int]:
    try:
        return parse_request(raw)
    except RequestError:
        return error_of(raw)


# ---------------------------------------------------------------- what is derived from the items


def test_what_the_input_holds_is_looked_for_in_the_new_items_only() -> None:
    trigger = {"type": "compaction_trigger"}
    kinds = (CompactionTriggerItem, ReasoningItem)
    bodies = [
        body(turns(1)),  # learned: nothing of those kinds
        body(turns(2)),  # continued: still nothing
        body([*turns(2), trigger]),  # a new item of one kind
        body([*turns(2), trigger, user("more")]),  # in the known items now
        body([*turns(2), trigger, user("more")]),  # the same body again
        body(turns(3)),  # the history edited: none again
    ]
    for raw in bodies:
        request = parse_request(raw)
        expected = any(type(item) in kinds for item in request.input_items())
        assert request.input_holds(*kinds) is expected
        assert request.input_holds(*kinds) is expected  # asked twice: the same
        assert request.input_holds(CompactionItem) is False
        link = request.history()
        assert link is not None and link.own is not None and link.own.derived[("input holds", kinds)] is expected
    assert parse_request(orjson.loads(bodies[2])).input_holds(*kinds)  # no history at all
    assert not parse_request(orjson.loads(bodies[0])).input_holds(*kinds)


def test_what_a_known_history_holds_is_not_looked_for_again() -> None:
    parse_request(body(turns(1)))
    request = parse_request(body(turns(2)))
    link = request.history()
    assert link is not None and link.continues is not None
    link.continues.derived[("input holds", (ReasoningItem,))] = True  # what the cache says counts
    assert request.input_holds(ReasoningItem)
    link.continues.derived[("input holds", (ReasoningItem,))] = False
    assert not request.input_holds(ReasoningItem)


def test_a_history_never_asked_what_it_holds_is_looked_at_whole() -> None:
    first = [{"type": "reasoning", "summary": []}, *turns(1)]
    parse_request(body(first))  # nobody asks
    request = parse_request(body([*first, user("more")]))
    assert known(request) == len(first) and request.input_holds(ReasoningItem)


# ---------------------------------------------------------------- bounds


def test_the_cache_is_bounded_in_entries_and_bytes() -> None:
    KNOWN_HISTORIES.configure(max_entries=3, max_bytes=1 << 30)
    for n in range(5):
        parse_request(body([user(f"conversation {n}")]))
    assert len(KNOWN_HISTORIES) == 3
    KNOWN_HISTORIES.configure(max_entries=100, max_bytes=1 << 30)
    big = body([user("x" * 10_000)])
    parse_request(big)
    weight = KNOWN_HISTORIES.weight
    KNOWN_HISTORIES.configure(max_entries=100, max_bytes=weight - 1)
    assert KNOWN_HISTORIES.weight <= weight - 1
    parse_request(body([user("y" * 200_000)]))  # heavier than the whole cache: not kept
    assert KNOWN_HISTORIES.weight <= weight - 1


def test_the_fields_after_the_input_weigh_in_too() -> None:
    heavy = [{"type": "function", "name": "f", "description": "d" * 100_000, "parameters": {"type": "object"}}]
    KNOWN_HISTORIES.configure(max_entries=100, max_bytes=500_000)  # ten times the bytes: about 1 MB
    parse_request(body([user("hi")], tools=heavy))
    assert len(KNOWN_HISTORIES) == 0  # a small input, but 100 kB of fields kept with it: too heavy
    parse_request(body([user("hi")]))
    assert len(KNOWN_HISTORIES) == 1


def test_a_fresh_cache_counts_and_weighs_from_nothing_and_keeps_256_histories() -> None:
    cache = KnownHistories(max_bytes=1 << 40)
    assert (len(cache), cache.weight, cache.learned, cache.continued) == (0, 0, 0, 0)
    first = body([user("first")])
    cache.learn(first, orjson.loads(first), whole(first))
    assert (cache.learned, cache.weight) == (1, WEIGHT_PER_BODY_BYTE * len(first))
    assert cache.parse_continued(body([user("first"), user("more")]), lambda data: whole(orjson.dumps(data))) is not None
    assert cache.continued == 1
    for n in range(300):
        raw = body([user(f"conversation {n}")])
        cache.learn(raw, orjson.loads(raw), whole(raw))
    assert len(cache) == 256


def test_the_weight_is_what_the_kept_histories_weigh_as_they_come_and_go() -> None:
    KNOWN_HISTORIES.configure(max_entries=2, max_bytes=1 << 30)
    bodies = [body([user(f"conversation {n}" + "." * n)]) for n in range(3)]
    for raw in bodies:
        parse_request(raw)
    # the first went when the third came: the two last are kept, and weighed
    assert KNOWN_HISTORIES.weight == WEIGHT_PER_BODY_BYTE * (len(bodies[1]) + len(bodies[2]))
    grown = body([user("conversation 2.."), user("more")])
    assert known(parse_request(grown)) == 1  # replaces the history it continues
    assert KNOWN_HISTORIES.weight == WEIGHT_PER_BODY_BYTE * (len(bodies[1]) + len(grown))
    KNOWN_HISTORIES.clear()
    assert (len(KNOWN_HISTORIES), KNOWN_HISTORIES.weight) == (0, 0)
    parse_request(bodies[0])
    assert KNOWN_HISTORIES.weight == WEIGHT_PER_BODY_BYTE * len(bodies[0])


def test_a_history_weighing_exactly_the_bound_is_kept() -> None:
    raw = body([user("exactly")])
    KNOWN_HISTORIES.configure(max_entries=10, max_bytes=WEIGHT_PER_BODY_BYTE * len(raw))
    parse_request(raw)
    assert len(KNOWN_HISTORIES) == 1 and known(parse_request(raw)) == 1
    KNOWN_HISTORIES.configure(max_entries=10, max_bytes=WEIGHT_PER_BODY_BYTE * len(raw) - 1)
    assert len(KNOWN_HISTORIES) == 0


@pytest.mark.parametrize(
    ("raw", "hint"),
    [
        (b'{"model":"m","input":[],"prompt_cache_key":"thread-1"}', b"thread-1"),
        (b'"prompt_cache_key":"at-the-start","model":"m"}', b"at-the-start"),
        (b'{"model":"m","input":[]}', None),
        (b'{"prompt_cache_key":"cut off', None),  # no closing quote
        (b'{"prompt_cache_key":"' + b"k" * 300 + b'"}', None),  # longer than a hint may be
        (b'{"prompt_cache_key":"early",' + b'"pad":"' + b"x" * (200 * 1024) + b'"}', None),  # not among the last bytes
        (b'{"prompt_cache_key":"first","prompt_cache_key":"last"}', b"last"),  # the last one counts, as in JSON
    ],
)
def test_the_hint_is_the_prompt_cache_key_among_the_bodys_last_bytes(raw: bytes, hint: bytes | None) -> None:
    assert _hint(raw) == hint


def test_a_history_continued_with_nothing_new_is_the_most_recently_used() -> None:
    KNOWN_HISTORIES.configure(max_entries=2, max_bytes=1 << 30)
    first, second = body([user("first")]), body([user("second")])
    parse_request(first)
    parse_request(second)
    assert known(parse_request(first)) == 1  # sent again: now used after the second
    parse_request(body([user("third")]))  # one too many: the least recently used goes
    assert known(parse_request(first)) == 1
    assert known(parse_request(second)) == 0


def test_a_cache_of_no_bytes_keeps_nothing() -> None:
    KNOWN_HISTORIES.configure(max_entries=100, max_bytes=0)
    for _ in range(2):
        assert assert_same(body(turns(2))).history() is None
    assert len(KNOWN_HISTORIES) == 0


def test_requests_equal_whatever_their_history() -> None:
    raw = body(turns(2))
    learned, continued = parse_request(raw), parse_request(raw)
    assert learned.history() != continued.history()
    assert learned == continued == whole(raw)
