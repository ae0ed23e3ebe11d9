"""The storage seam: what a response store is, what it holds, and how it fails.

Everything here is pure: the ``ResponseStore`` protocol the server talks to, the
``StoredResponse`` record, its JSON codec, the assembly of a conversation from a
chain of records, and the two errors a store raises on purpose::

    ToolwireError
    ├── NotFoundError
    │   ├── PreviousResponseNotFound   previous_response_id (or an ancestor) is unknown -> 404
    │   └── InputNotWhole              a record its input builds on is gone             -> 404
    └── StoreUnavailable               the store cannot be reached or written           -> 503

A stored response is immutable once written: continuing a response never changes
it, it only adds a child that points back to it. Two requests continuing the same
response at once therefore write two independent records and cannot corrupt either
chain. Reading a chain counts as *using* every response in it: stores refresh their
time to live and their place in the eviction order, so a conversation that is still
being continued never loses its beginning, while an abandoned one expires as a whole.

A client that resends its whole history with every request, leaving ``store`` true,
would have each response's record hold that whole history again. Such a record may
instead *build on* the record of the request before (``input_base``): it holds only the
items after that request's input, and its whole input is found by walking back, as a
chain of ``previous_response_id`` is walked (with the same checks and refresh). Nothing
of this shows through the API: a listing gives the whole input, and deleting a record
that others build on first moves its items into theirs (``spliced``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from toolwire.errors import NotFoundError, RequestError, ToolwireError

ItemDict = dict[str, Any]

MAX_CHAIN_LENGTH = 10_000
"""The most responses one ``previous_response_id`` chain may hold (a guard, not a budget)."""

MAX_INPUT_BASES = 256
"""The most records one record's input may be spread over (``input_base`` links walked
back): past it, a record holds its whole input again, which bounds a listing's walk and
keeps chains well below ``MAX_CHAIN_LENGTH``."""

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


class InputNotWhole(NotFoundError):
    """A stored response's input cannot be listed whole: a record it builds on is gone.

    A store keeps the records an input builds on for as long as that input's record
    (walking it refreshes them after it, deleting one moves its items into the records
    building on it); this is what a store that lost one anyway (a crash, Redis evicting
    keys by itself) answers instead of a part of the input.
    """

    def __init__(self, response_id: str, missing_id: str) -> None:
        super().__init__(
            f"The input of response '{response_id}' is no longer whole: the earlier response "
            f"'{missing_id}' it was stored with expired or was deleted.",
            param="response_id",
            code="response_input_not_found",
        )
        self.response_id = response_id
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

    ``input_base`` names the record (of the same owner, with no previous response) whose
    whole input this request's input began with, when it builds on it: ``input_items``
    are then only the items after those (a store gives the whole input: ``input_of``).
    A record builds on a previous response's conversation or on an input, never both.
    """

    id: str
    created_at: int
    response: dict[str, Any]
    input_items: tuple[ItemDict, ...]
    previous_response_id: str | None = None
    owner: str | None = None
    input_base: str | None = None

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("a stored response needs an id")
        if self.id in (self.previous_response_id, self.input_base):
            raise ValueError(f"response {self.id!r} cannot continue itself")
        if self.previous_response_id is not None and self.input_base is not None:
            raise ValueError(f"response {self.id!r} builds on a previous response and on an input at once")

    @property
    def link(self) -> str | None:
        """The record this one's items follow on from (its previous response, or its input
        base): what a store walks back from it."""
        return self.previous_response_id or self.input_base

    @classmethod
    def from_exchange(
        cls,
        response: Mapping[str, Any],
        input_items: Iterable[Mapping[str, Any]] | str,
        *,
        previous_response_id: str | None = None,
        owner: str | None = None,
        input_base: str | None = None,
        items_before: int = 0,
    ) -> StoredResponse:
        """The record of one request/response exchange.

        ``response`` is the final Response object (its ``id`` and ``created_at`` are the
        record's); ``input_items`` is the request's own ``input`` as JSON (a string is one
        user message), *without* the items of the previous responses. Items without an
        ``id`` get one (``msg_…``, ``fc_…``, …), derived from the response id, so storing
        the same exchange twice gives the same record; short-hand messages get their full
        form (content parts), as the API lists them. ``previous_response_id`` defaults to
        the response object's own; ``owner`` is the creating key's. A record building on
        ``input_base`` is given only the items after its input, ``items_before`` of them.
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
            input_items=stored_items(input_items, response_id, first_index=items_before),
            previous_response_id=previous_response_id,
            owner=owner,
            input_base=input_base,
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

    async def put(self, record: StoredResponse) -> bool:
        """Store ``record`` (it counts as just used, and so does every record its input
        builds on, as for ``chain_ids``). False, with nothing written, when it builds on an
        input that is no longer whole in the store (expired, evicted or deleted)."""
        ...

    async def get(self, response_id: str) -> StoredResponse | None:
        """The record, or None if it never existed, expired, was evicted or deleted."""
        ...

    async def delete(self, response_id: str) -> bool:
        """Forget the record; False if there was none. Records building on its input get
        its items first (``spliced``): they lose nothing."""
        ...

    async def input_of(self, record: StoredResponse) -> list[ItemDict]:
        """The whole input of ``record``, read from this store: its own items, after those
        of the records its input builds on. Raises ``InputNotWhole`` if one is gone."""
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


def stored_items(
    input_items: Iterable[Mapping[str, Any]] | str, response_id: str, *, first_index: int = 0
) -> tuple[ItemDict, ...]:
    """A request's own ``input`` as the record of its response ``response_id`` keeps it
    (``StoredResponse.from_exchange``): every item with an ``id``, messages in full form.
    ``first_index``: the place of the first in the request's input."""
    return tuple(
        _as_stored_item(item, response_id, index)
        for index, item in enumerate(_as_items(input_items), start=first_index)
    )


