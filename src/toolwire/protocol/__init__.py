"""The Responses and Chat Completions wire protocols as typed values, and the SSE codec.

Items and tool definitions are pydantic models decoded once at the edge and dumped back
losslessly; stream events and Chat Completions shapes are TypedDicts built on the hot
path. Nothing here does I/O. A body that resends a history seen before is decoded only
past it (``KNOWN_HISTORIES``, bounded; ``ResponsesRequest.history``). A streamed Chat
answer's plain text chunks are read from their bytes once their shape is known
(``PlainContentFrames``, giving ``PlainChunks``). A WebSocket's turns that resend the
same fields have them validated once (``TurnFields``).
"""

from ._base import WireModel
from ._chat import (
    ChatChunk,
    ChatCompletion,
    ChatDelta,
    ChatMessage,
    ChatRequest,
    ChatTool,
    ChatToolCall,
    ChatToolCallDelta,
    ChatUsage,
)
from ._chat_frames import PlainChunks, PlainContentFrames, StreamItem, WholeAnswer, plain_content
from ._events import EVENT_TYPES, TERMINAL_EVENT_TYPES, StreamEvent, parse_event
from ._history import KNOWN_HISTORIES, HistoryLink, KnownHistories, KnownHistory, KnownItems
from ._items import (
    AdditionalToolsItem,
    CallItem,
    CompactionItem,
    CompactionTriggerItem,
    ContentPart,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputFile,
    InputImage,
    InputText,
    Item,
    ItemReference,
    LocalShellCallItem,
    MessageItem,
    OutputText,
    ReasoningItem,
    ReasoningText,
    Refusal,
    SummaryText,
    ToolSearchCallItem,
    ToolSearchOutputItem,
    UnknownItem,
    UnknownPart,
    WebSearchCallItem,
    dump_item,
    parse_item,
)
from ._request import ResponsesRequest, parse_request
from ._sse import ServerSentEvent, SSEDecoder, SSELimitExceeded, encode_event, encode_events
from ._stream_reader import ResponseStreamReader
from ._tools import (
    CustomTool,
    FunctionTool,
    GrammarFormat,
    HostedTool,
    NamespaceTool,
    TextFormat,
    ToolSearchTool,
    ToolSpec,
)
from ._turn_fields import TurnFields
from ._usage import MAX_TOKEN_COUNT, token_count
from ._whole_response import response_as_events

__all__ = [
    "EVENT_TYPES",
    "KNOWN_HISTORIES",
    "MAX_TOKEN_COUNT",
    "TERMINAL_EVENT_TYPES",
    "AdditionalToolsItem",
    "CallItem",
    "ChatChunk",
    "ChatCompletion",
    "ChatDelta",
    "ChatMessage",
    "ChatRequest",
    "ChatTool",
    "ChatToolCall",
    "ChatToolCallDelta",
    "ChatUsage",
    "CompactionItem",
    "CompactionTriggerItem",
    "ContentPart",
    "CustomTool",
    "CustomToolCallItem",
    "CustomToolCallOutputItem",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "FunctionTool",
    "GrammarFormat",
    "HistoryLink",
    "HostedTool",
    "InputFile",
    "InputImage",
    "InputText",
    "Item",
    "ItemReference",
    "KnownHistories",
    "KnownHistory",
    "KnownItems",
    "LocalShellCallItem",
    "MessageItem",
    "NamespaceTool",
    "OutputText",
    "PlainChunks",
    "PlainContentFrames",
    "ReasoningItem",
    "ReasoningText",
    "Refusal",
    "ResponseStreamReader",
    "ResponsesRequest",
    "SSEDecoder",
    "SSELimitExceeded",
    "ServerSentEvent",
    "StreamEvent",
    "StreamItem",
    "SummaryText",
    "TextFormat",
    "ToolSearchCallItem",
    "ToolSearchOutputItem",
    "ToolSearchTool",
    "ToolSpec",
    "TurnFields",
    "UnknownItem",
    "UnknownPart",
    "WebSearchCallItem",
    "WholeAnswer",
    "WireModel",
    "dump_item",
    "encode_event",
    "encode_events",
    "parse_event",
    "parse_item",
    "parse_request",
    "plain_content",
    "response_as_events",
    "token_count",
]
