"""The structured tool-call layer: names, the catalog of declared tools, calls and the router.

Sans-I/O: it decides what a completed call item means and which handler it goes to;
executing handlers is the agent runtime's job (``toolwire.agent``).
"""

from ._catalog import CatalogEntry, ToolCatalog, kind_of
from ._errors import ConfigurationError, FatalRuntimeError, RespondToModel, ToolError
from ._names import ToolName
from ._payloads import (
    CustomPayload,
    FunctionPayload,
    ToolCall,
    ToolKind,
    ToolPayload,
    ToolSearchPayload,
    decode_call,
)
from ._router import ToolHandler, ToolInvocation, ToolRouter
from ._stream import calls_from_stream

__all__ = [
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
