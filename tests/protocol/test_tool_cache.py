"""Interned tool lists: a list seen before is not validated again, and nothing else changes.

``parse_request`` shares the specs of a tool list it has already validated. What must
hold: the very same spec objects for the very same JSON, new ones for any change, the
same errors (paths included) as without the cache, and the same depth limit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from toolwire.errors import RequestError
from toolwire.protocol import (
    AdditionalToolsItem,
    ToolSearchOutputItem,
    ToolSpec,
    parse_item,
    parse_request,
)
from toolwire.protocol._depth import HEADROOM, MAX_JSON_DEPTH, check_depth, json_at_depth
from toolwire.protocol._tool_cache import (
    TOOL_LISTS,
    LeastRecentlyUsed,
    ToolListCache,
    validate_item_tools,
)

EXEC_COMMAND = {
    "type": "function",
    "name": "exec_command",
    "description": "Runs a command.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}
WEB_SEARCH = {"type": "web_search", "external_web_access": False}


def function(name: str, **extra: Any) -> dict[str, Any]:
    return {"type": "function", "name": name, **extra}


def namespace(name: str, *tools: dict[str, Any]) -> dict[str, Any]:
    return {"type": "namespace", "name": name, "description": "", "tools": list(tools)}


TOP_LEVEL_TOOLS = [EXEC_COMMAND, APPLY_PATCH, WEB_SEARCH, namespace("collaboration", function("spawn"), function("wait"))]
V2_TOOLS = [namespace("functions", EXEC_COMMAND, APPLY_PATCH), namespace("mcp__docs__", function("search"))]
USER = {"role": "user", "content": "hi"}


def v1_body(tools: list[Any] = TOP_LEVEL_TOOLS, **extra: Any) -> bytes:
    return orjson.dumps({"model": "m", "input": [USER], "tools": tools, **extra})


def v2_body(tools: list[Any] = V2_TOOLS, *, at: int = 0) -> bytes:
    items: list[Any] = [USER] * at + [{"type": "additional_tools", "role": "developer", "tools": tools}, USER]
    return orjson.dumps({"model": "m", "input": items})


@pytest.fixture(autouse=True)
def no_kept_lists() -> None:
    """Each test starts as a fresh process does: no tool list kept (not even the very
    lists an earlier run of the same test kept)."""
    TOOL_LISTS.clear()


def item_tools(body: bytes, index: int) -> list[Any]:
    item = parse_request(body).input_items()[index]
    assert isinstance(item, AdditionalToolsItem | ToolSearchOutputItem)
    return item.tools


# ---------------------------------------------------------------- shared specs


def test_the_same_top_level_tools_are_the_same_specs() -> None:
    first, second = parse_request(v1_body()), parse_request(v1_body())
    assert first.tools is not None and second.tools is not None
    assert first.tools is not second.tools  # each request has its own list...
    assert all(a is b for a, b in zip(first.tools, second.tools, strict=True))  # ...of shared specs
    assert second.dump() == first.dump() == orjson.loads(v1_body())


def test_the_same_item_tools_are_the_same_specs_wherever_the_item_is() -> None:
    first, second = item_tools(v2_body(), 0), item_tools(v2_body(at=3), 3)
    assert first is not second
    assert all(a is b for a, b in zip(first, second, strict=True))
    search_output = {"type": "tool_search_output", "call_id": "c", "execution": "client", "tools": V2_TOOLS}
    third = item_tools(orjson.dumps({"model": "m", "input": [search_output]}), 0)
    assert all(a is b for a, b in zip(first, third, strict=True))
    assert parse_request(v2_body(at=3)).dump() == orjson.loads(v2_body(at=3))


@pytest.mark.parametrize(
    "changed",
    [
        [EXEC_COMMAND, APPLY_PATCH, WEB_SEARCH],
        [{**EXEC_COMMAND, "description": "Runs a command!"}, APPLY_PATCH, WEB_SEARCH],
        [{**EXEC_COMMAND, "strict": True}, APPLY_PATCH, WEB_SEARCH],
        [APPLY_PATCH, EXEC_COMMAND, WEB_SEARCH],
    ],
)
def test_a_changed_list_is_validated_anew(changed: list[Any]) -> None:
    kept = parse_request(v1_body([EXEC_COMMAND, APPLY_PATCH, WEB_SEARCH])).tools
    request = parse_request(v1_body(changed))
    assert request.tools is not None and kept is not None
    assert request.dump()["tools"] == changed
    if changed != [EXEC_COMMAND, APPLY_PATCH, WEB_SEARCH]:
        assert request.tools[0] is not kept[0]


def test_a_number_that_equals_another_in_python_is_still_another_list() -> None:
    # 1 == 1.0 == True in Python, not in JSON: the key is the JSON, so nothing is mixed up.
    for default in (1, 1.0, True):
        tool = function("f", parameters={"type": "object", "default": default})
        request = parse_request(v1_body([tool]))
        assert request.dump()["tools"] == [tool]
        assert orjson.dumps(request.dump()["tools"]) == orjson.dumps([tool])


def test_a_body_given_as_a_dict_is_validated_every_time() -> None:
    body = orjson.loads(v1_body())
    first, second = parse_request(body), parse_request(body)
    assert first.tools is not None and second.tools is not None
    assert first.tools[0] is not second.tools[0]
    assert body == orjson.loads(v1_body())  # and left as it was


def test_the_body_itself_is_not_changed_when_reused() -> None:
    parse_request(v2_body())
    body = orjson.loads(v2_body())
    request = parse_request(orjson.dumps(body))
    assert body == orjson.loads(v2_body())
    assert request.model_extra == {}


# ---------------------------------------------------------------- errors, never cached


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (v1_body([EXEC_COMMAND, APPLY_PATCH, WEB_SEARCH, function(5)]), "tools[3].name"),  # type: ignore[arg-type]
        (v1_body([EXEC_COMMAND, {**APPLY_PATCH, "format": {"type": "grammar", "syntax": "ebnf", "definition": "x"}}]), "tools[1].format.syntax"),
        (v2_body([namespace("functions", EXEC_COMMAND, function("x", strict="yes"))], at=2), "input[2].tools[0].tools[1].strict"),
        (v2_body([namespace("functions", EXEC_COMMAND), {"type": "namespace", "name": "n"}]), "input[0].tools[1].tools"),
        (v1_body([[EXEC_COMMAND]]), "tools[0]"),  # a list inside the list is no tool
    ],
)
def test_an_invalid_variant_of_a_kept_list_names_the_field(body: bytes, param: str) -> None:
    parse_request(v1_body([EXEC_COMMAND, APPLY_PATCH, WEB_SEARCH]))
    parse_request(v2_body([namespace("functions", EXEC_COMMAND)]))
    for _ in range(2):  # an invalid list is not kept: the same error the second time
        with pytest.raises(RequestError) as caught:
            parse_request(body)
        assert caught.value.param == param


def test_another_invalid_field_is_reported_next_to_a_kept_list() -> None:
    parse_request(v2_body())
    body = orjson.loads(v2_body())
    body["input"][1] = {"type": "function_call", "call_id": "c", "name": "x", "arguments": {}}
    with pytest.raises(RequestError) as caught:
        parse_request(orjson.dumps(body))
    assert caught.value.param == "input[1].arguments"


def test_a_list_kept_as_an_item_list_is_not_a_wrapped_top_level_list() -> None:
    # At the item depth, ``[[tools]]`` at the top level serializes to the very same bytes
    # as ``tools``: the depth is part of the key.
    parse_request(v2_body())
    with pytest.raises(RequestError) as caught:
        parse_request(orjson.dumps({"model": "m", "tools": [[V2_TOOLS]]}))
    assert caught.value.param == "tools[0]"


# ---------------------------------------------------------------- depth


def deep(levels: int) -> Any:
    """A value nested ``levels`` objects deep (0: a number)."""
    value: Any = 1
    for _ in range(levels):
        value = {"x": value}
    return value


def deep_tool(levels: int) -> dict[str, Any]:
    """A function whose parameters are ``levels`` objects deep."""
    return function("deep", parameters=deep(levels))


# Bodies nested exactly ``depth`` levels (the body object is level 1), deepest in one place.
PLACES: dict[str, Callable[[int], dict[str, Any]]] = {
    "top-level tools": lambda depth: {"model": "m", "tools": [deep_tool(depth - 3)]},
    "additional_tools": lambda depth: {"model": "m", "input": [{"type": "additional_tools", "tools": [deep_tool(depth - 5)]}]},
    "namespace in additional_tools": lambda depth: {
        "model": "m",
        "input": [USER, {"type": "additional_tools", "tools": [namespace("ns", deep_tool(depth - 7))]}],
    },
    "tool_search_output": lambda depth: {"model": "m", "input": [{"type": "tool_search_output", "tools": [deep_tool(depth - 5)]}]},
    "metadata beside tools": lambda depth: {"model": "m", "tools": [EXEC_COMMAND], "metadata": deep(depth - 1)},
    "item beside additional_tools": lambda depth: {
        "model": "m",
        "input": [{"type": "additional_tools", "tools": V2_TOOLS}, {"role": "user", "content": [{"type": "input_text", "text": "x", "x": deep(depth - 5)}]}],
    },
}


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, MAX_JSON_DEPTH + 2])
def test_the_depth_limit_holds_for_kept_lists(place: str, depth: int) -> None:
    data = PLACES[place](depth)
    too_deep = depth > MAX_JSON_DEPTH
    with pytest.raises(RequestError) if too_deep else _no_error():
        check_depth(data)  # the whole body, serialized once: the reference
    for _ in range(2):  # first validated, then kept
        if too_deep:
            with pytest.raises(RequestError) as caught:
                parse_request(orjson.dumps(data))
            assert caught.value.code == "too_deep"
            assert caught.value.message == f"The request body is nested deeper than {MAX_JSON_DEPTH} levels."
        else:
            assert parse_request(orjson.dumps(data)).dump() == data


def test_a_kept_list_moved_deeper_is_too_deep() -> None:
    tool = deep_tool(MAX_JSON_DEPTH - 3)  # as deep as a top-level tool may be
    parse_request(orjson.dumps({"model": "m", "tools": [tool]}))
    with pytest.raises(RequestError) as caught:  # two levels deeper inside an item
        parse_request(orjson.dumps({"model": "m", "input": [{"type": "additional_tools", "tools": [tool]}]}))
    assert caught.value.code == "too_deep"


class _no_error:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# ---------------------------------------------------------------- bounded


def test_least_recently_used_keeps_at_most_max_entries() -> None:
    cache: LeastRecentlyUsed[str, int] = LeastRecentlyUsed(max_entries=2)
    assert cache.put("a", 1) == []
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recently used
    assert cache.put("c", 3) == [2]  # what is no longer kept
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    assert len(cache) == 2
    assert cache.put("c", 4) == [3]
    assert (len(cache), cache.get("c")) == (2, 4)
    cache.clear()
    assert len(cache) == 0


def test_least_recently_used_keeps_at_most_max_weight() -> None:
    cache: LeastRecentlyUsed[str, str] = LeastRecentlyUsed(max_entries=10, max_weight=10)
    cache.put("a", "a", weight=4)
    cache.put("b", "b", weight=4)
    cache.put("c", "c", weight=4)
    assert (cache.get("a"), cache.weight, len(cache)) == (None, 8, 2)
    assert cache.put("big", "big", weight=11) == ["big"]  # heavier than all allowed: not kept
    assert (cache.get("big"), cache.get("b"), cache.get("c")) == (None, "b", "c")
    cache.put("b", "b", weight=1)
    assert cache.weight == 5


def test_least_recently_used_needs_room_for_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        LeastRecentlyUsed(max_entries=0)


def test_tool_lists_are_bounded() -> None:
    for index in range(TOOL_LISTS_MAX + 10):
        parse_request(v1_body([function(f"tool_{index}")]))
    assert len(TOOL_LISTS) == TOOL_LISTS_MAX


TOOL_LISTS_MAX = 64


def test_lists_sharing_a_probe_take_turns_without_a_mixup() -> None:
    cache = ToolListCache(max_entries=4, max_bytes=1 << 20)
    head, tail = b"[" * 300, b"]" * 300
    first, second = head + b"1" + tail, head + b"2" + tail  # same length, head and tail
    cache.put(40, first, [])
    assert cache.get(40, second) is None
    assert cache.get(40, first) == ()
    assert cache.get(41, first) is None  # the same JSON at another depth is another list


def test_json_size_knows_a_kept_list_by_its_very_specs() -> None:
    tools = [function("sized"), function("other")]
    request = parse_request(v1_body(tools))
    assert request.tools is not None
    assert TOOL_LISTS.json_size(request.tools) == len(json_at_depth(tools, HEADROOM + 1))
    assert TOOL_LISTS.json_size(request.tools[:1]) is None
    assert TOOL_LISTS.json_size(list(reversed(request.tools))) is None
    assert TOOL_LISTS.json_size(parse_request(orjson.loads(v1_body(tools))).tools or []) is None
    assert TOOL_LISTS.json_size([]) is None


def test_what_is_derived_from_a_kept_list_is_built_once() -> None:
    tools = [function("derived"), function("once")]
    builds: list[int] = []

    def names(specs: Sequence[ToolSpec]) -> list[str]:
        builds.append(len(specs))
        return [spec.type for spec in specs]

    kept = parse_request(v1_body(tools)).tools or []
    again = parse_request(v1_body(tools)).tools or []  # the same specs, in a new list
    assert TOOL_LISTS.derived(kept, names) is TOOL_LISTS.derived(again, names)
    assert builds == [2]
    fresh = parse_request(orjson.loads(v1_body(tools))).tools or []  # a dict body: not kept
    assert TOOL_LISTS.derived(fresh, names) == ["function", "function"]
    assert TOOL_LISTS.derived(kept[:1], names) == ["function"]  # not a kept list: built each time
    assert builds == [2, 2, 1]


def test_a_dropped_list_is_no_longer_known_by_its_specs() -> None:
    cache = ToolListCache(max_entries=1, max_bytes=1 << 20)
    first = parse_request(v1_body([function("a")])).tools or []
    second = parse_request(v1_body([function("b")])).tools or []
    cache.put(33, b"[a]", first)
    assert cache.json_size(first) == 3
    cache.put(33, b"[b]", second)
    assert (cache.json_size(first), cache.json_size(second)) == (None, 3)
    cache.put(33, b"[b]", first)  # the same JSON again, other specs: they replace
    assert (cache.json_size(first), cache.json_size(second)) == (3, None)
    cache.put(33, b"[" + b" " * (1 << 20) + b"]", second)  # too big to keep
    assert (len(cache), cache.json_size(second)) == (1, None)
    cache.clear()
    assert (len(cache), cache.json_size(first)) == (0, None)


def test_least_recently_used_weights_add_up_exactly() -> None:
    cache: LeastRecentlyUsed[str, str] = LeastRecentlyUsed(max_entries=10, max_weight=10)
    cache.put("unweighed", "u")
    assert cache.weight == 0  # a value put without a weight weighs nothing
    assert cache.put("all", "all", weight=10) == []  # as heavy as allowed: kept
    assert (cache.get("all"), cache.get("unweighed"), cache.weight) == ("all", "u", 10)
    cache.put("all", "all", weight=3)  # replaced: its old weight no longer counts
    assert cache.weight == 3
    cache.put("more", "more", weight=7)  # exactly at the limit: nothing dropped
    assert (cache.get("all"), cache.get("more"), cache.weight) == ("all", "more", 10)
    cache.clear()
    assert (len(cache), cache.weight) == (0, 0)
    assert cache.put("after", "after", weight=10) == []
    assert cache.weight == 10


def test_an_empty_tool_list_is_kept_and_dropped_like_any_other() -> None:
    cache = ToolListCache(max_entries=1, max_bytes=1 << 20)
    cache.put(33, b"[]", [])
    assert cache.get(33, b"[]") == ()
    cache.put(33, b"[a]", parse_request(v1_body([function("a")])).tools or [])
    assert (len(cache), cache.get(33, b"[]")) == (1, None)


def test_what_is_derived_is_what_build_gave() -> None:
    tools = [function("derived_value")]
    kept = parse_request(v1_body(tools)).tools or []
    parse_request(v1_body(tools))
    assert TOOL_LISTS.derived(kept, lambda specs: [spec.type for spec in specs]) == ["function"]
    assert TOOL_LISTS.derived(kept, lambda specs: [spec.type for spec in specs]) == ["function"]


def test_a_tools_list_in_another_item_stays_raw_json() -> None:
    # Only additional_tools and tool_search_output hold tool specs; any other item's
    # ``tools`` is its own JSON, even when it equals a kept list.
    parse_request(v2_body())
    for kind in ("codex_future_item", "message"):
        item = {"type": kind, "role": "user", "content": "x", "tools": V2_TOOLS}
        request = parse_request(orjson.dumps({"model": "m", "input": [item]}))
        [parsed] = request.input_items()
        assert parsed.model_extra is not None and parsed.model_extra["tools"] == V2_TOOLS
        assert all(isinstance(tool, dict) for tool in parsed.model_extra["tools"])
        assert request.dump()["input"] == [item]


def test_a_tools_object_beside_item_tools_is_held_to_the_depth_limit() -> None:
    tools = deep(MAX_JSON_DEPTH)  # an object, not a list: no tool list, but deep all the same
    body = {"model": "m", "tools": tools, "input": [{"type": "additional_tools", "tools": V2_TOOLS}]}
    with pytest.raises(RequestError) as caught:
        parse_request(orjson.dumps(body))
    assert caught.value.code == "too_deep"


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1])
def test_the_other_fields_of_an_item_with_tools_are_held_to_the_depth_limit(depth: int) -> None:
    item = {"type": "additional_tools", "tools": V2_TOOLS, "x_future": deep(depth - 3)}
    body = {"model": "m", "input": [item]}
    for _ in range(2):  # first validated, then kept
        if depth > MAX_JSON_DEPTH:
            with pytest.raises(RequestError) as caught:
                parse_request(orjson.dumps(body))
            assert caught.value.code == "too_deep"
        else:
            assert parse_request(orjson.dumps(body)).dump() == body


# ---------------------------------------------------------------- tools kept as raw JSON


def test_raw_item_tools_are_validated_once_and_shared() -> None:
    tools = [function("raw_once"), namespace("raw_ns", function("inner"))]
    first, second = validate_item_tools(tools), validate_item_tools(orjson.loads(orjson.dumps(tools)))
    assert first is not second
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert [spec.dump() for spec in first] == tools
    # Kept at the depth of an item's tools: an additional_tools item with them shares them.
    shared = item_tools(v2_body(tools), 0)
    assert all(a is b for a, b in zip(first, shared, strict=True))


def test_raw_item_tools_too_deep_to_keep_are_validated_every_time() -> None:
    tools = [function("raw_deep", parameters=deep(MAX_JSON_DEPTH))]
    first, second = validate_item_tools(tools), validate_item_tools(tools)
    assert [spec.dump() for spec in first] == [spec.dump() for spec in second] == tools
    assert first[0] is not second[0]


def test_invalid_raw_item_tools_are_an_error_every_time() -> None:
    for _ in range(2):
        with pytest.raises(ValidationError):
            validate_item_tools([function("ok"), {"type": "function"}])


# ---------------------------------------------------------------- items parsed alone


@pytest.mark.parametrize(
    "item",
    [
        {"type": "additional_tools", "id": "at_read_back", "role": "developer", "tools": V2_TOOLS},
        {"type": "tool_search_output", "call_id": "read-back", "execution": "client", "tools": V2_TOOLS},
    ],
    ids=["additional_tools", "tool_search_output"],
)
def test_an_item_read_back_declares_the_specs_its_request_did(item: dict[str, Any]) -> None:
    """A conversation read back from where it was kept (a WebSocket's own responses, the
    store) parses its items one by one: their tool lists are the very specs of the
    request that sent them, so what a translation derived from those is found again."""
    sent = item_tools(orjson.dumps({"model": "m", "input": [item]}), 0)
    read_back = [parse_item(orjson.loads(orjson.dumps(item))) for _ in range(2)]
    for parsed in read_back:
        assert isinstance(parsed, AdditionalToolsItem | ToolSearchOutputItem)
        assert all(a is b for a, b in zip(parsed.tools, sent, strict=True))
        assert parsed.dump() == item
    assert read_back[0].tools is not read_back[1].tools  # each item has its own list


def test_an_item_with_invalid_tools_names_the_field_every_time() -> None:
    item = {"type": "additional_tools", "role": "developer", "tools": [function("ok"), {"type": "function"}]}
    for _ in range(2):
        with pytest.raises(RequestError) as caught:
            parse_item(item, where="input[4]")
        assert caught.value.param == "input[4].tools[1].name"
