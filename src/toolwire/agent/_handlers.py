"""Executable tools: a handler declares its model-visible spec and payload kind together.

A ``ToolHandler`` is what the core ``ToolRouter`` binds calls to, plus the part the
router does not need: ``async handle(invocation) -> ToolOutput``. Two bases take the
payload apart for the common cases: ``FunctionToolHandler`` parses the JSON arguments
(bad JSON is told to the model), ``CustomToolHandler`` passes the raw input on.

A handler reports a mistake the model can fix by raising ``RespondToModel``, and a
failure that must stop the turn by raising ``FatalRuntimeError``; anything it returns
goes back to the model as the call's output.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from toolwire.protocol import (
    ContentPart,
    ToolSpec,
)
from toolwire.tools import (
    CustomPayload,
    FatalRuntimeError,
    FunctionPayload,
    RespondToModel,
    ToolInvocation,
    ToolKind,
    ToolName,
    ToolRouter,
    kind_of,
)

from ._policy import Policy


@dataclass(frozen=True)
class ToolContext:
    """What every call of a run shares: the working directory and the policy."""

    cwd: Path
    policy: Policy = field(default_factory=Policy)


@dataclass(frozen=True)
class ToolOutput:
    """What a tool gives back: text, or content parts (``input_text``, ``input_image``).

    ``success`` is for progress display only; the model sees ``content``. ``tools`` is
    only for a ``tool_search`` handler: the tool definitions it found.
    """

    content: str | list[ContentPart]
    success: bool = True
    tools: tuple[ToolSpec, ...] = ()


Invocation = ToolInvocation[ToolContext]


class ToolHandler(ABC):
    """A tool the agent can run. Subclasses set ``spec`` and implement ``handle``.

    ``parallel`` says whether calls of this tool may run beside other calls of the same
    response; a tool that is not parallel runs alone (``apply_patch``).
    """

    spec: ToolSpec
    parallel: bool = True

    @property
    def name(self) -> str:
        """The tool's name, as its spec declares it."""
        return str(getattr(self.spec, "name", self.spec.type))

    @property
    def kind(self) -> ToolKind:
        return kind_of(self.spec)

    def accepts(self, kind: ToolKind) -> bool:
        return kind is self.kind

    @abstractmethod
    async def handle(self, invocation: Invocation) -> ToolOutput:
        """Run one call. Raise ``RespondToModel`` or ``FatalRuntimeError`` on failure."""


class FunctionToolHandler(ToolHandler):
    """A JSON-arguments tool: ``run`` gets the arguments as a dict."""

    async def handle(self, invocation: Invocation) -> ToolOutput:
        payload = _payload(invocation, FunctionPayload)
        return await self.run(parse_arguments(payload.arguments), invocation.context)

    @abstractmethod
    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput: ...


class CustomToolHandler(ToolHandler):
    """A freeform tool: ``run`` gets the raw input text."""

    async def handle(self, invocation: Invocation) -> ToolOutput:
        payload = _payload(invocation, CustomPayload)
        return await self.run(payload.input, invocation.context)

    @abstractmethod
    async def run(self, text: str, context: ToolContext) -> ToolOutput: ...


PayloadT = TypeVar("PayloadT", FunctionPayload, CustomPayload)


def _payload(invocation: Invocation, kind: type[PayloadT]) -> PayloadT:
    """The invocation's payload, which must be of the handler's ``kind`` (Codex's own
    message when it is not: a call of one kind can never run a tool of another)."""
    payload = invocation.payload
    if not isinstance(payload, kind):
        raise FatalRuntimeError(f"tool {invocation.tool_name} invoked with incompatible payload")
    return payload


def parse_arguments(arguments: str) -> dict[str, Any]:
    """A function call's arguments as an object; anything else is told to the model."""
    try:
        value = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError as exc:
        raise RespondToModel(f"failed to parse function arguments: {exc}") from exc
    if not isinstance(value, dict):
        raise RespondToModel("failed to parse function arguments: expected a JSON object")
    return value


def register_tool(
    router: ToolRouter, handler: ToolHandler, *, namespace: str | None = None
) -> None:
    """Register ``handler`` under its spec's name (in ``namespace``, if given)."""
    router.register(ToolName(namespace, handler.name), handler.spec, handler)
