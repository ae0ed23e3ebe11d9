"""``kind = "mock"``: the built-in scripted model, through the ``Backend`` seam as the
gateway drives it (prepare, then stream or fetch, the answer through its machine)."""

from __future__ import annotations

from typing import Any

import orjson
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from toolwire.config import ServerConfig, UpstreamConfig
from toolwire.protocol import parse_request
from toolwire.upstream import Backend, BackendSetup, backend_kind

JSON = dict[str, Any]
LS = {"type": "function", "name": "ls", "parameters": {"type": "object"}}
AGENTS = {
    "type": "namespace",
    "name": "collaboration",
    "description": "agents",
    "tools": [{"type": "function", "name": "list_agents", "parameters": {"type": "object"}}],
}


def mock() -> Backend:
    return backend_kind("mock").build(UpstreamConfig(name="mock", kind="mock"), BackendSetup(ServerConfig(), {}))


async def streamed(body: JSON) -> tuple[list[JSON], JSON, JSON]:
    """The Responses events of a streamed answer, the final response, and what was asked."""
    backend = mock()
    call = backend.prepare(parse_request(orjson.dumps(body)), upstream_model="mock-1", response_id="resp_1", created_at=1)
    machine = call.translator()
    events = list(machine.start())
    async with backend.stream(call.body) as batches:
        batch_count = 0
        async for batch in batches:
            batch_count += 1
            for chunk in batch:
                events.extend(machine.feed(chunk))
        assert batches.ended_cleanly and batch_count == 1  # one read holds the whole answer
    events.extend(machine.finish(completed_at=2, ended_cleanly=True))
    return events, machine.response, dict(call.body)


async def whole(body: JSON) -> tuple[JSON, JSON]:
    backend = mock()
    call = backend.prepare(parse_request(orjson.dumps(body)), upstream_model="mock-1", response_id="resp_1", created_at=1)
    answer = await backend.fetch(call.body)
    return answer, call.translator().translate_whole(answer)


def deltas(events: list[JSON], kind: str) -> list[str]:
    return [event["delta"] for event in events if event["type"] == kind]


def usage_of(messages: list[JSON], written: str) -> JSON:
    return {"prompt_tokens": len(orjson.dumps(messages)) // 4, "completion_tokens": len(written) // 4 + 1}


async def test_it_echoes_in_pieces_of_twelve_characters() -> None:
    events, response, asked = await streamed({"model": "m", "input": "hello there, gateway"})
    assert deltas(events, "response.output_text.delta") == ["You said: he", "llo there, g", "ateway"]
    [message] = response["output"]
    assert message["content"][0]["text"] == "You said: hello there, gateway"
    expected = usage_of(asked["messages"], "You said: hello there, gateway")
    assert (response["usage"]["input_tokens"], response["usage"]["output_tokens"]) == (
        expected["prompt_tokens"],
        expected["completion_tokens"],
    )
    assert response["status"] == "completed"


async def test_think_streams_a_reasoning_text_first() -> None:
    said = "Think it over"
    events, response, _ = await streamed({"model": "m", "input": said})
    reasoning = f"The user wrote {len(said)} characters; I will answer literally."
    assert "".join(deltas(events, "response.reasoning_text.delta")) == reasoning
    assert all(len(piece) <= 12 for piece in deltas(events, "response.reasoning_text.delta"))
    assert [item["type"] for item in response["output"]] == ["reasoning", "message"]
    answer, _ = await whole({"model": "m", "input": said})
    assert answer["choices"][0]["message"]["reasoning_content"] == reasoning


async def test_call_lines_make_parallel_calls_of_declared_tools() -> None:
    said = 'call ls {"path": "src"}\nCALL list_agents\ncall nothing_declared {}\n  call ls'
    events, response, asked = await streamed({"model": "m", "input": said, "tools": [LS, AGENTS]})
    calls = [(item["type"], item.get("namespace"), item["name"], item["arguments"]) for item in response["output"]]
    assert calls == [
        ("function_call", None, "ls", '{"path": "src"}'),
        ("function_call", "collaboration", "list_agents", "{}"),
        ("function_call", None, "ls", "{}"),
    ]
    assert len({item["call_id"] for item in response["output"]}) == 3
    assert all(item["call_id"].startswith("call_") and len(item["call_id"]) == 21 for item in response["output"])
    assert deltas(events, "response.function_call_arguments.delta")[:2] == ['{"path": "sr', 'c"}']
    written = '{"path": "src"}' + "{}" + "{}"
    assert response["usage"]["output_tokens"] == usage_of(asked["messages"], written)["completion_tokens"]


async def test_without_a_declared_tool_a_call_line_is_just_echoed() -> None:
    _, response, _ = await streamed({"model": "m", "input": "call ls {}"})
    assert response["output"][0]["content"][0]["text"] == "You said: call ls {}"


def tool_turn(*outputs: tuple[str, str]) -> JSON:
    """A conversation where the model called ``ls`` and ``list_agents`` and the outputs came back."""
    return {
        "model": "m",
        "tools": [LS, AGENTS],
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
            {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "list_agents", "namespace": "collaboration", "arguments": "{}"},
            *({"type": "function_call_output", "call_id": call_id, "output": output} for call_id, output in outputs),
        ],
    }