def conversation_of(chain: Sequence[StoredResponse], *, last_output: bool = True) -> list[ItemDict]:
    """The items of a chain given oldest first: each response's input, then its output
    (but for a response whose input a later one builds on: its input is that one's too;
    and the newest's, without ``last_output``: the newest's whole input)."""
    items: list[ItemDict] = []
    for record, later in zip(chain, (*chain[1:], None), strict=True):
        items.extend(record.input_items)
        if (later is None and last_output) or (later is not None and later.input_base != record.id):
            items.extend(record.output_items)
    return items


def spliced(record: StoredResponse, base: StoredResponse) -> StoredResponse:
    """``record``, which builds on ``base``'s input, holding ``base``'s items itself and
    building on what ``base`` builds on: what it becomes before ``base`` is deleted."""
    if record.input_base != base.id:
        raise ValueError(f"response {record.id!r} does not build on {base.id!r}")
    return dataclasses.replace(
        record, input_items=(*base.input_items, *record.input_items), input_base=base.input_base
    )


def spliced_encoded(data: bytes | str, base: StoredResponse) -> tuple[StoredResponse, bytes] | None:
    """The encoded record ``data`` given ``base``'s items (``spliced``), and its encoding;
    None when it does not build on ``base``'s input (it continues ``base`` by id, say)."""
    record = decode_record(data)
    if record.input_base != base.id:
        return None
    whole = spliced(record, base)
    return whole, encode_record(whole)


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
    fields: dict[str, Any] = {
        "v": 1,
        "id": record.id,
        "created_at": record.created_at,
        "previous_response_id": record.previous_response_id,
        "response": record.response,
        "input_items": record.input_items,
        "owner": record.owner,
    }
    if record.input_base is not None:
        fields["input_base"] = record.input_base
    return orjson.dumps(fields)


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
        input_base=raw.get("input_base"),
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
