"""The storage seam: what a response store is, what it holds, and how it fails.

Everything here is pure: the ``ResponseStore`` protocol the server talks to, the
``StoredResponse`` record, its JSON codec, the assembly of a conversation from a
chain of records, and the two errors a store raises on purpose::

    ToolwireError
    ├── NotFoundError
    │   └── PreviousResponseNotFound   previous_response_id (or an ancestor) is unknown -> 404
    └── StoreUnavailable               the store cannot be reached or written           -> 503

A stored response is immutable once written: continuing a response never changes
it, it only adds a child that points back to it. Two requests continuing the same
response at once therefore write two independent records and cannot corrupt either
chain. Reading a chain counts as *using* every response in it: stores refresh their
time to live and their place in the eviction order, so a conversation that is still
being continued never loses its beginning, while an abandoned one expires as a whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from toolwire.errors import NotFoundError, RequestError, ToolwireError

ItemDict = dict[str, Any]

MAX_CHAIN_LENGTH = 10_000
"""The most responses one ``previous_response_id`` chain may hold (a guard, not a budget)."""

_ITEM_ID_PREFIXES = {
    "message": "msg",
    "reasoning": "rs",
    "function_call": "fc",
    "function_call_output": "fco",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
    "tool_search_call": "tsc",
    "tool_search_output": "tso",
    "local_shell_call": "lsh",
    "local_shell_call_output": "lsho",
    "web_search_call": "ws",
}


class StoreUnavailable(ToolwireError):
    """The response store cannot be reached or failed to answer (Redis down, disk full...).

    Neither the client's nor the backend's fault: the same request may succeed once the
    store is back, hence 503. The message names the store (never its password).
    """

    status = 503
    error_type = "service_unavailable"

    def __init__(self, message: str, *, code: str | None = "store_unavailable") -> None:
        super().__init__(message, code=code)


class PreviousResponseNotFound(NotFoundError):
    """``previous_response_id`` names no stored response, or its chain has a gap.

    ``missing_id`` is the response that is gone: the one the client named, or an earlier
    response of its chain that expired, was evicted or was deleted.
    """

    def __init__(self, previous_response_id: str, missing_id: str | None = None) -> None:
        missing_id = missing_id or previous_response_id
        if missing_id == previous_response_id:
            message = f"Previous response with id '{previous_response_id}' not found."
        else:
            message = (
                f"Previous response with id '{previous_response_id}' cannot be continued: "
                f"the earlier response '{missing_id}' in its chain expired or was deleted."
            )
        super().__init__(message, param="previous_response_id", code="previous_response_not_found")
        self.previous_response_id = previous_response_id
        self.missing_id = missing_id


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """One stored response: the Response object and the input items it was created from.

    ``input_items`` are only this response's own request input (every item has an
    ``id``); the items of earlier responses live in their own records, reached through
    ``previous_response_id``. Build one with ``StoredResponse.from_exchange``.

    ``owner`` names the client key that created it (``toolwire.keys.Principal.owner``;
    None on a gateway without keys): only a request with the same owner may read,
    delete or continue it (``visible_to``).
    """

    id: str
    created_at: int
    response: dict[str, Any]
    input_items: tuple[ItemDict, ...]
    previous_response_id: str | None = None
    owner: str | None = None

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("a stored response needs an id")
        if self.previous_response_id == self.id:
            raise ValueError(f"response {self.id!r} cannot continue itself")

    @classmethod
    def from_exchange(
        cls,
        response: Mapping[str, Any],
        input_items: Iterable[Mapping[str, Any]] | str,
        *,
        previous_response_id: str | None = None,
        owner: str | None = None,
    ) -> StoredResponse:
        """The record of one request/response exchange.

        ``response`` is the final Response object (its ``id`` and ``created_at`` are the
        record's); ``input_items`` is the request's own ``input`` as JSON (a string is one
        user message), *without* the items of the previous responses. Items without an
        ``id`` get one (``msg_…``, ``fc_…``, …), derived from the response id, so storing
        the same exchange twice gives the same record; short-hand messages get their full
        form (content parts), as the API lists them. ``previous_response_id`` defaults to
        the response object's own; ``owner`` is the creating key's.
        """
        response_id = response.get("id")
        if not isinstance(response_id, str) or not response_id:
            raise ValueError("the response object has no id")
        if previous_response_id is None and isinstance(response.get("previous_response_id"), str):
            previous_response_id = response["previous_response_id"]
        created_at = response.get("created_at")
        return cls(
            id=response_id,
            created_at=int(created_at) if isinstance(created_at, (int, float)) else 0,
            response=dict(response),
            input_items=stored_items(input_items, response_id),
            previous_response_id=previous_response_id,
            owner=owner,
        )

    def visible_to(self, owner: str | None) -> bool:
        """Whether a request by ``owner`` may see this response (to anyone else it does not exist)."""
        return self.owner == owner

    @property
    def output_items(self) -> list[ItemDict]:
        """The Response's ``output`` items."""
        output = self.response.get("output")
        return [item for item in output if isinstance(item, dict)] if isinstance(output, list) else []


class ResponseStore(Protocol):
    """Where stored responses live. One seam, several stores: memory, SQLite, Redis.

    Every method may raise ``StoreUnavailable``. Records are immutable once written;
    ``put`` of an existing id replaces it (a retried write is harmless).
    """

    max_bytes: int | None
    """The most bytes of records it keeps, least recently used out first (None: no bound)."""

    async def put(self, record: StoredResponse) -> None:
        """Store ``record`` (it counts as just used)."""
        ...

    async def get(self, response_id: str) -> StoredResponse | None:
        """The record, or None if it never existed, expired, was evicted or deleted."""
        ...

    async def delete(self, response_id: str) -> bool:
        """Forget the record; False if there was none."""
        ...

    async def chain_input(self, previous_response_id: str) -> list[ItemDict]:
        """The whole conversation up to and including ``previous_response_id``.

        For each response of the chain, oldest first: its input items, then its output
        items. Every response of the chain counts as just used. Raises
        ``PreviousResponseNotFound`` if the response or any earlier one is gone.
        """
        ...

    async def chain_ids(self, previous_response_id: str) -> tuple[str, ...]:
        """The ids of the responses of that chain, oldest first: ``chain_input``'s walk,
        its checks and its refresh, without reading the records (a gateway that holds the
        conversation already asks only whether it is still whole)."""
        ...

    async def stored_bytes(self) -> int:
        """The bytes of the records the store holds (what ``max_bytes`` bounds)."""
        ...

    @property
    def bytes_seen(self) -> int | None:
        """``stored_bytes`` as this process last saw it, without asking the store: after its
        last write or delete (None before any). Other processes sharing the store may have
        changed it since."""
        ...

    async def aclose(self) -> None:
        """Release connections and threads. The store is unusable afterwards."""
        ...


def stored_items(input_items: Iterable[Mapping[str, Any]] | str, response_id: str) -> tuple[ItemDict, ...]:
    """A request's own ``input`` as the record of its response ``response_id`` keeps it
    (``StoredResponse.from_exchange``): every item with an ``id``, messages in full form."""
    return tuple(_as_stored_item(item, response_id, index) for index, item in enumerate(_as_items(input_items)))


def conversation_of(chain: Sequence[StoredResponse]) -> list[ItemDict]:
    """The items of a chain given oldest first: each response's input, then its output."""
    items: list[ItemDict] = []
    for record in chain:
        items.extend(record.input_items)
        items.extend(record.output_items)
    return items


def check_chain_length(previous_response_id: str, length: int) -> None:
    """Refuse a chain longer than ``MAX_CHAIN_LENGTH`` (which also stops a corrupt cycle)."""
    if length > MAX_CHAIN_LENGTH:
        raise RequestError(
            f"The chain of previous responses ending at '{previous_response_id}' is longer "
            f"than {MAX_CHAIN_LENGTH} responses.",
            param="previous_response_id",
            code="previous_response_chain_too_long",
        )


def encode_record(record: StoredResponse) -> bytes:
    """A record as JSON bytes: what every persistent store writes."""
    return orjson.dumps(
        {
            "v": 1,
            "id": record.id,
            "created_at": record.created_at,
            "previous_response_id": record.previous_response_id,
            "response": record.response,
            "input_items": record.input_items,
            "owner": record.owner,
        }
    )


def decode_record(data: bytes | str) -> StoredResponse:
    """The inverse of ``encode_record``."""
    raw = orjson.loads(data)
    return StoredResponse(
        id=raw["id"],
        created_at=raw["created_at"],
        response=raw["response"],
        input_items=tuple(raw["input_items"]),
        previous_response_id=raw["previous_response_id"],
        owner=raw.get("owner"),
    )


def _as_items(request_input: Iterable[Mapping[str, Any]] | str) -> list[ItemDict]:
    if isinstance(request_input, str):
        return [{"type": "message", "role": "user", "content": request_input}]
    return [dict(item) for item in request_input]


def _as_stored_item(item: ItemDict, response_id: str, index: int) -> ItemDict:
    """``item`` as the API lists it: with an ``id``, and a message in its full form.

    A short-hand message (``{"role": "user", "content": "hi"}``) gets its ``type`` and
    a list of content parts (``input_text``, or ``output_text`` for the assistant, which
    also gets a ``status``), so clients can parse what ``input_items`` returns.
    """
    item_type = item.get("type", "message")
    if item_type == "message":
        item = {"type": "message", **item}
        role = item.get("role")
        if isinstance(item.get("content"), str):
            text = item["content"]
            item["content"] = [
                {"type": "output_text", "text": text, "annotations": []}
                if role == "assistant"
                else {"type": "input_text", "text": text}
            ]
        if role == "assistant":
            item.setdefault("status", "completed")
    if isinstance(item.get("id"), str) and item["id"]:
        return item
    prefix = _ITEM_ID_PREFIXES.get(str(item_type), "item")
    digest = hashlib.sha256(f"{response_id}/input/{index}".encode()).hexdigest()
    return {**item, "id": f"{prefix}_{digest[:32]}"}
