"""``Exchange``: one request through the gateway, as logs, metrics and captures see it.

The endpoint fills an Exchange as the request goes (what the client sent, what went
upstream, when the first token came, how it ended) and hands it to the observers when
it starts and when it is over. Recording the upstream chunks and the events sent back
costs memory, so it happens only when an observer asks for it (``wants_traffic``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from toolwire.keys import Lease
from toolwire.protocol import PlainChunks, StreamItem, WholeAnswer


@dataclass(frozen=True, slots=True)
class ToolCallSummary:
    type: str  # function_call | custom_tool_call | tool_search_call
    name: str
    namespace: str | None


@dataclass(slots=True)
class Exchange:
    request_id: str
    client_request: bytes
    record_traffic: bool = False
    started_at: float = field(default_factory=time.monotonic)
    received_at: float = field(default_factory=time.time)
    model: str | None = None
    previous_response_id: str | None = None
    upstream: str | None = None
    upstream_model: str | None = None
    stream: bool = False
    # What went upstream, when traffic is recorded: serialized (an ``orjson.Fragment``),
    # which takes a fraction of the memory of the dict while a stream is open.
    upstream_request: Any = None
    upstream_request_bytes: bytes = b""
    upstream_chunks: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    first_token_at: float | None = None
    finished_at: float | None = None
    status: int = 200
    outcome: str = "pending"  # completed | incomplete | failed | error | disconnected
    error: str | None = None
    error_kind: str | None = None
    usage: dict[str, Any] | None = None
    tool_calls: list[ToolCallSummary] = field(default_factory=list)
    conversions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    response: dict[str, Any] | None = None
    # The client key's name (never the key) and, once admitted, its lease: what the
    # exchange's usage is charged to (``toolwire.keys``).
    key_name: str | None = None
    lease: Lease | None = None

    @property
    def latency(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.started_at

    @property
    def time_to_first_token(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.started_at

    def note_upstream_request(self, body: Mapping[str, Any]) -> None:
        if self.record_traffic:
            self.upstream_request_bytes = orjson.dumps(body)
            self.upstream_request = orjson.Fragment(self.upstream_request_bytes)

    def upstream_request_json(self) -> dict[str, Any] | None:
        """What went upstream, decoded (None when traffic is not recorded)."""
        if not self.upstream_request_bytes:
            return None
        decoded: dict[str, Any] = orjson.loads(self.upstream_request_bytes)
        return decoded

    def note_chunk(self, chunk: StreamItem) -> None:
        if self.first_token_at is None:
            self.first_token_at = time.monotonic()
        if self.record_traffic:
            if isinstance(chunk, PlainChunks):
                self.upstream_chunks.extend(chunk.objects())
            elif isinstance(chunk, WholeAnswer):
                self.upstream_chunks.append(chunk.answer)
            else:
                self.upstream_chunks.append(chunk)

    def note_conversions(self, conversions: list[str]) -> None:
        """Add ``conversions`` to those noted, each listed once, in the order first noted."""
        if conversions:
            self.conversions = list(dict.fromkeys([*self.conversions, *conversions]))

    def note_events(self, events: list[Any]) -> None:
        if self.record_traffic:
            self.events.extend(events)

    def finish(self, outcome: str, *, response: dict[str, Any] | None = None, status: int | None = None,
               error: str | None = None, error_kind: str | None = None) -> None:
        """Record how the exchange ended; ``response`` is the final Response object, if any."""
        if self.finished_at is not None:
            return
        self.finished_at = time.monotonic()
        self.outcome = outcome
        if status is not None:
            self.status = status
        self.error = error
        self.error_kind = error_kind
        if response is not None:
            self.response = response
            self.usage = response.get("usage")
            self.tool_calls = [
                ToolCallSummary(item["type"], str(item.get("name", "tool_search")), item.get("namespace"))
                for item in response.get("output") or ()
                if item.get("type") in ("function_call", "custom_tool_call", "tool_search_call")
            ]
            if response.get("status") == "failed" and error is None:
                failure = response.get("error") or {}
                self.error = failure.get("message")
                self.error_kind = failure.get("code")


class ExchangeObserver(Protocol):
    """Something that watches exchanges: a log line, metrics, a traffic capture."""

    @property
    def wants_traffic(self) -> bool:
        """True if ``finished`` needs the upstream chunks and the events sent back."""
        ...

    def started(self, exchange: Exchange) -> None: ...

    def finished(self, exchange: Exchange) -> None: ...
