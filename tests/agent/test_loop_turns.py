"""The agent loop turn by turn, against the in-memory scripted model: what each request
carries, the events a run reports (each with its turn), every way a response or a call
ends the run, ``tool_search`` calls answered by a handler, and the final answer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from toolwire.agent import (
    AgentEvent,
    AgentLoop,
    AssistantMessage,
    CustomToolHandler,
    FunctionToolHandler,
    ModelRequested,
    ScriptedResponse,
    ScriptedResponsesClient,
    ToolCallFinished,
    ToolCallStarted,
    ToolContext,
    ToolHandler,
    ToolOutput,
    assistant_message,
    custom_tool_call,
    final_answer,
    function_call,
    register_tool,
)
from toolwire.errors import UpstreamError
from toolwire.protocol import (
    CustomTool,
    FunctionTool,
    InputImage,
    InputText,
    MessageItem,
    OutputText,
    Refusal,
    ToolSearchTool,
    parse_item,
)
from toolwire.tools import FatalRuntimeError, RespondToModel, ToolName, ToolRouter

JSON = dict[str, Any]


class Echo(FunctionToolHandler):
    spec = FunctionTool(type="function", name="echo", parameters={"type": "object"})

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        if arguments.get("fail"):
            raise RespondToModel("echo was told to fail")
        if arguments.get("crash"):
            raise ValueError("boom")
        if arguments.get("image"):
            return ToolOutput([InputText(type="input_text", text="look"), InputImage(type="input_image", image_url="data:,")])
        return ToolOutput(f"echo {arguments.get('text', '')}")


class Pad(CustomToolHandler):
    spec = CustomTool(type="custom", name="pad")

    async def run(self, text: str, context: ToolContext) -> ToolOutput:
        return ToolOutput(text.upper())


class Search(ToolHandler):
    """A client-side ``tool_search`` that always finds the ``echo`` tool."""

    spec = ToolSearchTool(type="tool_search")

    async def handle(self, invocation: Any) -> ToolOutput:
        return ToolOutput("", tools=(Echo.spec,))


class NotAHandler:
    """Registered in the router (it takes function calls), but not something the loop can run."""

    def accepts(self, kind: Any) -> bool:
        return True


def router(*handlers: ToolHandler) -> ToolRouter:
    made = ToolRouter()
    for handler in handlers or (Echo(), Pad()):
        register_tool(made, handler)
    return made


async def run_loop(
    replies: list[ScriptedResponse], prompt: Any = "go", *, tools: ToolRouter | None = None, **options: Any
) -> tuple[Any, ScriptedResponsesClient, list[AgentEvent]]:
    client = ScriptedResponsesClient(*replies)
    events: list[AgentEvent] = []
    loop = AgentLoop(
        client, tools or router(), model="m", context=ToolContext(Path(".")), on_event=events.append, **options
    )
    result = await loop.run(prompt)
    return result, client, events


def echo(text: str, call_id: str, **extra: Any) -> JSON:
    import orjson

    return function_call("echo", orjson.dumps({"text": text, **extra}).decode(), call_id)


async def test_each_request_carries_the_conversation_and_the_tools() -> None:
    result, client, _ = await run_loop(
        [ScriptedResponse([echo("a", "c1")]), ScriptedResponse([assistant_message("done")])],
        instructions="Be brief.",
        request_fields={"reasoning": {"effort": "low"}, "store": True},
    )
    first, second = client.requests
    assert first == {
        "model": "m",
        "instructions": "Be brief.",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}],
        "tools": [Echo.spec.dump(), Pad.spec.dump()],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "store": True,  # request_fields win
        "stream": True,
        "reasoning": {"effort": "low"},
    }
    assert [item["type"] for item in second["input"]] == ["message", "function_call", "function_call_output"]
    assert (result.answer, result.turns, len(result.history)) == ("done", 2, 4)


async def test_without_tools_or_instructions_the_request_says_neither() -> None:
    _, client, _ = await run_loop([ScriptedResponse([assistant_message("hi")])], tools=ToolRouter())
    assert client.requests[0] == {
        "model": "m",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}],
        "store": False,
        "stream": True,
    }


async def test_a_conversation_can_be_the_prompt() -> None:
    history = [parse_item({"type": "message", "role": "user", "content": "earlier"})]
    result, client, _ = await run_loop([ScriptedResponse([assistant_message("ok")])], history)
    assert client.requests[0]["input"] == [{"type": "message", "role": "user", "content": "earlier"}]
    assert result.history[0] == history[0]


async def test_the_events_of_a_run_name_their_turn() -> None:
    replies = [
        ScriptedResponse([assistant_message("Calling."), echo("a", "c1"), function_call("missing", "{}", "c2")]),
        ScriptedResponse([custom_tool_call("pad", "x", "c3")]),
        ScriptedResponse([assistant_message("Done.")]),
    ]
    _, _, events = await run_loop(replies)
    simple = [
        (type(e).__name__, e.turn, getattr(getattr(e, "call", None), "call_id", None), getattr(e, "output", None),
         getattr(e, "success", None), getattr(e, "text", None))
        for e in events
    ]  # fmt: skip
    # Calls of one turn run at once: their events interleave in any order, each call's start first.
    assert sorted(simple, key=lambda e: (e[1], str(e[2]), e[0])) == sorted([
        ("ModelRequested", 1, None, None, None, None),
        ("ToolCallStarted", 1, "c1", None, None, None),
        ("ToolCallStarted", 1, "c2", None, None, None),
        ("ToolCallFinished", 1, "c2", "unsupported call: missing", False, None),
        ("ToolCallFinished", 1, "c1", "echo a", True, None),
        ("AssistantMessage", 1, None, None, None, "Calling."),
        ("ModelRequested", 2, None, None, None, None),
        ("ToolCallStarted", 2, "c3", None, None, None),
        ("ToolCallFinished", 2, "c3", "X", True, None),
        ("ModelRequested", 3, None, None, None, None),
    ], key=lambda e: (e[1], str(e[2]), e[0]))  # fmt: skip
    turns = [e[1] for e in simple]
    assert turns == sorted(turns), "every event of a turn comes before the next turn's"
    for turn in (1, 2, 3):
        assert simple[turns.index(turn)][0] == "ModelRequested"
    assert simple[turns.index(2) - 1][0] == "AssistantMessage", "the text is reported once its calls are done"
    for call_id in ("c1", "c2", "c3"):
        kinds = [e[0] for e in simple if e[2] == call_id]
        assert kinds == ["ToolCallStarted", "ToolCallFinished"]
    unknown = next(e for e in events if isinstance(e, ToolCallFinished) and e.call.call_id == "c2")
    assert unknown.seconds == 0.0
    ran = next(e for e in events if isinstance(e, ToolCallFinished) and e.call.call_id == "c1")
    assert 0.0 <= ran.seconds < 60
    assert isinstance(events[0], ModelRequested) and isinstance(events[1], ToolCallStarted)
    assert any(isinstance(e, AssistantMessage) for e in events)


async def test_a_tool_that_tells_the_model_it_failed_and_one_that_returns_parts() -> None:
    replies = [ScriptedResponse([echo("", "c1", fail=True), echo("", "c2", image=True)]), ScriptedResponse([assistant_message("ok")])]
    _, client, events = await run_loop(replies)
    outputs = [item for item in client.requests[1]["input"] if item["type"] == "function_call_output"]
    assert outputs[0]["output"] == "echo was told to fail"
    assert outputs[1]["output"] == [{"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": "data:,"}]
    finished = {e.call.call_id: e for e in events if isinstance(e, ToolCallFinished)}
    assert (finished["c1"].output, finished["c1"].success) == ("echo was told to fail", False)
    assert (finished["c2"].output, finished["c2"].success) == ("look\n[input_image]", True)


async def test_a_tool_that_crashes_ends_the_run_and_stops_the_others() -> None:
    stopped: list[str] = []

    class Slow(FunctionToolHandler):
        spec = FunctionTool(type="function", name="slow", parameters={"type": "object"})

        async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                stopped.append("slow")
                raise
            return ToolOutput("never")

    replies = [ScriptedResponse([function_call("slow", "{}", "c0"), echo("", "c1", crash=True)])]
    with pytest.raises(FatalRuntimeError) as crashed:
        await asyncio.wait_for(run_loop(replies, tools=router(Echo(), Slow())), 20)
    assert crashed.value.message == "tool echo failed: ValueError('boom')"
    assert stopped == ["slow"]


async def test_a_handler_the_loop_cannot_run_ends_the_run() -> None:
    tools = ToolRouter()
    tools.register(ToolName(None, "odd"), FunctionTool(type="function", name="odd", parameters={}), NotAHandler())  # type: ignore[arg-type]
    with pytest.raises(FatalRuntimeError) as refused:
        await run_loop([ScriptedResponse([function_call("odd", "{}", "c1")])], tools=tools)
    assert refused.value.message == "tool odd is registered without an executable handler"


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (ScriptedResponse(status="failed", error_message="overloaded"), "The response failed: overloaded."),
        (ScriptedResponse(status="failed", error_message=""), "The response failed: no reason given."),
        (ScriptedResponse(status="incomplete"), "The response is incomplete: max_output_tokens."),
    ],
)
async def test_a_response_that_does_not_complete_ends_the_run(reply: ScriptedResponse, message: str) -> None:
    with pytest.raises(UpstreamError) as ended:
        await run_loop([reply])
    assert ended.value.message == message


async def test_a_tool_search_is_answered_with_the_tools_found() -> None:
    search_call = {"type": "tool_search_call", "call_id": "s1", "execution": "client", "arguments": {"query": "echo"},
                   "status": "completed"}  # fmt: skip
    broken_call = {"type": "tool_search_call", "call_id": "s2", "execution": "client", "arguments": "{not json",
                   "status": "completed"}  # fmt: skip
    server_side = {"type": "tool_search_call", "call_id": "s3", "execution": "server", "arguments": {}, "status": "completed"}
    replies = [ScriptedResponse([search_call, broken_call, server_side]), ScriptedResponse([assistant_message("found")])]
    _, client, events = await run_loop(replies, tools=router(Echo(), Search()))
    outputs = [item for item in client.requests[1]["input"] if item["type"] == "tool_search_output"]
    assert outputs == [
        {"type": "tool_search_output", "call_id": "s1", "execution": "client", "status": "completed", "tools": [Echo.spec.dump()]},
        {"type": "tool_search_output", "call_id": "s2", "execution": "client", "status": "completed", "tools": []},
    ]
    [found] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert (found.call.call_id, found.output) == ("s1", "1 tools")


def message(role: str, *parts: Any) -> MessageItem:
    return MessageItem(type="message", role=role, content=list(parts))  # type: ignore[arg-type]


def test_the_final_answer_is_the_last_assistant_text() -> None:
    said = message("assistant", OutputText(type="output_text", text="Almost "), OutputText(type="output_text", text="done."))
    refused = message("assistant", Refusal(type="refusal", refusal="I can't."))
    plain = MessageItem(type="message", role="assistant", content="plain")
    user = message("user", InputText(type="input_text", text="not an answer"))
    assert final_answer([said, user]) == "Almost done."
    assert final_answer([said, refused]) == "I can't."
    assert final_answer([plain]) == "plain"
    assert final_answer([said, message("assistant")]) == "Almost done.", "an empty message is no answer"
    assert final_answer([user]) == ""


async def test_by_default_four_calls_run_at_once() -> None:
    running: set[str] = set()
    release = asyncio.Event()

    class Wait(FunctionToolHandler):
        spec = FunctionTool(type="function", name="wait", parameters={"type": "object"})

        async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
            running.add(arguments["n"])
            await release.wait()
            return ToolOutput("ok")

    calls = [function_call("wait", f'{{"n": "{n}"}}', f"c{n}") for n in range(6)]
    run = asyncio.ensure_future(run_loop([ScriptedResponse(calls), ScriptedResponse([assistant_message("done")])],
                                         tools=router(Wait())))  # fmt: skip
    async with asyncio.timeout(20):
        while len(running) < 4:
            await asyncio.sleep(0.005)
    for _ in range(20):  # give a fifth call every chance to start
        await asyncio.sleep(0.005)
    assert len(running) == 4
    release.set()
    result, _, _ = await asyncio.wait_for(run, 20)
    assert result.answer == "done" and len(running) == 6


async def test_when_a_call_crashes_the_others_have_finished_stopping_before_the_run_ends() -> None:
    """A tool that takes a while to stop when cancelled (as exec_command waits for its
    killed processes): the run raises only once it has stopped."""
    stopped: list[str] = []

    class SlowToStop(FunctionToolHandler):
        spec = FunctionTool(type="function", name="slow", parameters={"type": "object"})

        async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                await asyncio.sleep(0.05)  # cleaning up
                stopped.append("slow")
                raise
            return ToolOutput("never")

    replies = [ScriptedResponse([function_call("slow", "{}", "c0"), echo("", "c1", crash=True)])]
    async with asyncio.timeout(20):
        with pytest.raises(FatalRuntimeError, match="tool echo failed"):
            await run_loop(replies, tools=router(Echo(), SlowToStop()))
        assert stopped == ["slow"]
