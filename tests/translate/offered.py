"""What every wire says of a lowered custom tool, spelled out (not read from the code):
the one string parameter it takes and the line added to its description."""

from __future__ import annotations

RAW_INPUT = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The raw text input: not JSON, not wrapped in markdown code fences."}},
    "required": ["input"],
    "additionalProperties": False,
}
FREEFORM = (
    "This is a freeform tool: pass its whole input as the string argument `input`. `input` is the raw text "
    "itself (for example the patch, or the JavaScript source), NOT JSON and NOT wrapped in markdown code fences."
)
