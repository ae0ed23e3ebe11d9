"""``ItemRestorer``: one output item of a downgraded backend, as the client declared it.

A call the backend made to a lowered tool comes back as its declared kind: a
``function_call`` of a custom tool as a ``custom_tool_call`` with its raw input
recovered, of a client tool_search as a ``tool_search_call``; a flattened or guessed name
as the client's ``namespace`` + ``name``. Anything else passes untouched. Deterministic
(ids are derived from the backend's), so an item's ``added`` and ``done`` always agree.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson

from toolwire.protocol import CustomTool
from toolwire.tools import ToolKind, ToolName

from .._tools import name_fields
from ..custom_input import recover_custom_input
from ._table import DowngradedTool, DowngradedToolTable, without

JSON = dict[str, Any]

_FUNCTION_ID = re.compile(r"\Afc[_-]")
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


class ItemRestorer:
    """Restores one output item; deterministic, so ``added`` and ``done`` always agree."""

    def __init__(self, table: DowngradedToolTable, conversions: list[str]) -> None:
        self._table = table
        self._conversions = conversions

    def call_tool(self, item: JSON) -> DowngradedTool | None:
        """The declared tool a call item needs restoring to, or None if it is fine as it is."""
        kind, name = item.get("type"), item.get("name")
        if kind not in ("function_call", "custom_tool_call") or not isinstance(name, str):
            return None
        namespace = item.get("namespace")
        upstream = ToolName(namespace if isinstance(namespace, str) else None, name)
        tool, guessed = self._table.resolve(upstream)
        if tool is None:
            return None
        unchanged = tool.tool_name == upstream and not guessed
        if unchanged and (
            (kind == "function_call" and tool.kind is ToolKind.FUNCTION)
            or (kind == "custom_tool_call" and tool.kind is ToolKind.CUSTOM)
        ):
            return None
        return tool

    def restore(self, item: JSON, *, done: bool, record: bool = True) -> JSON:
        tool = self.call_tool(item)
        if tool is None:
            return item
        if record:
            self._note(item, tool, done=done)
        if item.get("type") == "function_call" and tool.kind is ToolKind.CUSTOM:
            return self.custom_call(
                item, tool, self.custom_input(item, tool, record=record and done)
            )
        if item.get("type") == "function_call" and tool.kind is ToolKind.TOOL_SEARCH:
            return self._tool_search_call(item, done=done, record=record)
        renamed: JSON = {}
        for key, value in item.items():
            if key == "name":
                renamed.update(name_fields(tool.tool_name.namespace, tool.tool_name.name))
            elif key != "namespace":
                renamed[key] = value
        return renamed

    def function_name(self, upstream_name: str) -> str | None:
        """The client's name of the function the backend calls ``upstream_name``, if renamed."""
        tool, _ = self._table.resolve(ToolName(None, upstream_name))
        if (
            tool is None
            or tool.kind is not ToolKind.FUNCTION
            or tool.tool_name.name == upstream_name
        ):
            return None
        return tool.tool_name.name

    def custom_input(self, item: JSON, tool: DowngradedTool, *, record: bool) -> str:
        arguments = item.get("arguments")
        if not isinstance(arguments, str) or not arguments:
            return ""
        spec = tool.spec
        if not isinstance(spec, CustomTool):
            return arguments
        recovered = recover_custom_input(arguments, spec)
        if record and recovered.conversion is not None:
            self._conversions.append(recovered.conversion)
        return recovered.text

    def custom_call(self, item: JSON, tool: DowngradedTool, text: str) -> JSON:
        """The ``custom_tool_call`` a backend's ``function_call`` of a custom tool is."""
        named = name_fields(tool.tool_name.namespace, tool.tool_name.name)
        return _restored_call(item, "custom_tool_call", {**named, "input": text})

    def _tool_search_call(self, item: JSON, *, done: bool, record: bool) -> JSON:
        arguments: Any = {}
        raw = item.get("arguments")
        if isinstance(raw, str) and raw.strip():
            try:
                arguments = orjson.loads(raw)
            except orjson.JSONDecodeError:
                arguments = {}
            if not isinstance(arguments, dict):
                arguments = {}
                if record and done:
                    self._conversions.append("tool arguments replaced with {}")
        return _restored_call(
            item, "tool_search_call", {"execution": "client", "arguments": arguments}
        )

    def _note(self, item: JSON, tool: DowngradedTool, *, done: bool) -> None:
        if not done:
            return
        if item.get("type") == "function_call" and tool.kind is ToolKind.CUSTOM:
            self._conversions.append(f"custom {tool.tool_name.name} restored")
        elif item.get("type") == "function_call" and tool.kind is ToolKind.TOOL_SEARCH:
            self._conversions.append("tool_search call restored")
        if tool.tool_name.namespace is not None and tool.upstream.namespace is None:
            self._conversions.append(f"namespace {tool.tool_name.namespace} restored")
        elif tool.upstream != ToolName(item.get("namespace") or None, str(item.get("name"))):
            self._conversions.append(f"tool name {item.get('name')} resolved to {tool.tool_name}")


_CALL_FIELDS = ("id", "type", "status", "call_id", "name", "namespace", "arguments", "input")
_ID_PREFIXES = {"custom_tool_call": "ctc", "tool_search_call": "tsc"}


def _restored_call(item: JSON, kind: str, payload: JSON) -> JSON:
    """``item`` (a backend's ``function_call``) as a call of ``kind`` carrying ``payload``:
    its id re-prefixed, its status and call id kept, its unknown fields after them."""
    call: JSON = {"id": _restored_id(_ID_PREFIXES[kind], item), "type": kind}
    if "status" in item:
        call["status"] = item["status"]
    call["call_id"] = item.get("call_id")
    call.update(payload)
    call.update(without(item, *_CALL_FIELDS))
    return call


def _restored_id(prefix: str, item: JSON) -> str:
    """The id of a restored call: the backend's ``fc_`` id re-prefixed, else one derived
    from it (or from the call id), so that every event of the item agrees."""
    upstream_id = item.get("id")
    if isinstance(upstream_id, str) and upstream_id and not _UNSAFE_ID_CHARS.search(upstream_id):
        if _FUNCTION_ID.match(upstream_id) and len(upstream_id) > 3:
            return f"{prefix}_{upstream_id[3:]}"
        return f"{prefix}_{upstream_id}"
    seed = upstream_id if isinstance(upstream_id, str) and upstream_id else str(item.get("call_id"))
    return f"{prefix}_{hashlib.sha256(seed.encode()).hexdigest()[:32]}"
