"""Small helpers shared by the protocol and tools tests."""

from __future__ import annotations

from typing import Any

from toolwire.protocol import ToolSpec, parse_request


def parse_tool(spec: dict[str, Any]) -> ToolSpec:
    """One tool definition, parsed the way a request's ``tools`` are."""
    tools = parse_request({"model": "m", "tools": [spec]}).tools
    assert tools is not None
    return tools[0]


def with_unknown_fields(value: Any, depth: int = 0) -> Any:
    """``value`` with a new unknown field in every JSON object, at every depth."""
    if isinstance(value, dict):
        out = {key: with_unknown_fields(inner, depth + 1) for key, inner in value.items()}
        out[f"x_future_{depth}"] = {"nested": [1, 2.5, None, True, "é"], "depth": depth}
        return out
    if isinstance(value, list):
        return [with_unknown_fields(inner, depth + 1) for inner in value]
    return value
