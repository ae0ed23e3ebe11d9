"""decode_call and ToolRouter: only call items are calls; binding fails in exactly two ways."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.protocol.helpers import parse_tool
from toolwire.errors import RequestError
from toolwire.protocol import FunctionTool, NamespaceTool, parse_item
from toolwire.tools import (
    ConfigurationError,
    CustomPayload,
    FatalRuntimeError,
    FunctionPayload,
    RespondToModel,
    ToolCall,
    ToolInvocation,
    ToolKind,
    ToolName,
    ToolRouter,
    ToolSearchPayload,
    decode_call,
)


@dataclass(frozen=True)
class FakeHandler:
    kinds: frozenset[ToolKind]

    def accepts(self, kind: ToolKind) -> bool:
        return kind in self.kinds


FUNCTION_HANDLER = FakeHandler(frozenset({ToolKind.FUNCTION, ToolKind.TOOL_SEARCH}))
CUSTOM_HANDLER = FakeHandler(frozenset({ToolKind.CUSTOM}))

# ------------------------------------------------------------------ decode_call

CALLS: list[tuple[str, dict[str, Any], ToolCall]] = [
    (
        "function-call",
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command", "arguments": '{"cmd":"ls"}'},
        ToolCall(ToolName(None, "exec_command"), "call_1", FunctionPayload('{"cmd":"ls"}')),
    ),
    (
        "function-call-namespaced",
        {"type": "function_call", "call_id": "call_2", "namespace": "collaboration", "name": "list_agents", "arguments": "{}"},
        ToolCall(ToolName("collaboration", "list_agents"), "call_2", FunctionPayload("{}")),
    ),
    (
        "function-call-bad-json-is-still-a-call",
        {"type": "function_call", "call_id": "call_3", "name": "exec_command", "arguments": "{not json"},
        ToolCall(ToolName(None, "exec_command"), "call_3", FunctionPayload("{not json")),
    ),
    (
        "custom-tool-call",
        {"type": "custom_tool_call", "call_id": "call_4", "namespace": "functions", "name": "exec", "input": "await tools.x()"},
        ToolCall(ToolName("functions", "exec"), "call_4", CustomPayload("await tools.x()")),
    ),
    (
        "custom-tool-call-plain",
        {"type": "custom_tool_call", "call_id": "call_5", "name": "apply_patch", "input": "*** Begin Patch\n"},
        ToolCall(ToolName(None, "apply_patch"), "call_5", CustomPayload("*** Begin Patch\n")),
    ),
    (
        "tool-search-arguments-object",
        {"type": "tool_search_call", "call_id": "call_6", "execution": "client", "arguments": {"query": "cal", "limit": 3}},
        ToolCall(ToolName(None, "tool_search"), "call_6", ToolSearchPayload({"query": "cal", "limit": 3})),
    ),
    (
        "tool-search-arguments-json-string",
        {"type": "tool_search_call", "call_id": "call_7", "execution": "client", "arguments": '{"query": "cal"}'},
        ToolCall(ToolName(None, "tool_search"), "call_7", ToolSearchPayload({"query": "cal"})),
    ),
]


@pytest.mark.parametrize(("item", "call"), [pytest.param(i, c, id=n) for n, i, c in CALLS])
def test_call_items_decode(item: dict[str, Any], call: ToolCall) -> None:
    assert decode_call(item) == call
    assert decode_call(parse_item(item)) == call
    assert ToolRouter().decode_call(item) == call


NOT_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("message-with-json-call-text", {
        "type": "message", "role": "assistant",
        "content": [{"type": "output_text", "text": '{"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "x"}'}],
    }),
    ("message-string-json-call", {"role": "assistant", "content": '{"name": "exec_command", "arguments": {"cmd": "ls"}}'}),
    ("tool-search-server", {"type": "tool_search_call", "call_id": "c", "execution": "server", "arguments": {"query": "x"}}),
    ("tool-search-no-execution", {"type": "tool_search_call", "call_id": "c", "arguments": {"query": "x"}}),
    ("tool-search-client-no-call-id", {"type": "tool_search_call", "execution": "client", "arguments": {"query": "x"}}),
    ("function-call-output", {"type": "function_call_output", "call_id": "c", "output": "x"}),
    ("custom-tool-call-output", {"type": "custom_tool_call_output", "call_id": "c", "output": "x"}),
    ("tool-search-output", {"type": "tool_search_output", "call_id": "c", "tools": []}),
    ("reasoning", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "call exec_command"}]}),
    ("local-shell-call", {"type": "local_shell_call", "call_id": "c", "status": "completed", "action": {"type": "exec", "command": ["ls"]}}),
    ("web-search-call", {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "x"}}),
    ("unknown-call-shaped", {"type": "mcp_call", "call_id": "c", "name": "exec_command", "arguments": "{}"}),
]


@pytest.mark.parametrize("item", [pytest.param(i, id=n) for n, i in NOT_CALLS])
def test_other_items_are_not_calls(item: dict[str, Any]) -> None:
    assert decode_call(item) is None
    assert decode_call(parse_item(item)) is None


@pytest.mark.parametrize("arguments", ["{not json", "", '"query"', "[1]", "null", 3, ["q"], None])
def test_tool_search_arguments_that_are_not_an_object_respond_to_model(arguments: Any) -> None:
    item = {"type": "tool_search_call", "call_id": "c", "execution": "client", "arguments": arguments}
    with pytest.raises(RespondToModel, match=r"^failed to parse tool_search arguments: ") as raised:
        decode_call(item)
    if not isinstance(arguments, str) or arguments in ('"query"', "[1]", "null"):
        assert str(raised.value) == "failed to parse tool_search arguments: expected a JSON object"


def test_malformed_call_item_is_a_request_error() -> None:
    with pytest.raises(RequestError) as caught:
        decode_call({"type": "function_call", "call_id": "c", "name": "x", "arguments": {"cmd": "ls"}})
    assert caught.value.param == "item.arguments"


# ------------------------------------------------------------------ registration

EXEC_COMMAND_SPEC = parse_tool({"type": "function", "name": "exec_command", "parameters": {"type": "object"}})
EXEC_SPEC = parse_tool({"type": "custom", "name": "exec", "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}})
LIST_AGENTS_SPEC = parse_tool({"type": "function", "name": "list_agents"})
TOOL_SEARCH_SPEC = parse_tool({"type": "tool_search", "execution": "client"})


def codex_like_router() -> ToolRouter:
    router = ToolRouter()
    router.register(ToolName(None, "exec_command"), EXEC_COMMAND_SPEC, FUNCTION_HANDLER)
    router.register(ToolName("functions", "exec"), EXEC_SPEC, CUSTOM_HANDLER)
    router.register(ToolName("collaboration", "list_agents"), LIST_AGENTS_SPEC, FUNCTION_HANDLER)
    router.register(ToolName(None, "apply_patch"), parse_tool({"type": "custom", "name": "apply_patch"}), CUSTOM_HANDLER)
    router.register(ToolName(None, "tool_search"), TOOL_SEARCH_SPEC, FUNCTION_HANDLER)
    return router


def test_registering_a_name_twice_is_a_configuration_error() -> None:
    router = codex_like_router()
    with pytest.raises(ConfigurationError, match="exec_command"):
        router.register(ToolName(None, "exec_command"), EXEC_COMMAND_SPEC, FUNCTION_HANDLER)
    with pytest.raises(ConfigurationError):
        router.register(ToolName("", "exec_command"), LIST_AGENTS_SPEC, FUNCTION_HANDLER)
    router.register(ToolName("other", "exec_command"), EXEC_COMMAND_SPEC, FUNCTION_HANDLER)  # another namespace


def test_tool_names_in_registration_order() -> None:
    assert codex_like_router().tool_names == [
        ToolName(None, "exec_command"),
        ToolName("functions", "exec"),
        ToolName("collaboration", "list_agents"),
        ToolName(None, "apply_patch"),
        ToolName(None, "tool_search"),
    ]


def test_model_visible_specs_order_and_namespace_grouping() -> None:
    router = ToolRouter()
    spec = {name: parse_tool({"type": "function", "name": name}) for name in "abcde"}
    router.register(ToolName(None, "a"), spec["a"], FUNCTION_HANDLER)
    router.register(ToolName("x", "b"), spec["b"], FUNCTION_HANDLER)
    router.register(ToolName(None, "c"), spec["c"], FUNCTION_HANDLER)
    router.register(ToolName("x", "d"), spec["d"], FUNCTION_HANDLER)
    router.register(ToolName("y", "e"), spec["e"], FUNCTION_HANDLER)
    visible = router.model_visible_specs
    assert [item.dump() for item in visible] == [
        {"type": "function", "name": "a"},
        {"type": "namespace", "name": "x", "description": "", "tools": [{"type": "function", "name": "b"}, {"type": "function", "name": "d"}]},
        {"type": "function", "name": "c"},
        {"type": "namespace", "name": "y", "description": "", "tools": [{"type": "function", "name": "e"}]},
    ]
    assert visible[0] is spec["a"]  # the registered spec itself, not a copy
    assert isinstance(visible[1], NamespaceTool)
    assert visible[1].tools[1] is spec["d"]
    assert [item.dump() for item in router.model_visible_specs] == [item.dump() for item in visible]  # stable


def test_empty_router_has_no_specs() -> None:
    assert ToolRouter().model_visible_specs == []


# ------------------------------------------------------------------ bind


def test_bind_carries_call_id_name_payload_and_context() -> None:
    router = codex_like_router()
    call = decode_call({"type": "function_call", "call_id": "call_9", "namespace": "collaboration", "name": "list_agents", "arguments": '{"a": 1}'})
    assert call is not None
    context = object()
    invocation = router.bind(call, context)
    assert isinstance(invocation, ToolInvocation)
    assert invocation.call_id == "call_9"
    assert invocation.tool_name == ToolName("collaboration", "list_agents")
    assert invocation.payload is call.payload  # untouched
    assert invocation.payload == FunctionPayload('{"a": 1}')
    assert invocation.context is context
    assert invocation.handler is FUNCTION_HANDLER
    assert invocation.spec is LIST_AGENTS_SPEC


@pytest.mark.parametrize(
    "item",
    [
        {"type": "custom_tool_call", "call_id": "c", "namespace": "functions", "name": "exec", "input": "x"},
        {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "function_call", "call_id": "c", "name": "exec_command", "arguments": "{}"},
        {"type": "tool_search_call", "call_id": "c", "execution": "client", "arguments": {"query": "q"}},
    ],
    ids=["custom-exec", "custom-apply-patch", "function", "tool-search"],
)
def test_bind_matching_kinds(item: dict[str, Any]) -> None:
    call = decode_call(item)
    assert call is not None
    assert codex_like_router().bind(call, None).payload is call.payload


@pytest.mark.parametrize(
    ("item", "message"),
    [
        # A namespaced tool called without its namespace (seen with Codex itself).
        ({"type": "function_call", "call_id": "c", "name": "list_agents", "arguments": "{}"}, "unsupported call: list_agents"),
        ({"type": "function_call", "call_id": "c", "namespace": "functions", "name": "exec_command", "arguments": "{}"}, "unsupported call: functions.exec_command"),
        ({"type": "function_call", "call_id": "c", "name": "nope", "arguments": "{}"}, "unsupported call: nope"),
        ({"type": "custom_tool_call", "call_id": "c", "name": "exec", "input": "x"}, "unsupported custom tool call: exec"),
    ],
)
def test_bind_unknown_tool_responds_to_model(item: dict[str, Any], message: str) -> None:
    call = decode_call(item)
    assert call is not None
    with pytest.raises(RespondToModel) as caught:
        codex_like_router().bind(call, None)
    assert caught.value.message == message
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "item",
    [
        # Codex: "Fatal error: tool exec invoked with incompatible payload".
        {"type": "function_call", "call_id": "c", "namespace": "functions", "name": "exec", "arguments": '{"cmd":"pwd"}'},
        {"type": "function_call", "call_id": "c", "name": "apply_patch", "arguments": "{}"},
        {"type": "custom_tool_call", "call_id": "c", "name": "exec_command", "input": "ls"},
    ],
    ids=["function-to-custom-exec", "function-to-apply-patch", "custom-to-function"],
)
def test_bind_incompatible_payload_is_fatal(item: dict[str, Any]) -> None:
    call = decode_call(item)
    assert call is not None
    with pytest.raises(FatalRuntimeError, match=r"^tool \S+ invoked with incompatible payload"):
        codex_like_router().bind(call, None)


def test_respond_to_model_and_fatal_are_different_failures() -> None:
    assert not issubclass(RespondToModel, FatalRuntimeError)
    assert not issubclass(FatalRuntimeError, RespondToModel)


def test_registered_spec_is_kept() -> None:
    router = codex_like_router()
    call = ToolCall(ToolName(None, "exec_command"), "c", FunctionPayload("{}"))
    spec = router.bind(call, None).spec
    assert isinstance(spec, FunctionTool) and spec is EXEC_COMMAND_SPEC
