"""Tool definitions a Responses request declares: function, custom, namespace, tool_search, hosted.

Hosted tools (web_search, file_search, image_generation, code_interpreter, mcp, ...)
are kept opaque: only their ``type`` is known, every other field passes through.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Tag

from ._base import WireModel, type_tag


class TextFormat(WireModel):
    """Unconstrained text input for a custom tool."""

    type: Literal["text"]


class GrammarFormat(WireModel):
    """A custom tool whose input must match a grammar (Lark or a regex)."""

    type: Literal["grammar"]
    syntax: Literal["lark", "regex"]
    definition: str


class UnknownFormat(WireModel):
    type: str


CustomToolFormat = Annotated[
    Union[
        Annotated[TextFormat, Tag("text")],
        Annotated[GrammarFormat, Tag("grammar")],
        Annotated[UnknownFormat, Tag("unknown")],
    ],
    Discriminator(type_tag(frozenset({"text", "grammar"}), "unknown")),
]


class FunctionTool(WireModel):
    """A JSON-arguments function; its call is a ``function_call`` item."""

    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class CustomTool(WireModel):
    """A freeform tool whose input is raw text; its call is a ``custom_tool_call`` item."""

    type: Literal["custom"]
    name: str
    description: str | None = None
    format: CustomToolFormat | None = None


class ToolSearchTool(WireModel):
    """Tool search; ``execution: "client"`` means the client runs the search."""

    type: Literal["tool_search"]
    execution: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


class HostedTool(WireModel):
    """A tool the model provider runs itself (web_search, file_search, mcp, ...); opaque."""

    type: str


class NamespaceTool(WireModel):
    """A group of tools whose calls carry ``namespace`` = this tool's ``name``."""

    type: Literal["namespace"]
    name: str
    description: str | None = None
    tools: list[ToolSpec]


TOOL_TYPES = frozenset({"function", "custom", "namespace", "tool_search"})

ToolSpec = Annotated[
    Union[
        Annotated[FunctionTool, Tag("function")],
        Annotated[CustomTool, Tag("custom")],
        Annotated[NamespaceTool, Tag("namespace")],
        Annotated[ToolSearchTool, Tag("tool_search")],
        Annotated[HostedTool, Tag("hosted")],
    ],
    Discriminator(type_tag(TOOL_TYPES, "hosted")),
]
"""Any tool definition, discriminated by ``type``; unknown types are hosted tools."""

NamespaceTool.model_rebuild()
