"""``MessagesStreamTranslator``: Anthropic Messages stream events in, Responses events out.

One translator serves one response. ``start()`` gives ``response.created`` and
``response.in_progress``; ``feed(event)`` takes one parsed stream event (``message_start``,
``content_block_start`` / ``_delta`` / ``_stop``, ``message_delta``, ``message_stop``,
``ping``, ``error``); ``finish()`` is the upstream's end; ``fail(message)`` a transport
error. Each returns the events to send, numbered across the stream, and exactly one
terminal event ends it. ``translate_whole(message)`` translates a non-streamed Message
as the stream that would have carried it (``message_events``).

The translator decides; ``ResponsesEventWriter`` writes, ``decide_stream_end`` says how
the stream ends (``stop_reason`` mapped by ``finish_reason``: ``max_tokens`` is
``incomplete``; a stream that stops before its ``message_delta`` failed). What it shares
with the Chat wire's translator (the lifecycle, the end, calls going live and closing,
the failure) is ``ItemStreamTranslator``'s (``.._item_stream``). Content blocks come one
after another, so items do too:

* ``text`` blocks are one assistant ``message`` until another kind of block starts;
* ``thinking`` and ``redacted_thinking`` blocks are ``reasoning`` items whose
  ``encrypted_content`` seals the block itself, signature included, for the next turn;
* ``tool_use`` is restored to the type its tool was declared with (``CallReader``:
  ``function_call`` with its namespace, ``custom_tool_call`` with its raw input
  recovered, legacy ``{"cmd": ...}`` for code-mode ``exec`` included, or
  ``tool_search_call``), its ``input_json_delta`` fragments concatenated;
* the backend's own web search (``server_tool_use`` + ``web_search_tool_result``) is a
  ``web_search_call`` item with its query and sources.

An ``error`` event fails the response with the upstream's message; an item still open
is left out of the failed response (half a tool call never reaches the client).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from toolwire.protocol import ResponsesRequest
from toolwire.tools import ToolKind

from .._calls import ItemStatus, OpenCall
from .._failures import upstream_failure
from .._item_stream import ItemStreamTranslator, OpenItem
from ..reasoning import seal_reasoning
from ..stream_end import StreamEnd, decide_stream_end
from ..tool_table import UpstreamToolTable
from ._events import finish_reason, map_usage, merge_usage, message_events

__all__ = ["MessagesStreamTranslator"]

JSON = dict[str, Any]


# ---------------------------------------------------------------- open items


@dataclass(slots=True)
class _OpenMessage(OpenItem):
    text: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _OpenThinking(OpenItem):
    block: JSON  # the block as it will go back: thinking + signature, or redacted data
    text: list[str] = field(default_factory=list)
    signature: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _OpenSearch(OpenItem):
    upstream_id: str
    query: list[str] = field(default_factory=list)
    sources: list[JSON] = field(default_factory=list)
    failed: bool = False


_OpenItem = _OpenMessage | _OpenThinking | _OpenSearch | OpenCall


class MessagesStreamTranslator(ItemStreamTranslator[_OpenMessage | _OpenThinking | _OpenSearch]):
    """Translate one Anthropic Messages stream into one Responses event stream."""

    def __init__(
        self, request: ResponsesRequest, tools: UpstreamToolTable, *, response_id: str, created_at: int, model: str
    ) -> None:
        super().__init__(request, tools, response_id=response_id, created_at=created_at, model=model)
        self._blocks: dict[int, _OpenItem] = {}  # by content block index, until the block stops
        self._start_input: dict[int, JSON] = {}
        self._stop_reason: str | None = None

    # ------------------------------------------------------------ public API

    def _read(self, event: JSON) -> None:
        """One upstream stream event."""
        match event.get("type"):
            case "content_block_delta":
                self._on_delta(event.get("index"), event.get("delta"))
            case "content_block_start":
                block = event.get("content_block")
                if isinstance(block, dict):
                    self._on_block_start(event.get("index"), block)
            case "content_block_stop":
                self._on_block_stop(event.get("index"))
            case "message_start":
                message = event.get("message")
                if isinstance(message, dict):
                    self._usage = merge_usage(self._usage, message.get("usage"))
            case "message_delta":
                delta = event.get("delta")
                if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                    self._stop_reason = delta["stop_reason"]
                self._usage = merge_usage(self._usage, event.get("usage"))
            case "error":
                message, code = upstream_failure(event) or ("The upstream reported an error.", "server_error")
                self._write_failure(message, code)

    # ------------------------------------------------------------ the wire's ending and usage

    def _as_stream(self, answer: JSON) -> list[JSON]:
        return message_events(answer)

    def _end_of_stream(self, ended_cleanly: bool) -> StreamEnd:
        reason = finish_reason(self._stop_reason) if self._stop_reason is not None else None
        return decide_stream_end(reason, produced=self._writer.items_added > 0, ended_cleanly=ended_cleanly)

    def _mapped_usage(self) -> JSON | None:
        return map_usage(self._usage)

    def _response_so_far(self) -> JSON:
        return self._writer.response("in_progress", output=list(self._output))

    # ------------------------------------------------------------ content blocks

    def _on_block_start(self, index: Any, block: JSON) -> None:
        """A content block begins: the one place where a block opens an item."""
        kind = block.get("type")
        if kind == "text":
            if not isinstance(self._live, _OpenMessage):
                self._close_live("completed")
                self._open_message()
            assert isinstance(self._live, _OpenMessage)
            self._blocks[index] = self._live
            if isinstance(block.get("text"), str) and block["text"]:
                self._text(self._live, block["text"])
        elif kind in ("thinking", "redacted_thinking"):
            self._close_live("completed")
            self._blocks[index] = self._open_thinking(block)
        elif kind == "tool_use":
            self._close_live("completed")
            self._blocks[index] = self._open_call(block)
            if isinstance(block.get("input"), dict) and block["input"]:
                self._start_input[index] = block["input"]
        elif kind == "server_tool_use" and block.get("name") == "web_search":
            self._close_live("completed")
            self._blocks[index] = self._open_search(_search_id(block.get("id")))
            if isinstance(block.get("input"), dict) and block["input"]:
                self._start_input[index] = block["input"]
        elif kind == "web_search_tool_result":
            self._on_search_result(block)
        else:
            self.conversions.append(f"{kind} block dropped")

    def _on_delta(self, index: Any, delta: Any) -> None:
        item = self._blocks.get(index)
        if item is None or not isinstance(delta, dict):
            return
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(item, _OpenMessage):
            text = delta.get("text")
            if isinstance(text, str) and text:
                self._text(item, text)
        elif kind == "input_json_delta":
            fragment = delta.get("partial_json")
            if not (isinstance(fragment, str) and fragment):
                return
            if isinstance(item, OpenCall):
                item.fragments.append(fragment)
                if item.kind is ToolKind.FUNCTION:
                    self._writer.arguments_delta(item.item_id, item.output_index, fragment)
            elif isinstance(item, _OpenSearch):
                item.query.append(fragment)
        elif kind == "thinking_delta" and isinstance(item, _OpenThinking):
            text = delta.get("thinking")
            if isinstance(text, str) and text:
                item.text.append(text)
                self._writer.reasoning_delta(item.item_id, item.output_index, text)
        elif kind == "signature_delta" and isinstance(item, _OpenThinking):
            signature = delta.get("signature")
            if isinstance(signature, str):
                item.signature.append(signature)

    def _on_block_stop(self, index: Any) -> None:
        """A block ends: a thinking block or a call is done; text and a search stay open
        (more text may follow; the search's result block comes next)."""
        item = self._blocks.pop(index, None)
        start_input = self._start_input.pop(index, None)
        if isinstance(item, OpenCall) and start_input is not None and not item.fragments:
            # A backend that sends the whole input at the start, with no deltas.
            arguments = orjson.dumps(start_input).decode()
            item.fragments.append(arguments)
            if item.kind is ToolKind.FUNCTION:
                self._writer.arguments_delta(item.item_id, item.output_index, arguments)
        if isinstance(item, _OpenSearch) and start_input is not None and not item.query:
            item.query.append(orjson.dumps(start_input).decode())
        if isinstance(item, _OpenThinking | OpenCall) and item is self._live:
            self._close_live("completed")

    def _on_search_result(self, block: JSON) -> None:
        search = self._live
        if not isinstance(search, _OpenSearch) or search.upstream_id != _search_id(block.get("tool_use_id")):
            self.conversions.append("web_search_tool_result without its search dropped")
            return
        content = block.get("content")
        if isinstance(content, list):
            search.sources = [
                {"type": "url", "url": result["url"]}
                for result in content
                if isinstance(result, dict) and isinstance(result.get("url"), str)
            ]
        else:
            search.failed = True
        self._close_live("completed")

    # ------------------------------------------------------------ items: open, stream, close

    def _open_message(self) -> None:
        writer = self._writer
        item_id, output_index = writer.add_item(
            "msg", {"type": "message", "status": "in_progress", "role": "assistant", "content": []}
        )
        writer.part_added(item_id, output_index, 0, {"type": "output_text", "text": "", "annotations": [], "logprobs": []})
        self._live = _OpenMessage(item_id, output_index)

    def _text(self, message: _OpenMessage, text: str) -> None:
        message.text.append(text)
        self._writer.text_delta(message.item_id, message.output_index, 0, text)

    def _open_thinking(self, block: JSON) -> _OpenThinking:
        writer = self._writer
        redacted = block.get("type") == "redacted_thinking"
        item_id, output_index = writer.add_item(
            "rs", {"type": "reasoning", "status": "in_progress", "summary": [], "content": []}
        )
        if redacted:
            kept: JSON = {"type": "redacted_thinking", "data": block.get("data") or ""}
        else:
            kept = {"type": "thinking", "thinking": ""}
            writer.part_added(item_id, output_index, 0, {"type": "reasoning_text", "text": ""})
        thinking = _OpenThinking(item_id, output_index, kept)
        if not redacted and isinstance(block.get("thinking"), str) and block["thinking"]:
            thinking.text.append(block["thinking"])
            writer.reasoning_delta(item_id, output_index, block["thinking"])
        if isinstance(block.get("signature"), str) and block["signature"]:
            thinking.signature.append(block["signature"])
        self._live = thinking
        return thinking

    def _open_call(self, block: JSON) -> OpenCall:
        name = block.get("name")
        upstream_id = block.get("id")
        call = OpenCall(upstream_id=upstream_id if isinstance(upstream_id, str) and upstream_id else None)
        call.name = name if isinstance(name, str) and name else "unnamed_tool"
        self._go_live(call)
        return call

    def _open_search(self, upstream_id: str) -> _OpenSearch:
        item_id, output_index = self._writer.add_item(
            "ws", {"type": "web_search_call", "status": "in_progress", "action": {"type": "search"}}
        )
        search = self._live = _OpenSearch(item_id, output_index, upstream_id)
        return search

    def _close_item(self, live: _OpenMessage | _OpenThinking | _OpenSearch, status: ItemStatus) -> JSON:
        if isinstance(live, _OpenMessage):
            writer = self._writer
            text = "".join(live.text)
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            writer.text_done(live.item_id, live.output_index, 0, text)
            writer.part_done(live.item_id, live.output_index, 0, part)
            return {"id": live.item_id, "type": "message", "status": status, "role": "assistant", "content": [part]}
        if isinstance(live, _OpenThinking):
            return self._thinking_item(live, status)
        return self._search_item(live)

    def _thinking_item(self, thinking: _OpenThinking, status: ItemStatus) -> JSON:
        writer = self._writer
        block = thinking.block
        content: list[JSON] = []
        text = "".join(thinking.text)
        if block["type"] == "thinking":
            block["thinking"] = text
            if thinking.signature:
                block["signature"] = "".join(thinking.signature)
            part = {"type": "reasoning_text", "text": text}
            writer.reasoning_done(thinking.item_id, thinking.output_index, text)
            writer.part_done(thinking.item_id, thinking.output_index, 0, part)
            content.append(part)
        return {
            "id": thinking.item_id,
            "type": "reasoning",
            "status": status,
            "summary": [],
            "content": content,
            "encrypted_content": seal_reasoning(text, blocks=[block]),
        }

    def _search_item(self, search: _OpenSearch) -> JSON:
        action: JSON = {"type": "search"}
        text = "".join(search.query)
        try:
            value = orjson.loads(text) if text else {}
        except orjson.JSONDecodeError:
            value = {}
        if isinstance(value, dict) and isinstance(value.get("query"), str):
            action["query"] = value["query"]
        if search.sources:
            action["sources"] = search.sources
        return {
            "id": search.item_id,
            "type": "web_search_call",
            "status": "failed" if search.failed else "completed",
            "action": action,
        }


def _search_id(value: Any) -> str:
    """A web search's id as its block gives it and its result's ``tool_use_id`` names it,
    read alike on both sides so that they match: missing and empty are the same."""
    return str(value or "")
