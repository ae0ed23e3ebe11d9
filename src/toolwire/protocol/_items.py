"""Responses input and output items, discriminated by ``type``.

Every item a Responses client sends or a Responses server returns is one of these.
Items keep their JSON exactly: ``dump_item(parse_item(x)) == x`` for known and unknown
fields alike, and an item whose ``type`` is not modelled here becomes an
``UnknownItem`` that keeps all of its JSON.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Tag, TypeAdapter, ValidationError

from ._base import WireModel, type_tag
from ._tools import ToolSpec

# ---------------------------------------------------------------- content parts


class InputText(WireModel):
    type: Literal["input_text"]
    text: str


class InputImage(WireModel):
    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: str | None = None


class InputFile(WireModel):
    type: Literal["input_file"]
    file_id: str | None = None
    file_data: str | None = None
    file_url: str | None = None
    filename: str | None = None


class OutputText(WireModel):
    type: Literal["output_text"]
    text: str
    annotations: list[Any] | None = None
    logprobs: list[Any] | None = None


class Refusal(WireModel):
    type: Literal["refusal"]
    refusal: str


class UnknownPart(WireModel):
    """A content part type not modelled here (input_audio, encrypted_content, ...)."""

    type: str


_PART_TYPES = frozenset({"input_text", "input_image", "input_file", "output_text", "refusal"})

ContentPart = Annotated[
    Union[
        Annotated[InputText, Tag("input_text")],
        Annotated[InputImage, Tag("input_image")],
        Annotated[InputFile, Tag("input_file")],
        Annotated[OutputText, Tag("output_text")],
        Annotated[Refusal, Tag("refusal")],
        Annotated[UnknownPart, Tag("unknown")],
    ],
    Discriminator(type_tag(_PART_TYPES, "unknown")),
]

# ---------------------------------------------------------------- reasoning parts


class SummaryText(WireModel):
    type: Literal["summary_text"]
    text: str


class ReasoningText(WireModel):
    type: Literal["reasoning_text", "text"]
    text: str


ReasoningPart = Annotated[
    Union[
        Annotated[SummaryText, Tag("summary_text")],
        Annotated[ReasoningText, Tag("reasoning_text")],
        Annotated[UnknownPart, Tag("unknown")],
    ],
    Discriminator(type_tag(frozenset({"summary_text", "reasoning_text"}), "unknown", aliases={"text": "reasoning_text"})),
]

# ---------------------------------------------------------------- items


class MessageItem(WireModel):
    """A message; ``content`` is a plain string or a list of parts. ``type`` may be omitted."""

    type: Literal["message"] = "message"
    id: str | None = None
    role: str
    content: str | list[ContentPart]
    status: str | None = None
    phase: str | None = None


class ReasoningItem(WireModel):
    type: Literal["reasoning"]
    id: str | None = None
    summary: list[ReasoningPart]
    content: list[ReasoningPart] | None = None
    encrypted_content: str | None = None
    status: str | None = None


class FunctionCallItem(WireModel):
    """A call of a function tool; ``arguments`` is kept as the raw JSON string."""

    type: Literal["function_call"]
    id: str | None = None
    call_id: str
    name: str
    namespace: str | None = None
    arguments: str
    status: str | None = None


class FunctionCallOutputItem(WireModel):
    type: Literal["function_call_output"]
    id: str | None = None
    call_id: str
    output: str | list[ContentPart]
    status: str | None = None


class CustomToolCallItem(WireModel):
    """A call of a custom (freeform) tool; ``input`` is raw text."""

    type: Literal["custom_tool_call"]
    id: str | None = None
    call_id: str
    name: str
    namespace: str | None = None
    input: str
    status: str | None = None


class CustomToolCallOutputItem(WireModel):
    type: Literal["custom_tool_call_output"]
    id: str | None = None
    call_id: str
    output: str | list[ContentPart]
    status: str | None = None


class ToolSearchCallItem(WireModel):
    """A tool search; ``execution`` says who runs it (``client`` or ``server``)."""

    type: Literal["tool_search_call"]
    id: str | None = None
    call_id: str | None = None
    execution: str | None = None
    arguments: Any = None
    status: str | None = None


class ToolSearchOutputItem(WireModel):
    type: Literal["tool_search_output"]
    id: str | None = None
    call_id: str | None = None
    execution: str | None = None
    status: str | None = None
    tools: list[ToolSpec] = []


class AdditionalToolsItem(WireModel):
    """Tools declared inside ``input`` (Codex's V2 protocol) instead of top-level ``tools``."""

    type: Literal["additional_tools"]
    id: str | None = None
    role: str | None = None
    tools: list[ToolSpec]


class WebSearchCallItem(WireModel):
    type: Literal["web_search_call"]
    id: str | None = None
    status: str | None = None
    action: dict[str, Any] | None = None


class LocalShellCallItem(WireModel):
    type: Literal["local_shell_call"]
    id: str | None = None
    call_id: str | None = None
    status: str | None = None
    action: dict[str, Any]


class CompactionItem(WireModel):
    """A compaction: what came before it in a conversation, summarised into one opaque
    ``encrypted_content`` by whoever compacted it (toolwire, or a Responses server)."""

    type: Literal["compaction", "compaction_summary"]
    id: str | None = None
    encrypted_content: str


class CompactionTriggerItem(WireModel):
    """Codex's remote compaction (v2): compact the conversation before this item, and
    answer with exactly one ``compaction`` item."""

    type: Literal["compaction_trigger"]
    id: str | None = None


class ItemReference(WireModel):
    type: Literal["item_reference"]
    id: str


class UnknownItem(WireModel):
    """An item whose ``type`` toolwire does not model; all of its JSON is kept."""

    type: str


ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "tool_search_call",
        "tool_search_output",
        "additional_tools",
        "web_search_call",
        "local_shell_call",
        "compaction",
        "compaction_trigger",
        "item_reference",
    }
)


