"""A request that continues a known history is translated from its new items only, and
the Chat request is byte for byte the one translating every item gives.

Random Codex-shaped conversations grow turn by turn (hypothesis): calls and their outputs,
parallel calls, outputs before their calls or never given, orphan outputs, reasoning,
text, images, tool searches, tools declared in the input; between turns a client may
edit or truncate its history, switch models, backend profiles, instructions or tools, and
a second client may continue the same prefix. Each request is translated as the gateway
translates it (the body's bytes, so the known histories are used) and from its decoded
body (no history at all); the two must agree on everything: the Chat body's bytes, the
warnings, the conversions, the errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from toolwire.errors import ClientError
from toolwire.protocol import KNOWN_HISTORIES, KnownHistories, ResponsesRequest, parse_request
from toolwire.translate import PRESETS, BackendProfile, seal_reasoning, translate_request

from .shapes import (
    PNG,
    TOOLS,
    assistant,
    custom_call,
    custom_output,
    developer,
    function_call,
    function_output,
    reasoning,
    tool_search_call,
    user,
)

JSON = dict[str, Any]
PROFILES = [PRESETS[name] for name in ("generic", "deepseek", "openai", "ollama")]
# A top-level tool whose name is the flat name of collaboration.spawn_agent: declared
# before the namespace, it makes the namespaced tool's upstream name a hashed one.
CLASHING_TOOLS = [{"type": "function", "name": "collaboration__spawn_agent", "parameters": {"type": "object"}}, *TOOLS]
LOADED = {"type": "namespace", "name": "multi_agent", "description": "Agents.", "tools": [
    {"type": "function", "name": "spawn_agent", "defer_loading": True, "parameters": {"type": "object"}},
]}


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[KnownHistories]:
    KNOWN_HISTORIES.clear()
    yield KNOWN_HISTORIES
    KNOWN_HISTORIES.clear()


def outcome(body: bytes | JSON, profile: BackendProfile, model: str | None) -> tuple[tuple[Any, ...], int]:
    """What the gateway would send upstream for ``body``, or the error it would answer; and
    whether the translation resumed a saved build (0 or 1)."""
    try:
        request = parse_request(body)
        link = request.history()
        resumed = link is not None and link.continues is not None and "chat messages" in link.continues.derived
        translated = translate_request(request, profile, model=model)
    except ClientError as error:
        return ("error", type(error).__name__, error.message, error.param), 0
    chat = orjson.dumps(translated.chat)
    assert orjson.dumps(translated.wire_body()) == chat  # what goes upstream: the same bytes
    return ("chat", chat, translated.warnings, translated.conversions), int(resumed)


def uncached(body: bytes) -> ResponsesRequest:
    return parse_request(orjson.loads(body))


def continued(body: bytes) -> int:
    link = parse_request(body).history()
    return -1 if link is None else link.known


# ---------------------------------------------------------------- Codex-shaped turns

call_ids = st.sampled_from([f"call_{n}" for n in range(12)])
texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@st.composite
def tool_round(draw: st.DrawFn) -> list[JSON]:
    """One model turn that calls tools, and (mostly) their outputs."""
    items: list[JSON] = []
    if draw(st.booleans()):
        sealed = seal_reasoning(draw(texts))
        items.append(reasoning(summary=draw(texts), encrypted_content=draw(st.sampled_from([sealed, "opaque"]))))
    calls = draw(st.lists(st.tuples(call_ids, st.sampled_from(["exec", "patch", "agent", "search", "unknown"])),
                          min_size=1, max_size=3))
    outputs: list[JSON] = []
    for call_id, kind in calls:
        if kind == "exec":
            items.append(function_call(call_id, "exec_command", orjson.dumps({"cmd": draw(texts)}).decode()))
            outputs.append(function_output(call_id, draw(st.one_of(texts, st.just([{"type": "input_image", "image_url": PNG}])))))
        elif kind == "patch":
            items.append(custom_call(call_id, "apply_patch", f"*** Begin Patch\n{draw(texts)}\n*** End Patch"))
            outputs.append(custom_output(call_id, draw(texts)))
        elif kind == "agent":
            items.append(function_call(call_id, "spawn_agent", "{}", namespace="collaboration"))
            outputs.append(function_output(call_id, "ok"))
        elif kind == "search":
            items.append(tool_search_call(call_id, draw(texts)))
            outputs.append({"type": "tool_search_output", "call_id": call_id, "execution": "client",
                            "status": "completed", "tools": [LOADED]})
        else:
            items.append(function_call(call_id, draw(st.sampled_from(["gone", "ns.tool"])), "{}"))
            outputs.append(function_output(call_id, "?"))
    if draw(st.booleans()) and len(items) > 1:  # text written between the calls
        items.insert(draw(st.integers(0, len(items))), assistant(draw(texts)))
    drop = draw(st.integers(0, len(outputs))) if draw(st.integers(0, 5)) == 0 else len(outputs)
    outputs = draw(st.permutations(outputs))[:drop]
    return [*items, *outputs]


turn_items = st.one_of(
    tool_round(),
    tool_round(),
    st.builds(lambda t: [user(t)], texts),
    st.builds(lambda t: [assistant(t)], texts),
    st.builds(lambda t: [developer(t)], texts),
    st.builds(lambda c, t: [function_output(c, t)], call_ids, texts),  # an output whose call comes later, or never
    st.builds(lambda t: [reasoning(content=t)], texts),
    st.just([{"type": "additional_tools", "role": "developer", "tools": [LOADED]}]),
    st.just([{"type": "web_search_call", "status": "completed", "action": {"type": "search"}}]),
    st.just([user("look"), {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": PNG}]}]),
)

# What happens between two requests: the conversation grows (most often), or the client
# changes something.
steps = st.one_of(
    st.tuples(st.just("grow"), st.lists(turn_items, min_size=1, max_size=3)),
    st.tuples(st.just("grow"), st.lists(turn_items, min_size=1, max_size=3)),
    st.tuples(st.just("grow"), st.lists(turn_items, min_size=1, max_size=3)),
    st.tuples(st.just("same"), st.none()),
    st.tuples(st.just("truncate"), st.integers(0, 40)),
    st.tuples(st.just("edit"), st.tuples(st.integers(0, 40), texts)),
    st.tuples(st.just("model"), st.sampled_from(["gpt-5.5", "gpt-5.4", "qwen3"])),
    st.tuples(st.just("upstream model"), st.sampled_from([None, "served-name"])),
    st.tuples(st.just("profile"), st.sampled_from(PROFILES)),
    st.tuples(st.just("instructions"), st.sampled_from([None, "Be brief.", "Be thorough."])),
    st.tuples(st.just("tools"), st.sampled_from([TOOLS, TOOLS[:3], [], CLASHING_TOOLS])),
    st.tuples(st.just("fork"), st.lists(turn_items, min_size=1, max_size=2)),
)


def request_body(
    model: str, instructions: str | None, items: list[JSON], tools: list[JSON], *, instructions_first: bool = True
) -> bytes:
    """The body as Codex writes it: compact, model first, the input, then the rest; the
    instructions before the input, or (as the openai SDK writes them) after it."""
    head: JSON = {"model": model}
    rest: JSON = {"tools": tools, "tool_choice": "auto", "stream": True, "store": False, "prompt_cache_key": "t1"}
    if instructions is not None:
        (head if instructions_first else rest)["instructions"] = instructions
    return orjson.dumps({**head, "input": items, **rest})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    first=st.lists(turn_items, max_size=4),
    program=st.lists(steps, min_size=1, max_size=12),
    instructions_first=st.booleans(),
)
def test_a_growing_conversation_is_translated_as_if_every_item_were_new(
    first: list[list[JSON]], program: list[tuple[str, Any]], instructions_first: bool
) -> None:
    KNOWN_HISTORIES.clear()
    items = [user("start"), *(item for turn in first for item in turn)]
    model, upstream_model, instructions, tools, profile = "gpt-5.5", None, None, TOOLS, PROFILES[0]
    forks: list[list[JSON]] = []
    resumed = 0
    for step, value in program:
        if step == "grow":
            items = items + [item for turn in value for item in turn]
        elif step == "truncate":
            items = items[: min(value, len(items))]
        elif step == "edit" and items:
            index, text = value
            items = [*items[: index % len(items)], user(text), *items[index % len(items) + 1 :]]
        elif step == "model":
            model = value
        elif step == "upstream model":
            upstream_model = value
        elif step == "profile":
            profile = value
        elif step == "instructions":
            instructions = value
        elif step == "tools":
            tools = value
        elif step == "fork":
            forks.append(items + [item for turn in value for item in turn])
        for these in [items, *forks[-1:]] if step == "fork" else [items]:
            body = request_body(model, instructions, these, tools, instructions_first=instructions_first)
            through_history, resuming = outcome(body, profile, upstream_model)
            assert through_history == outcome(orjson.loads(body), profile, upstream_model)[0]
            resumed += resuming
    event(f"requests resuming a saved build: {min(resumed, 6)}")


# ---------------------------------------------------------------- the history is really used


@pytest.mark.parametrize("profile", PROFILES, ids=lambda profile: profile.name)
def test_a_long_session_continues_each_turn_and_saves_each_build(profile: BackendProfile) -> None:
    items = [developer("rules"), user("go")]
    before: list[Any] = []
    system_json: bytes | None = None
    for turn in range(30):
        new = [function_call(f"call_{turn}", "exec_command", '{"cmd":"ls"}'), function_output(f"call_{turn}", "out")]
        if turn % 3 == 0:
            new = [reasoning(summary=f"step {turn}"), *new]
        elif turn % 3 == 1:
            new = [assistant(f"now step {turn}"), *new]
        items += new
        body = request_body("gpt-5.5", None, items, TOOLS)
        request = parse_request(body)
        link = request.history()
        assert link is not None and link.known == (0 if turn == 0 else len(items) - len(new))
        assert link.continues is None or link.continues.derived, "the turn before saved its build"
        translated = translate_request(request, profile)
        expected = orjson.dumps(translate_request(uncached(body), profile).chat)
        assert orjson.dumps(translated.chat) == orjson.dumps(translated.wire_body()) == expected
        assert turn == 0 or translated.serialized is not None  # the history's messages are not serialized again
        # The leading system message ("rules") is serialized once, by the first turn's save.
        assert translated.serialized is not None and translated.serialized.system is not None
        assert turn == 0 or translated.serialized.system is system_json
        system_json = translated.serialized.system
        assert link.own is not None and link.own.derived
        # The turn before's messages are resumed, not built again: the very same objects (but
        # the leading system message, and that turn's last two, closed only by this one).
        messages = translated.chat["messages"]
        resumed = max(1, len(before) - 2)
        assert all(now is then for now, then in zip(messages[1:resumed], before[1:resumed], strict=True))
        before = messages


@pytest.mark.parametrize(
    ("items", "system", "runs"),
    [
        pytest.param([developer("rules"), user("go")], True, False, id="a system message and nothing else kept"),
        pytest.param([developer("rules"), user("go"), function_call("c1", "exec_command", "{}"), function_output("c1", "ok")],
                     True, True, id="a system message and messages kept"),
        pytest.param([user("go"), function_call("c1", "exec_command", "{}"), function_output("c1", "ok")],
                     False, True, id="messages kept, no system message"),
    ],
)
def test_what_a_save_serialized_goes_upstream_as_those_bytes(items: list[JSON], system: bool, runs: bool) -> None:
    """The first request of a session saves its build: what it serialized then (the leading
    system message, the messages that no longer change) goes upstream as those bytes."""
    KNOWN_HISTORIES.clear()
    translated = translate_request(parse_request(request_body("gpt-5.5", None, items, TOOLS)), PROFILES[0])
    serialized = translated.serialized
    assert serialized is not None
    assert (serialized.system is not None) is system and bool(serialized.runs) is runs
    wire = translated.wire_body()
    assert orjson.dumps(wire) == orjson.dumps(translated.chat)
    fragments = [message for message in wire["messages"] if isinstance(message, orjson.Fragment)]
    assert len(fragments) == int(system) + len(serialized.runs)
    assert isinstance(wire["messages"][0], orjson.Fragment)  # the system message, or the first run


@pytest.mark.parametrize(
    ("items", "later", "expected"),
    [
        # an output whose call has not come (yet): dropped for now, used once the call comes
        ([user("go"), function_output("call_1", "early")], [function_call("call_1", "exec_command")], b"early"),
        # a call whose output has not come when its turn closes: "aborted" for now
        ([user("go"), function_call("call_2", "exec_command"), user("more")], [function_output("call_2", "late")],
         b"late"),
    ],
)
def test_a_walk_that_depends_on_later_items_is_not_saved(items: list[JSON], later: list[JSON], expected: bytes) -> None:
    request = parse_request(request_body("gpt-5.5", None, items, TOOLS))
    assert expected not in orjson.dumps(translate_request(request).chat)
    link = request.history()
    assert link is not None and link.own is not None and "chat messages" not in link.own.derived
    body = request_body("gpt-5.5", None, [*items, *later], TOOLS)
    assert continued(body) == len(items)
    chat = orjson.dumps(translate_request(parse_request(body)).chat)
    assert chat == orjson.dumps(translate_request(uncached(body)).chat)
    assert expected in chat


def test_a_walk_with_an_output_before_its_call_in_the_same_request_is_saved() -> None:
    items = [user("go"), function_output("call_1", "early"), function_call("call_1", "exec_command")]
    request = parse_request(request_body("gpt-5.5", None, items, TOOLS))
    translate_request(request)
    link = request.history()
    assert link is not None and link.own is not None and "chat messages" in link.own.derived


@pytest.mark.parametrize("profile", PROFILES, ids=lambda profile: profile.name)
def test_requests_resuming_one_saved_build_leave_it_as_it_was(profile: BackendProfile) -> None:
    # the history ends in an open turn: one call, its output not there yet
    items = [developer("rules"), user("go"), reasoning(content="think"), assistant("first"),
             function_call("call_1", "exec_command", '{"cmd":"ls"}')]
    body = request_body("gpt-5.5", None, items, TOOLS)
    translate_request(parse_request(body), profile)
    again = parse_request(body)  # a retry: the same history, nothing new
    longer = [*items, function_call("call_2", "exec_command"), function_output("call_1", "a"),
              function_output("call_2", "b"), user("more"), assistant("second")]
    grown = parse_request(request_body("gpt-5.5", None, longer, TOOLS))
    for request, raw in ((grown, longer), (again, items)):  # the longer one resumes it first
        link = request.history()
        assert link is not None and link.continues is not None and "chat messages" in link.continues.derived
        expected = orjson.dumps(translate_request(uncached(request_body("gpt-5.5", None, raw, TOOLS)), profile).chat)
        translated = translate_request(request, profile)
        assert orjson.dumps(translated.chat) == orjson.dumps(translated.wire_body()) == expected


def test_a_saved_build_is_kept_per_profile() -> None:
    items = [user("go"), reasoning(content="think"), assistant("done")]
    body = request_body("gpt-5.5", None, items, TOOLS)
    for profile in PROFILES:
        translate_request(parse_request(body), profile)
    saved = parse_request(body).history().continues.derived["chat messages"]  # type: ignore[union-attr]
    assert {kept.profile for kept in saved} == set(PROFILES)


def test_an_error_in_a_new_item_names_its_place_in_the_whole_request() -> None:
    items = [user("go"), function_call("call_1", "exec_command"), function_output("call_1", "ok")]
    translate_request(parse_request(request_body("gpt-5.5", None, items, TOOLS)))
    by_id = {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "see"}, {"type": "input_image", "file_id": "file-1"}]}
    body = request_body("gpt-5.5", None, [*items, user("more"), by_id], TOOLS)
    request = parse_request(body)
    assert request.history() is not None and request.history().known == len(items)  # type: ignore[union-attr]
    with pytest.raises(ClientError) as continuing:
        translate_request(request)
    with pytest.raises(ClientError) as whole:
        translate_request(uncached(body))
    assert continuing.value.param == whole.value.param == f"input[{len(items) + 1}].content[1]"
    assert continuing.value.message == whole.value.message
