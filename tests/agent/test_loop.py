"""The agent loop against a scripted Responses server over real HTTP (and the in-memory fake)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.responses_upstream import Events, HttpError, ResponsesUpstream, Whole
from tests.upstream.raw_upstream import raw_upstream
from toolwire.agent import (
    AgentEvent,
    AgentLoop,
    FunctionToolHandler,
    HttpResponsesClient,
    ScriptedResponse,
    ScriptedResponsesClient,
    ToolCallFinished,
    ToolCallStarted,
    ToolContext,
    ToolOutput,
    assistant_message,
    builtin_router,
    custom_tool_call,
    function_call,
    register_tool,
    response_events,
    response_stream,
)
from toolwire.errors import UpstreamError
from toolwire.protocol import FunctionTool
from toolwire.tools import FatalRuntimeError, ToolRouter

from .processes import pid_from, wait_until_stopped

ADD_HELLO = "*** Begin Patch\n*** Add File: hello.txt\n+hello world\n*** End Patch\n"


def agent(client: Any, context: ToolContext, **options: Any) -> AgentLoop:
    return AgentLoop(
        client,
        options.pop("router", None) or builtin_router(),
        model="m",
        context=context,
        **options,
    )


def by_type(items: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [item for item in items if item.get("type") == kind]


async def test_function_and_custom_call_in_one_response_are_paired_by_call_id(
    server: ResponsesUpstream, full_access: ToolContext
) -> None:
    server.enqueue(
        ScriptedResponse(
            [
                assistant_message("Running both."),
                function_call("exec_command", '{"cmd": "echo hi"}', "call_fn"),
                custom_tool_call("apply_patch", ADD_HELLO, "call_custom"),
            ]
        ),
        ScriptedResponse([assistant_message("All done.")]),
    )
    async with HttpResponsesClient(server.base_url) as client:
        result = await agent(client, full_access).run("say hi and write hello.txt")

    assert result.answer == "All done."
    assert result.turns == 2
    assert (full_access.cwd / "hello.txt").read_text() == "hello world\n"
    first, second = server.bodies
    assert (
        first["stream"] is True
        and first["input"][0]["content"][0]["text"] == "say hi and write hello.txt"
    )
    tools = {tool["name"]: tool for tool in first["tools"]}
    assert tools["exec_command"]["type"] == "function"
    assert tools["apply_patch"]["type"] == "custom"
    assert tools["apply_patch"]["format"]["syntax"] == "lark"
    # The next request: the prompt, every output item of the response, then the outputs in call order.
    assert [item["type"] for item in second["input"]] == [
        "message",
        "message",
        "function_call",
        "custom_tool_call",
        "function_call_output",
        "custom_tool_call_output",
    ]
    function_output, custom_output = second["input"][4:]
    assert function_output["call_id"] == "call_fn"
    assert "Exit code: 0" in function_output["output"] and "hi\n" in function_output["output"]
    assert custom_output["call_id"] == "call_custom"
    assert (
        custom_output["output"].startswith("Success.") and "A hello.txt" in custom_output["output"]
    )


async def test_unknown_tools_are_told_to_the_model_and_the_loop_goes_on(
    server: ResponsesUpstream, full_access: ToolContext
) -> None:
    server.enqueue(
        ScriptedResponse(
            [
                function_call("list_agents", "{}", "call_1"),
                custom_tool_call("exec", "console.log(1)", "call_2", namespace="functions"),
            ]
        ),
        ScriptedResponse([assistant_message("Sorry, I cannot do that.")]),
    )
    events: list[AgentEvent] = []
    async with HttpResponsesClient(server.base_url) as client:
        result = await agent(client, full_access, on_event=events.append).run("list agents")

    assert result.answer == "Sorry, I cannot do that."
    outputs = server.bodies[1]["input"][3:]
    assert outputs == [
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": "unsupported call: list_agents",
        },
        {
            "type": "custom_tool_call_output",
            "call_id": "call_2",
            "output": "unsupported custom tool call: functions.exec",
        },
    ]
    finished = [event for event in events if isinstance(event, ToolCallFinished)]
    assert [event.success for event in finished] == [False, False]


async def test_bad_arguments_are_told_to_the_model(
    server: ResponsesUpstream, full_access: ToolContext
) -> None:
    server.enqueue(
        ScriptedResponse(
            [
                function_call("exec_command", "{not json", "call_1"),
                function_call("exec_command", '{"command": "ls"}', "call_2"),
            ]
        ),
        ScriptedResponse([assistant_message("ok")]),
    )
    async with HttpResponsesClient(server.base_url) as client:
        await agent(client, full_access).run("go")
    first, second = by_type(server.bodies[1]["input"], "function_call_output")
    assert first["output"].startswith("failed to parse function arguments:")
    assert second["output"] == "exec_command needs `cmd`, a non-empty string"


@pytest.mark.parametrize(
    "call",
    [
        function_call("apply_patch", '{"input": "*** Begin Patch"}', "call_1"),
        custom_tool_call("exec_command", "echo hi", "call_1"),
    ],
)
async def test_a_call_of_the_wrong_kind_fails_the_turn(
    server: ResponsesUpstream, full_access: ToolContext, call: dict[str, Any]
) -> None:
    server.enqueue(
        ScriptedResponse([call]), ScriptedResponse([assistant_message("never asked for")])
    )
    async with HttpResponsesClient(server.base_url) as client:
        with pytest.raises(
            FatalRuntimeError, match=f"tool {call['name']} invoked with incompatible payload"
        ):
            await agent(client, full_access).run("go")
    assert len(server.bodies) == 1


async def test_a_plain_answer_ends_the_loop_at_once(
    server: ResponsesUpstream, full_access: ToolContext
) -> None:
    server.enqueue(ScriptedResponse([assistant_message("42")]))
    async with HttpResponsesClient(server.base_url, api_key="sk-test") as client:
        result = await agent(client, full_access, instructions="Be brief.").run("answer?")
    assert (result.answer, result.turns) == ("42", 1)
    [request] = server.requests
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.json["instructions"] == "Be brief."
    assert request.json["model"] == "m" and request.json["store"] is False


async def test_a_failed_response_ends_the_run(
    server: ResponsesUpstream, full_access: ToolContext
) -> None:
    server.enqueue(ScriptedResponse(status="failed", error_message="model overloaded"))
    async with HttpResponsesClient(server.base_url) as client:
        with pytest.raises(UpstreamError, match="model overloaded"):
            await agent(client, full_access).run("go")


async def test_an_error_status_ends_the_run_with_the_servers_message(
    server: ResponsesUpstream, full_access: ToolContext
) -> None:
    error = {"error": {"message": "Invalid 'input[0]'", "type": "invalid_request_error"}}
    server.enqueue(HttpError(400, error))
    async with HttpResponsesClient(server.base_url) as client:
        with pytest.raises(UpstreamError, match=r"answered 400: Invalid 'input\[0\]'") as caught:
            await agent(client, full_access).run("go")
    assert caught.value.status == 400


def whole(reply: ScriptedResponse) -> Whole:
    """``reply`` as a server that ignores ``stream`` answers it: the Response, whole."""
    return Whole(response_events(reply)[-1]["response"])


async def test_a_server_that_answers_whole_instead_of_streaming_is_read_as_its_stream(
    server: ResponsesUpstream, full_access: ToolContext
) -> None:
    """Its calls run and their outputs go back as after a stream; an error object in place
    of the Response ends the run with the server's message."""
    server.enqueue(
        whole(ScriptedResponse([custom_tool_call("apply_patch", ADD_HELLO, "call_custom")])),
        whole(ScriptedResponse([assistant_message("Written.")])),
        Whole({"error": {"message": "model not loaded", "code": "model_not_found"}}),
    )
    async with HttpResponsesClient(server.base_url) as client:
        result = await agent(client, full_access).run("write hello.txt")
        assert (result.answer, result.turns) == ("Written.", 2)
        assert (full_access.cwd / "hello.txt").read_text() == "hello world\n"
        [output] = [item for item in server.bodies[1]["input"] if item["type"] == "custom_tool_call_output"]
        assert output["call_id"] == "call_custom" and output["output"].startswith("Success.")
        with pytest.raises(UpstreamError, match="The response failed: model not loaded"):
            await agent(client, full_access).run("again")


