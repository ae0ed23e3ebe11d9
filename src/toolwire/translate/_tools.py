"""What every wire's translation knows about the client's tools, once.

A backend that lacks a tool kind is offered the tool in a shape it knows, and what it
answers is read back against the declared tools. The Chat and Messages translations
and the Responses downgrade do this the same way:

* ``is_model_callable``: which declared tools the model may call through the backend
  (not hosted tools, not a tool_search the provider runs);
* a custom (freeform) tool offered as a function takes one raw string, ``input``
  (``raw_input_parameters``, ``wrap_raw_input``), and says so in its description
  (``custom_tool_description``);
* a client tool_search call's arguments as function-call arguments
  (``tool_search_arguments_text``);
* what a tool search loaded is listed to the model by the names it calls the tools
  (``loaded_tools_listing``);
* each wire's tool table is a ``ToolIndex``: the declared tools by the client's name,
  and the guess that a call naming a tool by its own or dotted name, instead of the
  name it was offered under, means the one declared tool that fits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar

import orjson

from toolwire.protocol import (
    CustomTool,
    FunctionTool,
    GrammarFormat,
    NamespaceTool,
    TextFormat,
    ToolSearchCallItem,
    ToolSearchTool,
    ToolSpec,
)
from toolwire.tools import CatalogEntry, ToolKind, ToolName

JSON = dict[str, Any]

RAW_INPUT_RULE = (
    "This is a freeform tool: pass its whole input as the string argument `input`. "
    "`input` is the raw text itself (for example the patch, or the JavaScript source), "
    "NOT JSON and NOT wrapped in markdown code fences."
)
_INPUT_PROPERTY_DESCRIPTION = "The raw text input: not JSON, not wrapped in markdown code fences."
_MAX_LISTED_DESCRIPTION = 200
_LINE_BOUNDARY = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def is_model_callable(entry: CatalogEntry) -> bool:
    """Whether the model calls this tool itself: hosted tools and a server-run tool_search
    are the provider's business, not the model's."""
    if entry.kind is ToolKind.HOSTED:
        return False
    return not (isinstance(entry.spec, ToolSearchTool) and entry.spec.execution != "client")


# ---------------------------------------------------------------- a custom tool as a function


def raw_input_parameters() -> JSON:
    """The parameters of a custom tool offered as a function: one raw string, ``input``."""
    return {
        "type": "object",
        "properties": {"input": {"type": "string", "description": _INPUT_PROPERTY_DESCRIPTION}},
        "required": ["input"],
        "additionalProperties": False,
    }


def wrap_raw_input(text: str) -> str:
    """A custom tool's raw input as the arguments of the function it is offered as."""
    return orjson.dumps({"input": text}).decode()


def custom_tool_description(spec: CustomTool, namespace_description: str) -> str:
    """The tool's own description, how to pass raw text in ``input``, and its format."""
    tool_format = spec.format
    if isinstance(tool_format, GrammarFormat):
        language = "Lark grammar" if tool_format.syntax == "lark" else "regular expression"
        format_text = f"`input` must match this {language}:\n{tool_format.definition}"
    elif tool_format is None or isinstance(tool_format, TextFormat):
        format_text = "`input` is unconstrained text."
    else:
        format_text = f"`input` format: {tool_format.type}."
    return join_paragraphs(namespace_description, spec.description, RAW_INPUT_RULE, format_text)


def tool_search_arguments_text(item: ToolSearchCallItem) -> str:
    """A client tool_search call's arguments as function-call arguments (JSON text)."""
    arguments = item.arguments
    if isinstance(arguments, str):
        return arguments or "{}"
    return orjson.dumps(arguments if arguments is not None else {}).decode()


def join_paragraphs(*texts: str | None) -> str:
    """The non-empty texts, separated by blank lines."""
    return "\n\n".join(text for text in texts if text)


def name_fields(namespace: str | None, name: str) -> JSON:
    """A call item's ``name`` and, for a namespaced tool, its ``namespace``."""
    named: JSON = {"name": name}
    if namespace is not None:
        named["namespace"] = namespace
    return named


# ---------------------------------------------------------------- what a tool search loaded


def loaded_tools_listing(
    specs: Sequence[ToolSpec], upstream_name: Callable[[str | None, str], tuple[str | None, str]]
) -> str:
    """What a tool search loaded, as the text of its output for a backend that has no
    tool_search: each tool by ``upstream_name(namespace, name)`` (the namespace and name
    the backend calls it by), with the first line of its description. The tools
    themselves are declared to the backend beside the others."""
    listed: list[JSON] = []
    pending: list[tuple[str | None, ToolSpec]] = [(None, spec) for spec in reversed(specs)]
    while pending:
        namespace, spec = pending.pop()
        if type(spec) is NamespaceTool:
            pending.extend((spec.name, inner) for inner in reversed(spec.tools))
        elif type(spec) is FunctionTool or type(spec) is CustomTool:
            entry = name_fields(*upstream_name(namespace, spec.name))
            if spec.description:
                entry["description"] = first_line(spec.description)
            listed.append(entry)
    return orjson.dumps({"loaded_tools": listed}).decode()


def first_line(text: str) -> str:
    """The first non-blank line (Codex's descriptions often start with a line break), at
    most 200 characters.

    Found without splitting the whole text (a description can be pages long): leading
    whitespace includes every blank line, and the line runs to the next line boundary
    that ``str.splitlines`` knows.
    """
    stripped = text.lstrip()
    boundary = _LINE_BOUNDARY.search(stripped)
    line = (stripped if boundary is None else stripped[: boundary.start()]).rstrip()
    if len(line) <= _MAX_LISTED_DESCRIPTION:
        return line
    return line[: _MAX_LISTED_DESCRIPTION - 1] + "…"


# ---------------------------------------------------------------- reading a call back


class DeclaredTool(Protocol):
    """A declared tool in a wire's tool table: known by the name the client declared."""

    @property
    def tool_name(self) -> ToolName: ...


T = TypeVar("T", bound=DeclaredTool)


class ToolIndex(Generic[T]):
    """A wire's tool table, by the name the client declared each tool, in declaration
    order; what a tool is called upstream is the wire's own business."""

    def __init__(self) -> None:
        self._by_tool: dict[ToolName, T] = {}

    def __iter__(self) -> Iterator[T]:
        return iter(self._by_tool.values())

    def __len__(self) -> int:
        return len(self._by_tool)

    def by_tool_name(self, tool_name: ToolName) -> T | None:
        return self._by_tool.get(tool_name)

    def guess(self, name: str) -> T | None:
        """The declared tool a call means that names no offered tool: the one tool whose
        own name or dotted name is ``name`` (a model writes ``list_agents`` or
        ``collaboration.list_agents`` for ``collaboration__list_agents``); None when no
        tool, or more than one, fits."""
        fits = [tool for tool in self._by_tool.values() if name in (tool.tool_name.name, str(tool.tool_name))]
        return fits[0] if len(fits) == 1 else None
