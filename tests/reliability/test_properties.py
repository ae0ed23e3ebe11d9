"""Properties of the pure core under hostile input (hypothesis).

* Requests: the captured Codex bodies, mutated (fields deleted, types changed, junk
  items and tools inserted, values nested deep), and random bytes, go through
  ``parse_request`` and ``translate_request`` (every preset) and on into the stream
  translator, as the gateway would take them. Only the protocol's own client errors
  (``ClientError``) may escape; whatever is accepted must be sendable upstream (orjson
  can serialize it) and must give a well-formed stream.
* Streams: random chunk sequences, from plausible to junk dicts, through
  ``ChatStreamTranslator``: no exception, every event serializable, sequence numbers
  0, 1, 2, ..., exactly one terminal event, last, after ``finish()`` or ``fail()``.
* Tool calls survive noise: well-formed calls with keep-alive, usage and empty chunks
  scattered between their fragments all come out, in order, with their arguments.

Example counts are kept moderate so the module runs well under a minute.
"""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.protocol.codex_fixtures import FIXTURE_FILES
from toolwire.errors import ClientError
from toolwire.protocol import EVENT_TYPES, TERMINAL_EVENT_TYPES, encode_event, parse_request
from toolwire.translate import (
    PRESETS,
    ChatStreamTranslator,
    translate_completion,
    translate_request,
)

JSON = dict[str, Any]
Path_ = tuple[str | int, ...]

FIXTURES: list[JSON] = [orjson.loads(path.read_bytes()) for path in FIXTURE_FILES]
FIXTURE_IDS = [f"{path.parent.name}/{path.stem}" for path in FIXTURE_FILES]
PROFILES = sorted(PRESETS)

def examples(count: int) -> settings:
    return settings(
        max_examples=count,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )

# ---------------------------------------------------------------- junk values

ITEM_TYPES = [
    "message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
    "reasoning", "tool_search_call", "tool_search_output", "additional_tools", "item_reference",
    "local_shell_call", "web_search_call", "compaction", "mystery_item",
]
TOOL_TYPES = ["function", "custom", "namespace", "tool_search", "web_search", "local_shell", "mystery_tool"]
PART_TYPES = ["input_text", "output_text", "input_image", "input_file", "refusal", "summary_text", "reasoning_text", "zzz"]
FIELD_NAMES = [
    "type", "role", "content", "text", "name", "namespace", "call_id", "arguments", "input", "output", "id",
    "status", "summary", "encrypted_content", "tools", "parameters", "strict", "description", "format",
    "syntax", "definition", "image_url", "file_id", "file_data", "execution", "action", "detail",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(ITEM_TYPES + TOOL_TYPES + PART_TYPES + ["user", "assistant", "system", "developer", "{}", ""]),
)
junk = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=6)), children, max_size=5),
    ),
    max_leaves=12,
)


def typed(types: list[str]) -> st.SearchStrategy[JSON]:
    """A dict with a known (or unknown) ``type`` and random known fields of random value."""
    return st.builds(
        lambda kind, fields: {"type": kind, **fields},
        st.sampled_from(types),
        st.dictionaries(st.sampled_from(FIELD_NAMES), junk, max_size=5),
    )


junk_item = st.one_of(typed(ITEM_TYPES), junk)
junk_tool = st.one_of(typed(TOOL_TYPES), junk)
junk_part = st.one_of(typed(PART_TYPES), junk)


def nest(value: Any, depth: int, use_dicts: bool) -> Any:
    for _ in range(depth):
        value = {"k": value} if use_dicts else [value]
    return value


