"""The public API of ``toolwire.agent`` is exactly its ``__all__``."""

from __future__ import annotations

import toolwire.agent
import toolwire.agent.builtin

EXPECTED = [
    "AgentEvent",
    "AgentLoop",
    "AgentResult",
    "ApplyPatch",
    "Approval",
    "ApprovalRequest",
    "Approver",
    "AssistantMessage",
    "ByteStream",
    "CustomToolHandler",
    "EventListener",
    "ExecCommand",
    "FunctionToolHandler",
    "HttpResponsesClient",
    "Invocation",
    "ModelRequested",
    "Policy",
    "ProgressPrinter",
    "ResponsesClient",
    "Sandbox",
    "ScriptedApprover",
    "ScriptedResponse",
    "ScriptedResponsesClient",
    "TerminalApprover",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolContext",
    "ToolHandler",
    "ToolOutput",
    "ViewImage",
    "assistant_message",
    "builtin_router",
    "builtin_tools",
    "custom_tool_call",
    "final_answer",
    "function_call",
    "is_read_only_command",
    "output_for_call",
    "parse_arguments",
    "register_tool",
    "response_events",
    "response_stream",
]


def test_all_is_pinned_and_importable() -> None:
    assert toolwire.agent.__all__ == EXPECTED
    assert sorted(EXPECTED) == EXPECTED
    for name in EXPECTED:
        assert getattr(toolwire.agent, name) is not None


def test_builtin_all() -> None:
    assert toolwire.agent.builtin.__all__ == [
        "ApplyPatch",
        "ExecCommand",
        "ViewImage",
        "builtin_router",
        "builtin_tools",
    ]
    assert [tool.name for tool in toolwire.agent.builtin_tools()] == [
        "exec_command",
        "apply_patch",
        "view_image",
    ]
