"""Conversations seen before: a body that resends a known history is parsed only past it.

Codex sends the whole conversation with every request (``store: false``): request n+1's
body is request n's, byte for byte, up to the end of its last input item; then come the
new items and the rest of the body (tools, ...). Decoding and validating the whole
history again costs about 8 us per item, so a session's turns would grow dearer with
its length. ``KNOWN_HISTORIES`` keeps, for recent bodies, where their input items end
and the items they validated to. A body that starts with exactly those bytes is parsed
as the small body made of its head (the fields before ``input``) and what follows the
known items; the known items are then put back in front of the new ones.

Why that is the same as parsing the whole body:

* A prefix is learned only from a body that parsed and validated, and only where its
  head and items are written exactly as ``orjson.dumps`` writes their decoded values
  (compact JSON, keys in the order given: what Codex, ``JSON.stringify`` and httpx send),
  which locates the ``[`` that opens the input array and the end of its last item
  without any JSON scanning in Python. Clients that write JSON otherwise simply always
  take the full path.
* The same bytes decode to the same values, and each item validates on its own, so the
  known items are what the prefix holds in any body that starts with it.
* The rest is checked on the bytes too: the new items must be written as orjson writes
  them and be followed by the ``]`` that closes the array (so ``[a,]`` or a cut-off
  array is left to the full path and its error), and no key named ``input`` may follow
  (a second one would replace the whole array).
* Anything else (a body that does not parse this way, a new item or field that does not
  validate) goes the full path, which reports the error with its exact place
  (``input[3].arguments``).

The fields after the input (Codex's ``tools``, 9 kB of them when they are not in an
``additional_tools`` item, and ``client_metadata``) are the same in every request of a
Codex turn, the rounds of tool calls that answer one prompt (measured with Codex
0.171.0: a new prompt changes the turn id in ``client_metadata``). A history keeps them as a ``RequestShell``: the bytes from the ``]`` closing its
input array to the body's end, and the request that the head and those bytes validated
to. A body that starts with the history's bytes and ends with the shell's has the same
fields, so only its new items, the bytes between, are decoded and validated (as the
input of a request of its own); the request is the shell's, copied, with the known
items and the new ones. The bytes between decode as items in a ``[...]`` of their own
exactly when they are items continuing the known ones in the whole body, so that
needs no further check; a tail that could hold a second ``input`` key keeps no shell.

A body is looked for among the kept histories learned from bodies with the same
``prompt_cache_key`` (Codex sends its thread id there, the same with every turn), read
from the body's end: a hint that keeps the search short when many conversations are
kept, never a proof (the bytes are).

A parsed request carries a ``HistoryLink`` (``ResponsesRequest.history()``): the
history it continues and the one it makes for the next request, on which consumers keep
what they derive from the items (a translation's state, ``KnownHistory.derived``), so
that they too only do the new items' work. What is kept is bounded in entries and in
(estimated) bytes, and safe to share: it is a function of the bytes alone, whoever sent
them. Shared items are read-only, like the specs of ``_tool_cache``, and so are the
values of a continued request's other fields (its dicts are its shell's; its ``tools``
and ``input`` lists are its own).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from ._items import Item
    from ._request import ResponsesRequest

_PROBE_BYTES = 32
_HINT_KEY = b'"prompt_cache_key":"'
_HINT_WINDOW = 128 * 1024  # the body's last bytes searched for it (it follows the input)
_HINT_MAX = 256
WEIGHT_PER_BODY_BYTE = 10
"""A kept history's memory, estimated from its body's length: the body itself, the
typed items (measured at 4.5-5.8 times their JSON) and what consumers derive from them
(a Chat translation's state and its serialized messages: 2-4 times). The gateway's RSS
grew by 9.2 times the body per 800-turn Codex session kept (``bench.history``)."""


@dataclass(eq=False, slots=True)
class KnownHistory:
    """The input items of a body seen before, and where they end in its bytes.

    ``body[:head_end]`` is the body up to the ``[`` that opens its input array;
    ``body[:end]`` the same up to the end of its last input item (``end == head_end``
    when it had none). ``derived`` holds what consumers derived from ``items`` (a few
    entries, each a function of the items and of its key alone; read-only once kept).
    """

    body: bytes = field(repr=False)
    head_end: int
    end: int
    items: tuple[Item, ...] = field(repr=False)
    shell: RequestShell | None = field(default=None, repr=False)
    derived: dict[Hashable, Any] = field(default_factory=dict, repr=False)
    hint: bytes | None = field(init=False, repr=False)  # the body's prompt_cache_key
    _probe: bytes = field(init=False, repr=False)  # the last bytes of the items

    def __post_init__(self) -> None:
        self.hint = _hint(self.body)
        self._probe = self.body[max(self.head_end, self.end - _PROBE_BYTES) : self.end]

    @property
    def weight(self) -> int:
        return WEIGHT_PER_BODY_BYTE * len(self.body)  # the fields after the input too (``shell``)

    def starts(self, body: bytes) -> bool:
        """Whether ``body`` starts with this history's bytes (up to the end of its items)."""
        end = self.end
        return (
            len(body) > end
            and body.startswith(self._probe, end - len(self._probe))
            and body.startswith(memoryview(self.body)[: end - len(self._probe)])
        )


@dataclass(frozen=True, slots=True)
class RequestShell:
    """What a body holds besides its input items: ``tail``, the bytes its fields were read
    from (a body's from the ``]`` that closes the input array to the end; a WebSocket
    turn's, ``TurnFields``, its fields but its own as orjson writes them), and ``request``,
    what its fields validated to, with no input and no history (read-only: each request
    made from it is a copy)."""

    tail: bytes = field(repr=False)
    request: ResponsesRequest = field(repr=False)

    @classmethod
    def of(cls, body: bytes, close: int, request: ResponsesRequest) -> RequestShell | None:
        """The shell of ``body``, whose input array closes at ``close`` and which validated
        to ``request``; None when its tail could hold a second ``input`` key."""
        if _may_repeat_input(body, close + 1):
            return None
        return cls.of_request(body[close:], request)

    @classmethod
    def of_request(cls, tail: bytes, request: ResponsesRequest) -> RequestShell:
        """The shell of ``request``, whose fields were read from ``tail``."""
        shell = request.model_copy(update={"input": []})
        shell.link_history(None)  # a shell must not keep the histories it came from alive
        return cls(tail, shell)

    def filled(self, items: str | list[Item], **fields: Any) -> ResponsesRequest:
        """A request with the shell's fields, ``items`` as its input and ``fields`` set
        (its own lists)."""
        shell = self.request
        update: dict[str, Any] = {"input": items, **fields}
        if shell.tools is not None:
            update["tools"] = list(shell.tools)
        return shell.model_copy(update=update)


@dataclass(eq=False, slots=True)
class KnownItems:
    """Items known to begin a request's input, and what consumers derived from them, as a
    ``KnownHistory`` holds them, for items that did not come in a body: a conversation
    continued by ``previous_response_id``, read from the gateway's own keeping."""

    items: tuple[Item, ...] = field(repr=False)
    derived: dict[Hashable, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class HistoryLink:
    """How a parsed request's items relate to known histories.

    ``continues``: the history its first items are (None: no known one); ``own``: the
    history of all its items, kept for the next request (None when not kept); ``input``:
    the request's item list this holds for (a request given other items has no link).
    """

    continues: KnownHistory | KnownItems | None
    own: KnownHistory | KnownItems | None
    input: list[Item] = field(repr=False)

    @property
    def known(self) -> int:
        """How many of the request's first items are ``continues``' items."""
        return len(self.continues.items) if self.continues is not None else 0

    def dumped_input(self) -> list[dict[str, Any]]:
        """``input`` as ``dump_item`` gives each item. The items of a known body's history
        were parsed from its bytes and dump to exactly what they were parsed from: they are
        decoded from those bytes again, in about a third of the time."""
        known = self.continues
        if not isinstance(known, KnownHistory):
            return [item.dump() for item in self.input]
        items: list[dict[str, Any]] = orjson.loads(memoryview(known.body)[known.head_end - 1 : known.end + 1])
        items += (item.dump() for item in self.input[len(known.items) :])
        return items


class KnownHistories:
    """The histories of recent bodies, at most ``max_entries`` of estimated ``max_bytes``;
    the least recently used go first. Safe to share between threads."""

    def __init__(self, max_entries: int = 256, max_bytes: int = 128 * 1024 * 1024) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[int, KnownHistory] = OrderedDict()  # id -> history
        self._by_hint: dict[bytes | None, dict[int, KnownHistory]] = {}  # hint -> id -> history
        self._weight = 0
        self._lock = threading.Lock()
        self.continued = 0
        """Bodies parsed past a known history so far."""
        self.learned = 0
        """Histories learned from bodies parsed whole so far."""

    def configure(self, max_entries: int, max_bytes: int) -> None:
        """New bounds (``max_bytes`` 0: keep nothing), applied at once."""
        with self._lock:
            self.max_entries, self.max_bytes = max_entries, max_bytes
            self._evict()

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0 and self.max_entries > 0

    @property
    def weight(self) -> int:
        """The estimated bytes of the kept histories."""
        return self._weight

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._by_hint.clear()
            self._weight = 0

    # ------------------------------------------------------------ parsing

    def parse_continued(
        self, body: bytes, validate: Callable[[dict[str, Any]], ResponsesRequest]
    ) -> ResponsesRequest | None:
        """``body`` parsed past the longest known history it starts with; None when none
        fits or anything is unusual (the caller then parses the whole body).

        ``validate`` turns a decoded body into a request as the full path does (depth,
        tool lists, the model); its errors mean None here.
        """
        if not self.enabled:
            return None
        known = self._find(body)
        if known is None:
            return None
        after = body[known.end : known.end + 1]
        if after == b"]":
            start = known.end
        elif after == b"," and known.end > known.head_end:
            start = known.end + 1
        else:
            return None
        shell = known.shell
        if shell is not None and body.endswith(shell.tail) and len(body) - len(shell.tail) >= start:
            return self._continue_in_shell(body, known, shell, start, validate)
        try:
            data = orjson.loads(body[: known.head_end] + body[start:])
        except orjson.JSONDecodeError:
            return None
        new_items = data.get("input")
        if not isinstance(new_items, list) or (start > known.end and not new_items):
            return None
        close = _array_end(body, start, new_items)
        if close is None or _may_repeat_input(body, close + 1):
            return None
        try:
            request = validate(data)
        except Exception:  # the full path reports it, with its place in the whole body
            return None
        if not isinstance(request.input, list):
            return None
        items = [*known.items, *request.input]
        request.input = items
        own = None
        if new_items or known.shell is not None:  # new items, or new fields after them
            own = KnownHistory(body, known.head_end, close, tuple(items), RequestShell.of(body, close, request))
        return self._linked(request, items, known, own)

    def _continue_in_shell(
        self,
        body: bytes,
        known: KnownHistory,
        shell: RequestShell,
        start: int,
        validate: Callable[[dict[str, Any]], ResponsesRequest],
    ) -> ResponsesRequest | None:
        """``parse_continued`` for a body whose fields after the input are ``shell``'s:
        only the new items, from ``start`` to the shell's tail, are decoded."""
        close = len(body) - len(shell.tail)
        new_items: list[Item] = []
        if close > start or start > known.end:  # after a comma, at least one item must follow
            try:
                raw_items = orjson.loads(b"[" + body[start:close] + b"]")
                if not raw_items:
                    return None
                new_input = validate({"model": shell.request.model, "input": raw_items}).input
            except Exception:  # the full path reports it, with its place in the whole body
                return None
            if not isinstance(new_input, list):
                return None
            new_items = new_input
        items = [*known.items, *new_items]
        own = KnownHistory(body, known.head_end, close, tuple(items), shell) if new_items else None
        return self._linked(shell.filled(items), items, known, own)

    def _linked(
        self, request: ResponsesRequest, items: list[Item], known: KnownHistory, own: KnownHistory | None
    ) -> ResponsesRequest:
        """``request``, whose input is ``items`` and continues ``known``, linked to it and to
        ``own``, its own history, now kept (None: ``known`` is its own history too)."""
        if own is None:
            own = known
            self._touch(known)
        else:
            self._keep(own, replacing=known)
        request.link_history(HistoryLink(known, own, items))
        self.continued += 1
        return request

    def learn(self, body: bytes, data: dict[str, Any], request: ResponsesRequest) -> None:
        """Keep the history of ``body``, which decoded to ``data`` and validated to
        ``request`` on the full path, when its head and items are written as orjson
        writes them; the request then links to it.

        Not for a request that names its ``previous_response_id``: its input is only its
        new items, which the next request does not resend (it names this one's response
        instead), so its body is never the start of another. Kept, such bodies would each
        take a place of their own under the conversation's ``prompt_cache_key`` (a
        WebSocket's every turn), be looked through on every request with that key, and
        push out the histories of clients that resend them."""
        if not self.enabled or not isinstance(request.input, list) or request.previous_response_id is not None:
            return
        raw_items = data.get("input")
        if not isinstance(raw_items, list) or len(raw_items) != len(request.input):
            return
        head_end = _head_end(body, data)
        if head_end is None:
            return
        end = _array_end(body, head_end, raw_items)
        if end is None:
            return
        own = KnownHistory(body, head_end, end, tuple(request.input), RequestShell.of(body, end, request))
        self._keep(own, replacing=None)
        request.link_history(HistoryLink(None, own, request.input))
        self.learned += 1

    # ------------------------------------------------------------ the entries

    def _find(self, body: bytes) -> KnownHistory | None:
        hint = _hint(body)
        with self._lock:
            candidates = list(self._by_hint.get(hint, {}).values())
        best: KnownHistory | None = None
        for known in candidates:
            if (best is None or known.end > best.end) and known.starts(body):
                best = known
        return best

    def _keep(self, history: KnownHistory, *, replacing: KnownHistory | None) -> None:
        """Keep ``history``; it supersedes ``replacing``, the history it continues."""
        if history.weight > self.max_bytes:
            return
        with self._lock:
            if replacing is not None and id(replacing) in self._entries:
                self._drop(replacing)
            self._entries[id(history)] = history
            self._by_hint.setdefault(history.hint, {})[id(history)] = history
            self._weight += history.weight
            self._evict()

    def _touch(self, history: KnownHistory) -> None:
        with self._lock:
            if id(history) in self._entries:
                self._entries.move_to_end(id(history))

    def _evict(self) -> None:
        while self._entries and (len(self._entries) > self.max_entries or self._weight > self.max_bytes):
            self._drop(next(iter(self._entries.values())))

    def _drop(self, history: KnownHistory) -> None:
        del self._entries[id(history)]
        same_hint = self._by_hint[history.hint]
        del same_hint[id(history)]
        if not same_hint:
            del self._by_hint[history.hint]
        self._weight -= history.weight


def _hint(body: bytes) -> bytes | None:
    """The body's ``prompt_cache_key``, as written, if it is among its last bytes."""
    at = body.rfind(_HINT_KEY, max(0, len(body) - _HINT_WINDOW))
    if at < 0:
        return None
    start = at + len(_HINT_KEY)
    end = body.find(b'"', start, start + _HINT_MAX)
    return body[start:end] if end >= 0 else None


def _head_end(body: bytes, data: dict[str, Any]) -> int | None:
    """Where the input array's items begin in ``body`` (just past its ``[``), if the fields
    before ``input`` are written there as orjson writes them; else None."""
    head: dict[str, Any] = {}
    for key, value in data.items():  # in the order of first appearance in the body
        if key == "input":
            break
        head[key] = value
    try:
        written = orjson.dumps(head)[:-1] + (b',"input":[' if head else b'"input":[')
    except orjson.JSONEncodeError:
        return None
    return len(written) if body.startswith(written) else None


def _array_end(body: bytes, start: int, items: list[Any]) -> int | None:
    """Where the ``]`` closing an array whose items begin at ``start`` is, if ``items`` are
    written there as orjson writes them; else None."""
    try:
        written = orjson.dumps(items)
    except orjson.JSONEncodeError:
        return None
    close = start + len(written) - 2
    if body[close : close + 1] != b"]" or not body.startswith(memoryview(written)[1:-1], start):
        return None
    return close


def _may_repeat_input(body: bytes, start: int) -> bool:
    """Whether the body's fields after its input array (from ``start``, at the ``,`` or
    ``}`` that follows it) could hold a second ``input`` key, which would replace the array.

    A JSON string equal to ``input`` is written ``"input"`` or with ``\\u`` escapes: when
    neither occurs, no such key can; when one does, the fields are decoded to be sure.
    """
    if body.find(b'"input"', start) == -1 and body.find(b"\\u", start) == -1:
        return False
    if body[start : start + 1] != b",":
        return body[start : start + 1] != b"}"
    try:
        rest = orjson.loads(b"{" + body[start + 1 :])
    except orjson.JSONDecodeError:
        return True
    return not isinstance(rest, dict) or "input" in rest


KNOWN_HISTORIES = KnownHistories()
"""The histories of recent request bodies (``parse_request``)."""
