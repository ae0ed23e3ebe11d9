"""Pure translation between the Responses API and the wires of the backends behind it.

No I/O here: requests in, requests out; backend answers in, Responses events out.

* ``chat``: a Chat Completions backend. ``translate_request`` turns a Responses request
  into a Chat request for a ``BackendProfile`` (``PRESETS``); ``ChatStreamTranslator``
  turns the upstream's chunks into Responses events (``translate_completion`` a whole
  completion into a Response object).
* ``responses``: a Responses backend that lacks newer tool features.
  ``downgrade_request`` rewrites what its ``ResponsesCapabilities`` lack;
  ``ResponsesStreamRestorer`` restores its answer to the types the client declared.
* ``anthropic``: an Anthropic Messages backend (Claude, and the Anthropic-compatible
  endpoints of other vendors). ``translate_messages_request`` turns a Responses request
  into a Messages request for a ``MessagesProfile`` (``MESSAGES_PRESETS``);
  ``MessagesStreamTranslator`` turns its stream events (or whole Message) back.

What the wires share lives beside them, once: ``ResponsesEventWriter`` (``writer``),
the one writer of Responses stream events, and ``decide_stream_end`` (``stream_end``),
how a stream ends; ``AnswerTranslator`` (``translator``), what every answer translator
offers the server; ``UpstreamToolTable`` (``tool_table``), flat tool names for backends
without namespaces; ``recover_custom_input`` (``custom_input``), a freeform tool's raw
input from a model's function arguments; the reasoning envelope (``reasoning``); and the
private ``_tools`` (which tools are callable, custom tools as functions, the listing of
what a tool search loaded, ``ToolIndex``: the base of the wires' tool tables, with the
guess of which tool a bare name means), ``_json_repair`` and ``_echo`` (the request
fields a Response repeats, and ``complete_response`` / ``complete_usage``: a Response or
its usage made whole, with every field the Open Responses specification requires).

The Chat and Messages wires, which both rebuild the conversation as messages for a
backend with flat function tools, share more: ``_conversation`` (the walk of the input
items that pairs calls with their outputs, turn by turn; each wire renders it),
``_offer`` (the tools offered as functions, and the client's ``tool_choice`` read),
``_fields`` (the request fields no wire translates), ``_item_stream`` (the stream
translator that builds the items itself: lifecycle, end, calls, failure), ``_calls``
(a streamed call's state machine, read back against the declared tools), ``_notes``
and ``_failures``.

Import from here: the submodules are private to this package.
"""

from ._echo import complete_response, complete_usage, dumps_event
from .anthropic import (
    ANTHROPIC_VERSION,
    MESSAGES_PRESETS,
    MessagesProfile,
    MessagesStreamTranslator,
    TranslatedMessages,
    translate_messages_request,
)
from .chat import (
    GENERIC,
    PRESETS,
    BackendProfile,
    ChatStreamTranslator,
    ToolCallText,
    TranslatedRequest,
    completion_chunks,
    translate_completion,
    translate_request,
)
from .custom_input import RecoveredInput, recover_custom_input
from .reasoning import open_reasoning, open_reasoning_blocks, seal_reasoning
from .responses import (
    DowngradedRequest,
    DowngradedTool,
    DowngradedToolTable,
    ResponsesCapabilities,
    ResponsesStreamRestorer,
    downgrade_request,
)
from .stream_end import StreamEnd, StreamOutcome, decide_stream_end
from .tool_table import UpstreamTool, UpstreamToolTable, flat_name, upstream_call_id
from .translator import WHOLE_ANSWER_STREAMED, AnswerTranslator, WrittenAnswer
from .writer import ResponsesEventWriter, StreamState

__all__ = [
    "ANTHROPIC_VERSION",
    "GENERIC",
    "MESSAGES_PRESETS",
    "PRESETS",
    "WHOLE_ANSWER_STREAMED",
    "AnswerTranslator",
    "BackendProfile",
    "ChatStreamTranslator",
    "DowngradedRequest",
    "DowngradedTool",
    "DowngradedToolTable",
    "MessagesProfile",
    "MessagesStreamTranslator",
    "RecoveredInput",
    "ResponsesCapabilities",
    "ResponsesEventWriter",
    "ResponsesStreamRestorer",
    "StreamEnd",
    "StreamOutcome",
    "StreamState",
    "ToolCallText",
    "TranslatedMessages",
    "TranslatedRequest",
    "UpstreamTool",
    "UpstreamToolTable",
    "WrittenAnswer",
    "complete_response",
    "complete_usage",
    "completion_chunks",
    "decide_stream_end",
    "downgrade_request",
    "dumps_event",
    "flat_name",
    "open_reasoning",
    "open_reasoning_blocks",
    "recover_custom_input",
    "seal_reasoning",
    "translate_completion",
    "translate_messages_request",
    "translate_request",
    "upstream_call_id",
]
