"""The public API is pinned: changing an ``__all__`` must be deliberate."""

from __future__ import annotations

import types

import pytest

import toolwire.compaction
import toolwire.keys
import toolwire.protocol
import toolwire.tools

PROTOCOL_ALL = [
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

TOOLS_ALL = [
    "CatalogEntry",
    "ConfigurationError",
    "CustomPayload",
    "FatalRuntimeError",
    "FunctionPayload",
    "RespondToModel",
    "ToolCall",
    "ToolCatalog",
    "ToolError",
    "ToolHandler",
    "ToolInvocation",
    "ToolKind",
    "ToolName",
    "ToolPayload",
    "ToolRouter",
    "ToolSearchPayload",
    "calls_from_stream",
    "decode_call",
    "kind_of",
]

KEYS_ALL = [
    "Admitted",
    "Bucket",
    "ClientKey",
    "InvalidKey",
    "KEY_PATTERN",
    "KeyDigest",
    "KeyGate",
    "KeyIdTaken",
    "KeyNameTaken",
    "KeyNotFound",
    "KeySpec",
    "KeyStatus",
    "KeyStore",
    "LEASE_SECONDS",
    "Lease",
    "LimitName",
    "LimitState",
    "Limits",
    "MemoryKeyStore",
    "ModelNotAllowed",
    "Principal",
    "QuotaExceeded",
    "RateLimited",
    "Refused",
    "SQLiteKeyStore",
    "STATIC_KEY_NAME",
    "TokenUsage",
    "UsageRow",
    "bearer_token",
    "charge_tokens",
    "check_name",
    "create_key",
    "decide",
    "digest_of",
    "key_id_of",
    "list_keys",
    "matches",
    "new_key",
    "open_key_store",
    "parse_duration",
    "revoke_key",
    "usage_report",
    "visible_prefix",
]

COMPACTION_ALL = [
    "COMPACTION_PROMPT",
    "KEY_FILE_SUFFIX",
    "RETAINED_TEXT_BUDGET",
    "SEALED_PREFIX",
    "SUMMARY_HEADING",
    "CompactionAnswer",
    "CompactionKeySource",
    "CompactionSeal",
    "FileCompactionKey",
    "OpenedHistory",
    "ProcessCompactionKey",
    "RedisCompactionKey",
    "Unreadable",
    "UnreadableCompaction",
    "compaction_key_for",
    "has_trigger",
    "open_compactions",
    "retained_messages",
    "summary_message",
    "summary_request",
]

MODULES = [
    pytest.param(toolwire.protocol, PROTOCOL_ALL, id="toolwire.protocol"),
    pytest.param(toolwire.tools, TOOLS_ALL, id="toolwire.tools"),
    pytest.param(toolwire.keys, KEYS_ALL, id="toolwire.keys"),
    pytest.param(toolwire.compaction, COMPACTION_ALL, id="toolwire.compaction"),
]


@pytest.mark.parametrize(("module", "expected"), MODULES)
def test_all_is_pinned(module: types.ModuleType, expected: list[str]) -> None:
    assert sorted(module.__all__) == sorted(expected)
    assert len(set(module.__all__)) == len(module.__all__), "no duplicates"


@pytest.mark.parametrize(("module", "expected"), MODULES)
def test_every_name_in_all_exists(module: types.ModuleType, expected: list[str]) -> None:
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


def test_required_names() -> None:
    assert {"parse_item", "dump_item", "SSEDecoder"} <= set(toolwire.protocol.__all__)
    assert {
        "ToolName",
        "ToolCatalog",
        "ToolRouter",
        "ToolCall",
        "ToolInvocation",
        "RespondToModel",
        "FatalRuntimeError",
        "ConfigurationError",
    } <= set(toolwire.tools.__all__)


def test_star_import_gives_exactly_all() -> None:
    for module in (toolwire.protocol, toolwire.tools, toolwire.keys, toolwire.compaction):
        namespace: dict[str, object] = {}
        exec(f"from {module.__name__} import *", namespace)
        assert sorted(set(namespace) - {"__builtins__"}) == sorted(module.__all__)