async def test_max_turns_stops_a_model_that_never_answers(full_access: ToolContext) -> None:
    client = ScriptedResponsesClient(
        *[ScriptedResponse([function_call("nothing", "{}", f"call_{n}")]) for n in range(3)]
    )
    with pytest.raises(FatalRuntimeError, match="2 requests without giving a final answer"):
        await agent(client, full_access, max_turns=2).run("go")
    assert len(client.requests) == 2


# ---------------------------------------------------------------- parallelism


class Sleeper(FunctionToolHandler):
    """Sleeps ``seconds`` and records how many sleepers ran at once."""

    def __init__(
        self, name: str = "sleep", *, parallel: bool = True, running: set[str] | None = None
    ) -> None:
        self.spec = FunctionTool(type="function", name=name, parameters={"type": "object"})
        self.parallel = parallel
        self.running: set[str] = set() if running is None else running
        self.log: list[tuple[str, frozenset[str]]] = []

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        label = str(arguments["label"])
        self.running.add(label)
        self.log.append((label, frozenset(self.running)))
        await asyncio.sleep(float(arguments["seconds"]))
        self.log.append((label, frozenset(self.running)))
        self.running.discard(label)
        return ToolOutput(f"slept {label}")


def sleep_call(label: str, seconds: float, name: str = "sleep") -> dict[str, Any]:
    return function_call(name, f'{{"label": "{label}", "seconds": {seconds}}}', f"call_{label}")


