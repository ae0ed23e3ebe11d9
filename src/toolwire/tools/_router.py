"""``ToolRouter``: registered tools, and completed call items turned into bound invocations.

Only call items become calls (``function_call``, ``custom_tool_call`` and a
client-executed ``tool_search_call``: ``decode_call``, beside the payloads); a message
whose text looks like a call never does. Binding a call either succeeds, or fails in
one of two ways: an unknown tool is ``RespondToModel`` (the model can read the error
and choose again), a payload kind the handler does not accept is ``FatalRuntimeError``
(the turn stops).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from toolwire.protocol import Item, NamespaceTool, ToolSpec

from ._errors import ConfigurationError, FatalRuntimeError, RespondToModel
from ._names import ToolName
from ._payloads import ToolCall, ToolKind, ToolPayload, decode_call

ContextT = TypeVar("ContextT")


class ToolHandler(Protocol):
    """What the router needs of a handler: which payload kinds it can execute."""

    def accepts(self, kind: ToolKind) -> bool: ...


@dataclass(frozen=True, slots=True)
class ToolInvocation(Generic[ContextT]):
    """A call bound to its handler: the payload untouched, and the context it runs in."""

    call_id: str
    tool_name: ToolName
    payload: ToolPayload
    context: ContextT
    handler: ToolHandler
    spec: ToolSpec


@dataclass(frozen=True, slots=True)
class _Registration:
    spec: ToolSpec
    handler: ToolHandler


class ToolRouter:
    """Tools registered with their model-visible spec and handler, declared together."""

    def __init__(self) -> None:
        self._tools: dict[ToolName, _Registration] = {}

    def register(self, name: ToolName, spec: ToolSpec, handler: ToolHandler) -> None:
        """Add a tool. A second registration of the same name is a ``ConfigurationError``."""
        if name in self._tools:
            raise ConfigurationError(f"The tool {name} is registered twice.")
        self._tools[name] = _Registration(spec, handler)

    @property
    def tool_names(self) -> list[ToolName]:
        return list(self._tools)

    @property
    def model_visible_specs(self) -> list[ToolSpec]:
        """The specs to send to the model, in registration order.

        Tools registered under a namespace are grouped into one ``namespace`` tool, placed
        where that namespace's first tool was registered.
        """
        specs: list[ToolSpec] = []
        namespaces: dict[str, NamespaceTool] = {}
        for name, registration in self._tools.items():
            if name.namespace is None:
                specs.append(registration.spec)
                continue
            group = namespaces.get(name.namespace)
            if group is None:
                group = NamespaceTool(type="namespace", name=name.namespace, description="", tools=[])
                namespaces[name.namespace] = group
                specs.append(group)
            group.tools.append(registration.spec)
        return specs

    def decode_call(self, item: Item | dict[str, Any]) -> ToolCall | None:
        """See ``decode_call``: only completed call items become calls."""
        return decode_call(item)

    def bind(self, call: ToolCall, context: ContextT) -> ToolInvocation[ContextT]:
        """Bind ``call`` to its handler.

        Raises ``RespondToModel`` for a tool that is not registered and
        ``FatalRuntimeError`` for a payload kind the handler does not accept.
        """
        registration = self._tools.get(call.tool_name)
        if registration is None:
            what = "custom tool call" if call.payload.kind is ToolKind.CUSTOM else "call"
            raise RespondToModel(f"unsupported {what}: {call.tool_name}")
        if not registration.handler.accepts(call.payload.kind):
            raise FatalRuntimeError(
                f"tool {call.tool_name} invoked with incompatible payload "
                f"({call.payload.kind.value} call for a tool that does not accept it)"
            )
        return ToolInvocation(
            call_id=call.call_id,
            tool_name=call.tool_name,
            payload=call.payload,
            context=context,
            handler=registration.handler,
            spec=registration.spec,
        )