def depth_of(value: Any) -> int:
    """Levels of nesting: a scalar is 0, ``[]`` is 1, ``[[]]`` is 2."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def deepest_accepted_body_depth() -> int:
    """The deepest body ``parse_request`` accepts, found by asking it (not by reading its code)."""
    depth = 3
    while depth < 2000:
        body = {"model": "m", "input": "hi", "x": nest([], depth - 2, use_dicts=False)}
        try:
            parse_request(json.dumps(body))
        except ClientError:
            return depth - 1
        depth += 1
    return depth


LIMIT = deepest_accepted_body_depth()


# ---------------------------------------------------------------- mutating a body


def walk(value: Any, path: Path_ = ()) -> list[Path_]:
    """Every path below ``value`` (not ``value`` itself)."""
    found: list[Path_] = []
    if isinstance(value, dict):
        for key, child in value.items():
            found.append((*path, key))
            found += walk(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.append((*path, index))
            found += walk(child, (*path, index))
    return found


def get(value: Any, path: Path_) -> Any:
    for part in path:
        value = value[part]
    return value


def put(body: JSON, path: Path_, new: Any) -> None:
    get(body, path[:-1])[path[-1]] = new


@st.composite
def mutated_bodies(draw: st.DrawFn, *, max_depth: int, to_the_limit: bool = False) -> JSON:
    """A Codex request body with 1-5 random mutations."""
    body = json.loads(json.dumps(draw(st.sampled_from(FIXTURES))))
    actions = ["delete", "replace", "retype", "insert", "nest", "add_field", "duplicate"]
    for _ in range(draw(st.integers(1, 5))):
        paths = walk(body)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        container = get(body, path[:-1])
        action = draw(st.sampled_from(actions))
        if to_the_limit and draw(st.booleans()):
            action = "nest_to_the_limit"
        if action == "delete":
            del container[path[-1]]
        elif action == "replace":
            put(body, path, draw(junk))
        elif action == "retype":
            kinds = draw(st.sampled_from([ITEM_TYPES, TOOL_TYPES, PART_TYPES]))
            target = get(body, path)
            if isinstance(target, dict):
                target["type"] = draw(st.sampled_from(kinds))
            else:
                put(body, path, draw(junk))
        elif action == "insert":
            lists = [p for p in [(), *paths] if isinstance(get(body, p), list)] or [("input",)]
            where = draw(st.sampled_from(lists))
            target = get(body, where) if where else None
            if isinstance(target, list):
                target.insert(draw(st.integers(0, len(target))), draw(st.one_of(junk_item, junk_tool, junk_part)))
            else:
                body["input"] = [draw(junk_item)]
        elif action == "nest":
            put(body, path, nest(get(body, path), draw(st.integers(1, max_depth)), draw(st.booleans())))
        elif action == "nest_to_the_limit":  # the body ends up within a few levels of the limit
            value = get(body, path)
            levels = LIMIT - len(path) - depth_of(value) + draw(st.integers(-3, 2))
            put(body, path, nest(value, max(levels, 0), draw(st.booleans())))
        elif action == "add_field":
            target = get(body, path)
            if isinstance(target, dict):
                target[draw(st.sampled_from(FIELD_NAMES))] = draw(junk)
            else:
                body[draw(st.text(min_size=1, max_size=10))] = draw(junk)
        elif action == "duplicate" and isinstance(container, list):
            container.append(json.loads(json.dumps(get(body, path))))
    for key in draw(st.lists(st.sampled_from(["model", "input", "tools", "tool_choice", "stream"]), max_size=1)):
        if draw(st.booleans()):
            body.pop(key, None)
        else:
            body[key] = draw(junk)
    return body


# ---------------------------------------------------------------- the gateway's path through the core


def text_chunks(text: str) -> list[JSON]:
    return [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]


def through_the_core(raw: bytes, profile: str) -> str:
    """What the endpoint does with a body, minus the I/O. Only a ClientError may escape.

    Returns what became of the body, for hypothesis's statistics.
    """
    try:
        request = parse_request(raw)
        translated = translate_request(request, PRESETS[profile], model="upstream-model")
    except ClientError as exc:
        return f"refused ({exc.code})"
    orjson.dumps(translated.chat)  # the backend serializes it with orjson
    translator = ChatStreamTranslator(
        request, translated.tools, response_id="resp_test", created_at=1, model=request.model
    )
    events = translator.start()
    for chunk in text_chunks("ok"):
        events += translator.feed(chunk)
    events += translator.finish()
    check_stream(events)
    completion = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}
    response = translate_completion(
        completion, request, translated.tools, response_id="resp_test", created_at=1, model=request.model
    )
    orjson.dumps(response)
    return "accepted"


def check_stream(events: list[Any]) -> None:
    """Serializable events, numbered 0..n-1, exactly one terminal event and it is last."""
    for one in events:
        encode_event(orjson.dumps(one), one["type"])
        assert one["type"] in EVENT_TYPES, one["type"]
    assert [one["sequence_number"] for one in events] == list(range(len(events)))
    ends = [i for i, one in enumerate(events) if one["type"] in TERMINAL_EVENT_TYPES]
    assert ends == [len(events) - 1], [one["type"] for one in events]


@pytest.mark.parametrize("index", range(len(FIXTURES)), ids=FIXTURE_IDS)
def test_the_fixtures_themselves_go_through(index: int) -> None:
    """The unmutated bodies are accepted by every preset (the baseline for the mutations)."""
    raw = orjson.dumps(FIXTURES[index])
    for profile in PROFILES:
        assert through_the_core(raw, profile) == "accepted"


@examples(250)
@given(body=mutated_bodies(max_depth=40), profile=st.sampled_from(PROFILES))
def test_mutated_codex_requests_raise_only_client_errors(body: JSON, profile: str) -> None:
    event(through_the_core(json.dumps(body).encode(), profile))


@examples(150)
@given(body=mutated_bodies(max_depth=400, to_the_limit=True), profile=st.sampled_from(PROFILES))
def test_deeply_nested_mutations_raise_only_client_errors(body: JSON, profile: str) -> None:
    """Nesting anywhere in a body, often to within a few levels of the gateway's depth
    limit: accepted and then sendable upstream, or a client error."""
    event(through_the_core(json.dumps(body).encode(), profile))


@examples(150)
@given(
    index=st.integers(0, len(FIXTURES) - 1),
    flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=6),
)
def test_corrupted_bytes_raise_only_client_errors(index: int, flips: list[tuple[float, int]]) -> None:
    """Codex bodies with bytes overwritten (broken UTF-8, broken JSON, changed values)."""
    raw = bytearray(orjson.dumps(FIXTURES[index]))
    for where, byte in flips:
        raw[int(where * len(raw))] = byte
    event(through_the_core(bytes(raw), "generic"))


@examples(150)
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode), junk.map(lambda v: json.dumps(v).encode())))
def test_random_bodies_raise_only_client_errors(raw: bytes) -> None:
    event(through_the_core(raw, "generic"))


# ---------------------------------------------------------------- stream translation

TOOLS = [
    {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
    {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
    {"type": "namespace", "name": "collab", "description": "agents", "tools": [
        {"type": "function", "name": "list_agents", "parameters": {"type": "object"}},
    ]},
    {"type": "custom", "name": "apply_patch", "description": "patch", "format": {"type": "text"}},
]
SIMPLE_BODY = {"model": "m", "input": "hi", "tools": TOOLS}


def translator_for(body: JSON) -> ChatStreamTranslator:
    request = parse_request(orjson.dumps(body))
    translated = translate_request(request)
    return ChatStreamTranslator(request, translated.tools, response_id="resp_test", created_at=1, model="m")


TRANSLATOR_BODIES = [SIMPLE_BODY, *[body for body in FIXTURES if body.get("tools")]]
UPSTREAM_NAMES = ["get_weather", "exec_command", "collab__list_agents", "apply_patch", "shell", "tool_search", "nope", ""]
FINISH_REASONS = ["stop", "tool_calls", "length", "content_filter", "function_call", "error", "eos", "weird", ""]

maybe = lambda strategy: st.one_of(strategy, junk)  # noqa: E731  (a value of the right kind, or junk)

call_entry = st.fixed_dictionaries(
    {},
    optional={
        "index": maybe(st.integers(-2, 4)),
        "id": maybe(st.sampled_from(["call_a", "call_b", "call_a", "x" * 80, "bad id!"])),
        "type": maybe(st.sampled_from(["function", "custom"])),
        "function": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "name": maybe(st.sampled_from(UPSTREAM_NAMES)),
                    "arguments": maybe(st.sampled_from(['{"city": "Paris"}', '{"cmd": "ls', "}", "", "[1,", "null"]) | st.text(max_size=10)),
                },
            )
        ),
        "custom": maybe(st.fixed_dictionaries({}, optional={"name": maybe(st.sampled_from(UPSTREAM_NAMES)), "input": junk})),
    },
)
delta = st.fixed_dictionaries(
    {},
    optional={
        "role": maybe(st.just("assistant")),
        "content": maybe(st.text(max_size=12) | st.sampled_from(["<think>", "</think>", "<thi", "nk>x"])),
        "reasoning_content": maybe(st.text(max_size=8)),
        "reasoning": maybe(st.text(max_size=8)),
        "refusal": maybe(st.text(max_size=8)),
        "tool_calls": maybe(st.lists(maybe(call_entry), max_size=3)),
        "function_call": maybe(st.fixed_dictionaries({}, optional={"name": junk, "arguments": junk})),
    },
)
choice = st.fixed_dictionaries(
    {},
    optional={
        "index": maybe(st.integers(0, 1)),
        "delta": maybe(delta),
        "finish_reason": maybe(st.sampled_from(FINISH_REASONS)),
        "message": junk,
    },
)
usage = st.fixed_dictionaries(
    {},
    optional={
        name: maybe(st.integers(-5, 2**64 - 1) | st.floats())  # orjson reads integers to 2**64 - 1, larger as floats
        for name in ["prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details"]
    },
)
chunk = st.one_of(
    st.fixed_dictionaries({}, optional={"choices": maybe(st.lists(maybe(choice), max_size=2)), "usage": maybe(usage), "id": junk, "object": junk}),
    st.fixed_dictionaries({"error": junk}),
    st.fixed_dictionaries({"object": st.just("error"), "message": junk, "code": junk}),
    st.dictionaries(st.text(max_size=8), junk, max_size=4),
)


@examples(300)
@given(
    body=st.sampled_from(TRANSLATOR_BODIES),
    chunks=st.lists(chunk, max_size=14),
    end=st.sampled_from(["finish", "fail", "finish+fail", "fail+finish"]),
    message=st.text(max_size=30),
)
def test_any_chunks_give_exactly_one_terminal_event(body: JSON, chunks: list[JSON], end: str, message: str) -> None:
    translator = translator_for(body)
    events = list(translator.start())
    for item in chunks:
        events += translator.feed(item)
        translator.response  # noqa: B018  (the snapshot must be readable at any time)
    for step in end.split("+"):
        events += translator.finish() if step == "finish" else translator.fail(message or "cut")
    check_stream(events)
    assert translator.finished
    final = events[-1]
    assert translator.response["status"] == final["response"]["status"]
    assert final["type"] == f"response.{final['response']['status']}"
    # after the terminal event nothing more comes out
    assert translator.feed(text_chunks("late")[0]) == []
    assert translator.finish() == []
    assert translator.fail("late") == []


NOISE = [
    {"choices": []},
    {},
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}}]},
    {"choices": [{"index": 0, "delta": {"content": None}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": []}}]},
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}},
    {"choices": [{"index": 0, "delta": {"content": ""}}]},
]
call_arguments = st.dictionaries(
    st.sampled_from(["city", "cmd", "n", "flag"]), st.one_of(st.text(max_size=10), st.integers(), st.booleans()), max_size=3
)


@examples(150)
@given(
    calls=st.lists(st.tuples(st.sampled_from(["get_weather", "exec_command", "collab__list_agents"]), call_arguments), min_size=1, max_size=4),
    style=st.sampled_from(["openai", "ollama"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_no_tool_call_is_lost_among_noise_chunks(calls: list[tuple[str, JSON]], style: str, seed: int) -> None:
    rng = random.Random(seed)
    chunks: list[JSON] = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    for index, (name, arguments) in enumerate(calls):
        text = json.dumps(arguments)
        if style == "ollama":  # each call whole in one chunk, at index 0 (as Ollama sends them)
            entry = {"id": f"call_{index}", "index": 0, "type": "function", "function": {"name": name, "arguments": text}}
            chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [entry]}}]})
            continue
        cuts = sorted(rng.sample(range(1, len(text)), k=min(3, len(text) - 1)))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        first = {"index": index, "id": f"call_{index}", "type": "function", "function": {"name": name, "arguments": ""}}
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [first]}}]})
        chunks += [{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "function": {"arguments": p}}]}}]} for p in pieces]
    noisy: list[JSON] = []
    for item in chunks:
        noisy += [rng.choice(NOISE) for _ in range(rng.randint(0, 2))]
        noisy.append(item)
    noisy.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    translator = translator_for(SIMPLE_BODY)
    events = translator.start()
    for item in noisy:
        events += translator.feed(item)
    events += translator.finish()
    check_stream(events)
    final = events[-1]["response"]
    assert final["status"] == "completed", final
    out = [item for item in final["output"] if item["type"] == "function_call"]
    expected_names = [(None, n) if "__" not in n else tuple(n.split("__")) for n, _ in calls]
    assert [(item.get("namespace"), item["name"]) for item in out] == expected_names
    assert [json.loads(item["arguments"]) for item in out] == [arguments for _, arguments in calls]
    assert len({item["call_id"] for item in out}) == len(calls)