class Gate(FunctionToolHandler):
    """Each call waits until the test opens its label's gate; records who runs at once."""

    def __init__(self) -> None:
        self.spec = FunctionTool(type="function", name="gate", parameters={"type": "object"})
        self.parallel = True
        self.running: set[str] = set()
        self.gates: dict[str, asyncio.Event] = {}

    def gate(self, label: str) -> asyncio.Event:
        return self.gates.setdefault(label, asyncio.Event())

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        label = str(arguments["label"])
        self.running.add(label)
        try:
            await self.gate(label).wait()
        finally:
            self.running.discard(label)
        return ToolOutput(f"passed {label}")

    async def until_running(self, *labels: str) -> None:
        async with asyncio.timeout(20):
            while self.running != set(labels):
                await asyncio.sleep(0.005)


def gate_call(label: str) -> dict[str, Any]:
    return function_call("gate", f'{{"label": "{label}"}}', f"call_{label}")


async def test_calls_run_in_parallel_under_the_limit_and_outputs_keep_call_order(
    full_access: ToolContext,
) -> None:
    gate = Gate()
    router = ToolRouter()
    register_tool(router, gate)
    client = ScriptedResponsesClient(
        ScriptedResponse([gate_call("a"), gate_call("b"), gate_call("c")]),
        ScriptedResponse([assistant_message("done")]),
    )
    run = asyncio.create_task(agent(client, full_access, router=router, max_parallel=2).run("go"))
    await gate.until_running("a", "b")  # two at once, c waits for a free slot...
    gate.gate("b").set()
    await gate.until_running("a", "c")  # ...which b leaves, while a still runs
    gate.gate("c").set()
    gate.gate("a").set()  # a, started first, ends last
    await asyncio.wait_for(run, 20)

    outputs = by_type(client.requests[1]["input"], "function_call_output")
    assert [output["call_id"] for output in outputs] == ["call_a", "call_b", "call_c"]
    assert [output["output"] for output in outputs] == ["passed a", "passed b", "passed c"]


async def test_a_tool_that_is_not_parallel_runs_alone(full_access: ToolContext) -> None:
    running: set[str] = set()
    shared = Sleeper("shared", running=running)
    alone = Sleeper("alone", parallel=False, running=running)
    router = ToolRouter()
    register_tool(router, shared)
    register_tool(router, alone)
    client = ScriptedResponsesClient(
        ScriptedResponse(
            [
                sleep_call("s1", 0.1, "shared"),
                sleep_call("x", 0.1, "alone"),
                sleep_call("s2", 0.1, "shared"),
            ]
        ),
        ScriptedResponse([assistant_message("done")]),
    )
    await agent(client, full_access, router=router).run("go")
    # "x" waited for s1 to finish, and s2 (written after it) waited for "x".
    assert alone.log == [("x", {"x"}), ("x", {"x"})]
    assert shared.log == [("s1", {"s1"}), ("s1", {"s1"}), ("s2", {"s2"}), ("s2", {"s2"})]


# ---------------------------------------------------------------- cancellation


async def test_a_timeout_stops_running_tools(
    server: ResponsesUpstream, full_access: ToolContext
) -> None:
    pid_file = full_access.cwd / "pid"
    command = f"echo $$ > {pid_file}; exec sleep 600"
    server.enqueue(
        ScriptedResponse([function_call("exec_command", f'{{"cmd": "{command}"}}', "call_1")])
    )
    events: list[AgentEvent] = []
    async with HttpResponsesClient(server.base_url) as client:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(None) as deadline:
                run = asyncio.create_task(agent(client, full_access, on_event=events.append).run("sleep"))
                pid = await asyncio.to_thread(pid_from, pid_file)  # the command runs
                deadline.reschedule(asyncio.get_running_loop().time())  # and now time is up
                await run
    assert wait_until_stopped(pid)  # killed, long before its sleep 600 would end
    assert any(isinstance(event, ToolCallStarted) for event in events)
    assert not any(isinstance(event, ToolCallFinished) for event in events)


async def test_a_timeout_stops_the_stream(
    server: ResponsesUpstream, full_access: ToolContext
) -> None:
    server.enqueue(ScriptedResponse([assistant_message("never finished")], stall_after=3))
    async with HttpResponsesClient(server.base_url) as client:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await agent(client, full_access).run("go")
    assert await asyncio.to_thread(server.wait_for_disconnect) == 0


