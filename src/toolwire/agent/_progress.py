"""``ProgressPrinter``: the agent's progress on a terminal, one line per model request and
tool call, with a preview of each result (``toolwire agent`` writes it to stderr)."""

from __future__ import annotations

from typing import TextIO

from toolwire.tools import FunctionPayload

from ._events import AgentEvent, AssistantMessage, ModelRequested, ToolCallFinished, ToolCallStarted

_PREVIEW_LINES = 6
_PREVIEW_CHARS = 600


class ProgressPrinter:
    """Writes each tool call and its result to ``stream`` (stderr in the CLI)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def __call__(self, event: AgentEvent) -> None:
        if isinstance(event, ModelRequested):
            self._write(f"· request {event.turn} to the model")
        elif isinstance(event, AssistantMessage):
            self._write(f"· assistant: {_preview(event.text)}")
        elif isinstance(event, ToolCallStarted):
            payload = event.call.payload
            shown = (
                payload.arguments
                if isinstance(payload, FunctionPayload)
                else getattr(payload, "input", "")
            )
            self._write(f"→ {event.call.tool_name} [{event.call.call_id}] {_preview(str(shown))}")
        elif isinstance(event, ToolCallFinished):
            status = "ok" if event.success else "error"
            self._write(
                f"← {event.call.tool_name} [{event.call.call_id}] {status} in {event.seconds:.2f} s\n"
                + _indent(_preview(event.output))
            )

    def _write(self, text: str) -> None:
        self._stream.write(text + "\n")
        self._stream.flush()


def _preview(text: str) -> str:
    lines = text.splitlines()
    shown = "\n".join(lines[:_PREVIEW_LINES])
    if len(shown) > _PREVIEW_CHARS:
        shown = shown[:_PREVIEW_CHARS] + "…"
    if len(lines) > _PREVIEW_LINES:
        shown += f"\n… ({len(lines) - _PREVIEW_LINES} more lines)"
    return shown


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
