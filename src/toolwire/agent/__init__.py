"""The minimal agent runtime: execute the calls the core routes, and loop until an answer.

``AgentLoop`` samples a Responses endpoint (any: toolwire's gateway or another) through
the ``ResponsesClient`` seam, binds each completed call with the core ``ToolRouter``,
runs the handlers (in parallel, under a limit), sends every output back paired by
``call_id``, and samples again until the model answers without calls. ``builtin``
holds ``exec_command``, ``apply_patch`` and ``view_image``; ``Policy`` decides what they
may do; ``ProgressPrinter`` shows a run on a terminal. The ``toolwire agent`` command is
``toolwire.cli``'s.

Errors a run can end with::

    FatalRuntimeError (toolwire.tools)   a call the turn cannot go on from
    UpstreamError (toolwire.errors)      the endpoint failed, or its stream broke
    TimeoutError / CancelledError        a timeout or Ctrl-C around ``run``

Mistakes the model can fix (unknown tool, bad arguments, a refused write) never end a
run: they go back to the model as the call's output.
"""

from ._client import ByteStream, HttpResponsesClient, ResponsesClient
from ._events import (
    AgentEvent,
    AssistantMessage,
    EventListener,
    ModelRequested,
    ToolCallFinished,
    ToolCallStarted,
)
from ._handlers import (
    CustomToolHandler,
    FunctionToolHandler,
    Invocation,
    ToolContext,
    ToolHandler,
    ToolOutput,
    parse_arguments,
    register_tool,
)
from ._loop import AgentLoop, AgentResult, final_answer
from ._outputs import output_for_call
from ._policy import (
    Approval,
    ApprovalRequest,
    Approver,
    Policy,
    Sandbox,
    ScriptedApprover,
    TerminalApprover,
    is_read_only_command,
)
from ._progress import ProgressPrinter
from ._scripted import (
    ScriptedResponse,
    ScriptedResponsesClient,
    assistant_message,
    custom_tool_call,
    function_call,
    response_events,
    response_stream,
)
from .builtin import ApplyPatch, ExecCommand, ViewImage, builtin_router, builtin_tools

__all__ = [
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