# An item without ``type`` is an EasyInputMessage: ``{"role": ..., "content": ...}``.
_item_tag = type_tag(ITEM_TYPES, "unknown", default="message", aliases={"compaction_summary": "compaction"})


Item = Annotated[
    Union[
        Annotated[MessageItem, Tag("message")],
        Annotated[ReasoningItem, Tag("reasoning")],
        Annotated[FunctionCallItem, Tag("function_call")],
        Annotated[FunctionCallOutputItem, Tag("function_call_output")],
        Annotated[CustomToolCallItem, Tag("custom_tool_call")],
        Annotated[CustomToolCallOutputItem, Tag("custom_tool_call_output")],
        Annotated[ToolSearchCallItem, Tag("tool_search_call")],
        Annotated[ToolSearchOutputItem, Tag("tool_search_output")],
        Annotated[AdditionalToolsItem, Tag("additional_tools")],
        Annotated[WebSearchCallItem, Tag("web_search_call")],
        Annotated[LocalShellCallItem, Tag("local_shell_call")],
        Annotated[CompactionItem, Tag("compaction")],
        Annotated[CompactionTriggerItem, Tag("compaction_trigger")],
        Annotated[ItemReference, Tag("item_reference")],
        Annotated[UnknownItem, Tag("unknown")],
    ],
    Discriminator(_item_tag),
]
"""Any Responses item, discriminated by ``type``."""

CallItem = FunctionCallItem | CustomToolCallItem | ToolSearchCallItem
OutputItem = FunctionCallOutputItem | CustomToolCallOutputItem | ToolSearchOutputItem

_ITEM_ADAPTER: TypeAdapter[Item] = TypeAdapter(Item)


def parse_item(value: Any, *, where: str = "item") -> Item:
    """Parse one item from its JSON object.

    The tool list of an ``additional_tools`` or ``tool_search_output`` item seen before
    gives back its kept specs (``_tool_cache``), as it does in a parsed request body: a
    conversation read back from where it was kept (a WebSocket's own responses, the
    store) declares the very specs of its first request, and what is derived from them
    (a translation's tool table) is not derived again on every turn.

    Raises ``RequestError`` naming the field, e.g. ``input[3].arguments``, when a known
    item type has a missing or mistyped field. ``where`` is the item's own path.
    """
    from ._errors import request_error_from

    if type(value) is dict and value.get("type") in ITEM_TYPES_WITH_TOOLS and type(value.get("tools")) is list:
        value = _with_kept_tools(value)
    try:
        return _ITEM_ADAPTER.validate_python(value)
    except ValidationError as exc:
        raise request_error_from(exc, prefix=where, tagged=True) from exc


ITEM_TYPES_WITH_TOOLS = frozenset({"additional_tools", "tool_search_output"})
"""Items whose ``tools`` field is a modelled list of specs (any other item keeps a
``tools`` list as raw JSON, which must stay raw)."""


def _with_kept_tools(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` with its ``tools`` validated through the tool-list cache; as it is when
    they do not validate (the item's validation then says where)."""
    from ._tool_cache import validate_item_tools

    try:
        return {**value, "tools": validate_item_tools(value["tools"])}
    except ValidationError:
        return value


def dump_item(item: Item) -> dict[str, Any]:
    """The item's JSON object, exactly as parsed (unknown fields included)."""
    return item.dump()