@pytest.mark.parametrize("opening_events", [2, 0])
async def test_a_stream_kept_alive_without_events_ends_the_run_after_the_event_timeout(
    full_access: ToolContext, opening_events: int
) -> None:
    """A server that sends only keep-alive comments is never silent, so the client's read
    timeout never ends it: the loop's own bound on the wait for an event does, after the
    stream's first events or from its start (none at all)."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    opening = response_stream(ScriptedResponse([assistant_message("never finished")]))[:opening_events]
    pings = [piece for _ in range(50) for piece in (b": ping\n\n", 0.1)]
    async with raw_upstream([head, *opening, *pings]) as url, HttpResponsesClient(url) as client:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(UpstreamError) as ended:
            await agent(client, full_access, event_timeout=0.6).run("go")
        waited = loop.time() - started
    assert ended.value.message == "The model's stream brought no event for more than 0.6 s."
    assert 0.55 <= waited < 3.0, waited  # not at the stream's end, 5 s on


async def test_events_further_apart_in_all_than_the_event_timeout_are_read(full_access: ToolContext) -> None:
    """Each event starts the wait again: a stream over three times the bound, an event every 0.3 s."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    frames = response_stream(ScriptedResponse([assistant_message("slow but sure")]))
    paced = [piece for frame in frames for piece in (frame, 0.3)]
    async with raw_upstream([head, *paced]) as url, HttpResponsesClient(url) as client:
        result = await agent(client, full_access, event_timeout=0.5).run("go")
    assert len(frames) * 0.3 > 3 * 0.5
    assert result.answer == "slow but sure"


async def test_cancelling_stops_the_fake_stream_and_the_tools(full_access: ToolContext) -> None:
    sleeper = Sleeper()
    router = ToolRouter()
    register_tool(router, sleeper)
    client = ScriptedResponsesClient(ScriptedResponse([sleep_call("a", 30)], stall_after=5))
    run = asyncio.create_task(agent(client, full_access, router=router).run("go"))
    while not sleeper.running:
        await asyncio.sleep(0.01)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert client.closed == 1  # the stream was still open (stalled) when the call started
    assert sleeper.log[-1] == ("a", frozenset({"a"}))  # started, never finished


async def test_a_stream_without_a_terminal_event_ends_the_run(full_access: ToolContext) -> None:
    class Truncated(ScriptedResponsesClient):
        async def _frames(self, reply: ScriptedResponse, index: int):  # type: ignore[no-untyped-def,override]
            frames = [frame async for frame in super()._frames(reply, index)]
            for frame in frames[:-1]:
                yield frame

    client = Truncated(ScriptedResponse([assistant_message("cut")]))
    with pytest.raises(UpstreamError, match="closed before a terminal event"):
        await agent(client, full_access).run("go")


async def test_calls_come_only_from_completed_items(full_access: ToolContext) -> None:
    """A call whose ``output_item.done`` never came is not run, even though the terminal
    event's ``output`` lists it."""
    sleeper = Sleeper()
    router = ToolRouter()
    register_tool(router, sleeper)

    class WithoutDone(ScriptedResponsesClient):
        async def _frames(self, reply: ScriptedResponse, index: int):  # type: ignore[no-untyped-def,override]
            async for frame in super()._frames(reply, index):
                if b"response.output_item.done" not in frame:
                    yield frame

    client = WithoutDone(ScriptedResponse([sleep_call("a", 0)]))
    result = await agent(client, full_access, router=router).run("go")
    assert (result.answer, result.turns) == ("", 1)
    assert sleeper.log == []
    assert [item.type for item in result.history] == ["message"]


@pytest.mark.parametrize(
    ("terminal", "message"),
    [
        ({"type": "response.failed", "response": {"status": "failed", "error": "overloaded"}}, "The response failed: no reason given."),
        ({"type": "response.incomplete", "response": {"status": "incomplete", "incomplete_details": "cut"}},
         "The response is incomplete: no reason given."),
        ({"type": "response.incomplete", "response": {"status": "incomplete", "incomplete_details": {}}},
         "The response is incomplete: no reason given."),
        ({"type": "response.incomplete", "response": {"status": "incomplete"}}, "The response is incomplete: no reason given."),
    ],
)  # fmt: skip
async def test_a_response_that_ends_without_a_readable_reason(
    server: ResponsesUpstream, full_access: ToolContext, terminal: dict[str, Any], message: str
) -> None:
    server.enqueue(Events([{**terminal, "sequence_number": 0}]))
    async with HttpResponsesClient(server.base_url) as client:
        with pytest.raises(UpstreamError) as ended:
            await agent(client, full_access).run("go")
    assert ended.value.message == message
