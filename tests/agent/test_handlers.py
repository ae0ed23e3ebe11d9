"""Tool handlers: the payload each base takes apart, the arguments a function tool reads,
registering under a namespace, and the gate that runs calls at once or alone."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from toolwire.agent import (
    CustomToolHandler,
    FunctionToolHandler,
    ToolContext,
    ToolOutput,
    parse_arguments,
    register_tool,
)
from toolwire.agent._parallel import CallGate
from toolwire.protocol import CustomTool, FunctionTool
from toolwire.tools import (
    CustomPayload,
    FatalRuntimeError,
    FunctionPayload,
    RespondToModel,
    ToolCall,
    ToolInvocation,
    ToolName,
    ToolRouter,
)


class Echo(FunctionToolHandler):
    spec = FunctionTool(type="function", name="echo", parameters={"type": "object"})

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        return ToolOutput(repr(arguments))


class Pad(CustomToolHandler):
    spec = CustomTool(type="custom", name="pad")

    async def run(self, text: str, context: ToolContext) -> ToolOutput:
        return ToolOutput(text)


def invocation(handler: Any, payload: Any, name: ToolName) -> ToolInvocation[ToolContext]:
    return ToolInvocation(
        call_id="c1", tool_name=name, payload=payload, context=ToolContext(Path(".")), handler=handler, spec=handler.spec
    )


async def test_each_base_refuses_the_other_kind_of_payload() -> None:
    with pytest.raises(FatalRuntimeError) as function_given_text:
        await Echo().handle(invocation(Echo(), CustomPayload("x"), ToolName.plain("echo")))
    assert function_given_text.value.message == "tool echo invoked with incompatible payload"
    with pytest.raises(FatalRuntimeError) as custom_given_json:
        await Pad().handle(invocation(Pad(), FunctionPayload("{}"), ToolName("ns", "pad")))
    assert custom_given_json.value.message == "tool ns.pad invoked with incompatible payload"
    assert (await Echo().handle(invocation(Echo(), FunctionPayload(""), ToolName.plain("echo")))).content == "{}"


def test_the_arguments_of_a_function_call() -> None:
    assert parse_arguments("") == {} and parse_arguments('{"a": 1}') == {"a": 1}
    with pytest.raises(RespondToModel) as not_an_object:
        parse_arguments("[1, 2]")
    assert not_an_object.value.message == "failed to parse function arguments: expected a JSON object"
    with pytest.raises(RespondToModel) as not_json:
        parse_arguments("{nope")
    assert not_json.value.message.startswith("failed to parse function arguments: unexpected character")


def test_a_handler_registered_in_a_namespace_is_called_by_its_full_name() -> None:
    router = ToolRouter()
    register_tool(router, Echo(), namespace="tools")
    bound = router.bind(ToolCall(ToolName("tools", "echo"), "c1", FunctionPayload("{}")), None)
    assert isinstance(bound.handler, Echo)
    with pytest.raises(RespondToModel, match="unsupported call: echo"):
        router.bind(ToolCall(ToolName.plain("echo"), "c2", FunctionPayload("{}")), None)


async def test_a_gate_of_one_runs_one_call_at_a_time() -> None:
    with pytest.raises(ValueError) as refused:
        CallGate(0)
    assert str(refused.value) == "the concurrency limit must be at least 1"
    gate = CallGate(1)
    inside: list[int] = []
    most = 0

    async def call() -> None:
        nonlocal most
        async with gate.enter(alone=False):
            inside.append(1)
            most = max(most, len(inside))
            await asyncio.sleep(0.01)
            inside.pop()

    await asyncio.wait_for(asyncio.gather(*(call() for _ in range(4))), 20)
    assert most == 1
