"""What the agent loop reports while it runs, for progress display (frozen values).

A listener is any ``Callable[[AgentEvent], None]``; the CLI prints them on stderr.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from toolwire.tools import ToolCall


@dataclass(frozen=True, slots=True)
class ModelRequested:
    """Request number ``turn`` (from 1) is being sent to the model."""

    turn: int


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """Text the model wrote in a response that also made tool calls."""

    turn: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    turn: int
    call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A call's output is ready; ``success`` is False for errors told to the model."""

    turn: int
    call: ToolCall
    output: str
    success: bool
    seconds: float


AgentEvent = ModelRequested | AssistantMessage | ToolCallStarted | ToolCallFinished
EventListener = Callable[[AgentEvent], None]


def ignore_events(event: AgentEvent) -> None:
    """The listener that does nothing."""