async def test_after_tool_outputs_it_says_what_each_returned() -> None:
    _, response, _ = await streamed(tool_turn(("c1", "a.txt b.txt"), ("c2", "alice")))
    text = response["output"][0]["content"][0]["text"]
    assert text == "ls returned: a.txt b.txt\ncollaboration__list_agents returned: alice"
    _, whole_response = await whole(tool_turn(("c2", "alice")))  # the other call's output is missing
    assert whole_response["output"][0]["content"][0]["text"] == (
        "ls returned: aborted\ncollaboration__list_agents returned: alice"
    )
    # an output whose call it never made: named "tool"
    orphan = await mock().fetch({"messages": [{"role": "tool", "tool_call_id": "x", "content": "out"}]})
    assert orphan["choices"][0]["message"]["content"] == "tool returned: out"


async def test_a_user_message_in_parts_is_read_for_its_text() -> None:
    image = {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}
    parts = [{"type": "input_text", "text": "look: "}, image, {"type": "input_text", "text": "a cat"}]
    _, response, asked = await streamed({"model": "m", "input": [{"type": "message", "role": "user", "content": parts}]})
    assert isinstance(asked["messages"][0]["content"], list)  # sent upstream as parts
    assert response["output"][0]["content"][0]["text"] == "You said: look: a cat"


async def test_a_whole_answer() -> None:
    answer, response = await whole({"model": "m", "input": "call ls", "tools": [LS]})
    assert answer["object"] == "chat.completion" and answer["id"].startswith("chatcmpl-mock-")
    assert len(answer["id"]) == len("chatcmpl-mock-") + 12
    assert answer["model"] == "mock-1"
    [choice] = answer["choices"]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert "reasoning_content" not in choice["message"]
    [call] = choice["message"]["tool_calls"]
    assert (call["type"], call["function"]) == ("function", {"name": "ls", "arguments": "{}"})
    assert answer["usage"]["total_tokens"] == answer["usage"]["prompt_tokens"] + answer["usage"]["completion_tokens"]
    assert response["output"][0]["type"] == "function_call"
    plain, _ = await whole({"model": "m", "input": "hi"})
    assert plain["choices"][0]["finish_reason"] == "stop" and "tool_calls" not in plain["choices"][0]["message"]
    assert plain["choices"][0]["message"] == {"role": "assistant", "content": "You said: hi"}


async def test_an_empty_conversation_and_a_model_left_unnamed() -> None:
    backend = mock()
    answer = await backend.fetch({})
    assert answer["model"] == "mock" and answer["choices"][0]["message"]["content"] == "You said: "
    assert answer["usage"]["prompt_tokens"] == 0
    async with backend.stream({}) as batches:
        [chunks] = [batch async for batch in batches]
    assert [chunk["model"] for chunk in chunks] == ["mock"] * len(chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-1]["choices"] == [] and chunks[-2]["choices"][0]["finish_reason"] == "stop"


async def test_it_needs_nothing_to_be_ready_and_compacts_nothing_itself() -> None:
    backend = mock()
    assert await backend.check() is None
    assert backend.native_compaction is None
    assert await backend.aclose() is None
    assert backend_kind("mock").needs_base_url is False


async def chunks_of(body: JSON) -> list[JSON]:
    backend = mock()
    call = backend.prepare(parse_request(orjson.dumps(body)), upstream_model="mock-1", response_id="resp_1", created_at=1)
    async with backend.stream(call.body) as batches:
        return [chunk async for batch in batches for chunk in batch]


async def test_what_it_streams_and_answers_is_valid_chat_completions() -> None:
    for body in ({"model": "m", "input": "think first\ncall ls {}", "tools": [LS]}, {"model": "m", "input": "call ls", "tools": [LS]}):
        chunks = await chunks_of(body)
        for chunk in chunks:
            ChatCompletionChunk.model_validate(chunk)
        assert {chunk["id"] for chunk in chunks} == {chunks[0]["id"]} and len(chunks[0]["id"]) == len("chatcmpl-mock-") + 12
        assert chunks[0]["id"].startswith("chatcmpl-mock-")
        # Every choice says finish_reason, null until the last, as OpenAI's server writes it.
        assert all(set(c["choices"][0]) == {"index", "delta", "finish_reason"} for c in chunks if c["choices"])
        assert {chunk["model"] for chunk in chunks} == {"mock-1"}
        assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert chunks[-2]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "tool_calls"}
        [opening] = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("tool_calls", [{}])[0].get("id")]
        assert opening["choices"][0]["delta"]["tool_calls"][0]["function"] == {"name": "ls", "arguments": ""}
        assert opening["choices"][0]["delta"]["tool_calls"][0]["type"] == "function"
        answer, _ = await whole(body)
        ChatCompletion.model_validate(answer)


async def test_the_response_is_the_one_the_gateway_names() -> None:
    _, response, _ = await streamed({"model": "m", "input": "hi"})
    assert (response["id"], response["created_at"], response["model"]) == ("resp_1", 1, "m")


async def test_a_whole_answer_counts_what_it_wrote() -> None:
    answer, _ = await whole({"model": "m", "input": "hello"})
    call = mock().prepare(parse_request(b'{"model":"m","input":"hello"}'), upstream_model="mock-1", response_id="r", created_at=1)
    expected = usage_of(call.body["messages"], "You said: hello")
    assert answer["usage"] == {**expected, "total_tokens": expected["prompt_tokens"] + expected["completion_tokens"]}


async def test_it_answers_only_what_the_user_said_last() -> None:
    conversation = [
        {"type": "message", "role": "user", "content": "call ls"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "I will not."}]},
    ]
    _, response, _ = await streamed({"model": "m", "input": conversation, "tools": [LS]})
    assert response["output"][0]["content"][0]["text"] == "You said: "
    _, asked_politely, _ = await streamed({"model": "m", "input": "please ls", "tools": [LS]})
    assert [item["type"] for item in asked_politely["output"]] == ["message"], "only 'call <tool>' makes a call"
