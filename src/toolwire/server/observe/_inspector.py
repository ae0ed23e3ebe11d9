"""The web inspector at ``/ui``: recent exchanges, and one exchange's four sides.

``RecentExchanges`` is an observer that keeps the last exchanges in memory, bounded in
count and in bytes, each as its record (``_record``), already serialized: the kept bytes
are exactly what is counted. Records are redacted on the way out. Exchanges in progress
are listed too (outcome ``pending``). ``inspector_routes`` serves the page
(plain HTML, CSS and JavaScript from ``ui/``, no build step) and its JSON API:

``GET /ui/api/exchanges[?limit=N]``
    ``{"object": "list", "data": [summary, ...], "kept": {...}}``, newest first, where a
    summary is the log line's object (``_record.summarize``) plus ``time`` and ``usage``.
``GET /ui/api/exchanges/{request_id}``
    the full record, or 404 once it has left the ring.

In a worker of ``--workers N`` both ask the other workers too (``siblings``): the list
holds every worker's exchanges (``kept`` adds up their rings), and a record is found
in whichever worker keeps it.

The API shows prompts and tool outputs, so it is guarded: with static client keys or
admin keys it wants ``Authorization: Bearer <key>`` with one of them (the page asks for
the key once per tab); keys of the key store do not open it, since it shows every key's
traffic. A gateway whose store holds keys but that has neither static nor admin keys
answers 401; one without keys of any kind answers loopback clients only. The page's Content-Security-Policy
allows no inline script and the script writes text only as text, never as markup:
exchanges carry model output, which must not run in the inspector.
"""

from __future__ import annotations

import hmac
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from toolwire.config import DEFAULT_INSPECTOR_MAX_BYTES, DEFAULT_INSPECTOR_MAX_EXCHANGES

from .._auth import is_loopback
from .._exchange import Exchange
from .._siblings import Siblings
from ._gathered import merged_summaries
from ._record import RecordEncoder, summary_with_time, traffic_omitted
from ._redact import Redactor

log = logging.getLogger("toolwire.server")

_KEPT = ("exchanges", "bytes", "max_exchanges", "max_bytes")
_MAX_SIBLING_LISTING_BYTES = 64 * 1024 * 1024
"""The most another worker's list of exchanges may take (its summaries, never traffic)."""
_RECORD_SLACK_BYTES = 1024 * 1024
"""Beyond ``max_record_bytes``, what another worker's record may take (its redaction and summary)."""
_ENTRY_OVERHEAD = 512  # the summary and bookkeeping of a kept exchange, roughly

_PAGE_HEADERS = {
    "cache-control": "no-cache",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
}
_API_HEADERS = {"cache-control": "no-store", "x-content-type-options": "nosniff"}
_ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "inspector.css": "text/css; charset=utf-8",
    "inspector.js": "text/javascript; charset=utf-8",
}


@dataclass(frozen=True, slots=True)
class _Kept:
    summary: dict[str, Any]
    record: bytes  # plain: redacted when shown

    @property
    def size(self) -> int:
        return len(self.record) + _ENTRY_OVERHEAD


class RecentExchanges:
    """The last ``max_exchanges`` exchanges, at most ``max_bytes`` of records.

    Records are kept as serialized and redacted when shown (``record``), so that the
    inspector, on by default, costs a request one ``orjson.dumps`` of its traffic and no
    more; the summaries listed are redacted when kept. A record larger than
    ``max_record_bytes`` (a quarter of ``max_bytes`` by default) is kept without its
    traffic, so one huge request cannot empty the ring.
    """

    wants_traffic = True

    def __init__(
        self,
        *,
        max_exchanges: int = DEFAULT_INSPECTOR_MAX_EXCHANGES,
        max_bytes: int = DEFAULT_INSPECTOR_MAX_BYTES,
        max_record_bytes: int | None = None,
        encoder: RecordEncoder | None = None,
    ) -> None:
        if max_exchanges < 1 or max_bytes <= 0:
            raise ValueError("max_exchanges must be at least 1 and max_bytes positive")
        self.max_exchanges = max_exchanges
        self.max_bytes = max_bytes
        self.max_record_bytes = max_record_bytes if max_record_bytes is not None else max_bytes // 4
        self.encoder = encoder if encoder is not None else RecordEncoder(Redactor())
        self._running: dict[str, Exchange] = {}
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._bytes = 0

    @property
    def kept_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._kept)

    def started(self, exchange: Exchange) -> None:
        self._running[exchange.request_id] = exchange

    def finished(self, exchange: Exchange) -> None:
        self._running.pop(exchange.request_id, None)
        summary = summary_with_time(exchange, self.encoder.redactor)
        record = self.encoder.plain(exchange)
        if len(record) > self.max_record_bytes:
            reason = f"the record ({len(record)} bytes) is larger than the inspector keeps ({self.max_record_bytes})"
            record = traffic_omitted(summary, self.encoder.redactor, reason)
        kept = _Kept(summary, record)
        self._kept[exchange.request_id] = kept
        self._bytes += kept.size
        while len(self._kept) > self.max_exchanges or (self._bytes > self.max_bytes and len(self._kept) > 1):
            _, evicted = self._kept.popitem(last=False)
            self._bytes -= evicted.size

    def summaries(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Exchanges in progress, then kept ones, newest first."""
        running = [summary_with_time(e, self.encoder.redactor) for e in reversed(self._running.values())]
        kept = [entry.summary for entry in reversed(self._kept.values())]
        everything = running + kept
        return everything if limit is None else everything[: max(0, limit)]

    def record(self, request_id: str) -> bytes | None:
        """The redacted record of a kept exchange (its summary, if it is in progress)."""
        redactor = self.encoder.redactor
        kept = self._kept.get(request_id)
        if kept is not None:
            redacted = self.encoder.redact(kept.record)
            return redacted if redacted is not None else traffic_omitted(kept.summary, redactor, "not redactable")
        running = self._running.get(request_id)
        if running is not None:
            return traffic_omitted(summary_with_time(running), redactor, "the exchange is still in progress")
        return None


def inspector_routes(
    recent: RecentExchanges,
    client_keys: Sequence[bytes] = (),
    requires_key: Callable[[], Awaitable[bool]] | None = None,
    *,
    siblings: Siblings | None = None,
) -> list[BaseRoute]:
    """``/ui`` (the page and its assets) and ``/ui/api/...`` over ``recent`` and, when
    given, the ``siblings``' own; ``client_keys`` open the API, and ``requires_key``
    (``KeyGate.requires_key``) says whether the gateway has keys at all, and then only they do."""
    keys = tuple(client_keys)
    if siblings is not None:
        siblings.answer("exchanges", lambda argument: orjson.dumps(_listing(recent, _limit(argument))))
        siblings.answer("exchange", recent.record)
    ui = resources.files("toolwire.server.observe") / "ui"
    assets = {name: (ui / name).read_bytes() for name in _ASSETS}

    def asset(name: str) -> Route:
        async def serve(request: Request) -> Response:
            return Response(assets[name], media_type=_ASSETS[name], headers=_PAGE_HEADERS)

        return Route("/ui/" if name == "index.html" else f"/ui/{name}", serve, methods=["GET"])

    async def to_page(request: Request) -> Response:
        return RedirectResponse("/ui/")

    async def exchanges(request: Request) -> Response:
        refused = await _refusal(request, keys, requires_key)
        if refused is not None:
            return refused
        try:
            limit = int(request.query_params.get("limit", "")) if "limit" in request.query_params else None
        except ValueError:
            return _json({"error": {"message": "limit must be an integer", "code": "invalid_limit"}}, 400)
        listing = _listing(recent, limit)
        if siblings is not None:
            argument = "" if limit is None else str(limit)
            answers = await siblings.ask("exchanges", argument, max_bytes=_MAX_SIBLING_LISTING_BYTES)
            listing = _together([listing, *_listings(answers)], limit)
        return _json({"object": "list", **listing})

    async def exchange(request: Request) -> Response:
        refused = await _refusal(request, keys, requires_key)
        if refused is not None:
            return refused
        request_id = request.path_params["request_id"]
        record = recent.record(request_id)
        if record is None and siblings is not None and request_id.isprintable():  # (no line end to ask with)
            bound = recent.max_record_bytes + _RECORD_SLACK_BYTES
            answers = await siblings.ask("exchange", request_id, max_bytes=bound)
            record = answers[0][1] if answers else None
        if record is None:
            message = f"No exchange {request_id} is kept (the inspector keeps the last {recent.max_exchanges})."
            return _json({"error": {"message": message, "code": "not_found"}}, 404)
        return Response(record, media_type="application/json", headers=_API_HEADERS)

    return [
        Route("/ui", to_page, methods=["GET"]),
        *(asset(name) for name in _ASSETS),
        Route("/ui/api/exchanges", exchanges, methods=["GET"]),
        Route("/ui/api/exchanges/{request_id}", exchange, methods=["GET"]),
    ]


def _limit(argument: str) -> int | None:
    try:
        return int(argument)
    except ValueError:
        return None  # (no limit was asked for)


def _listing(recent: RecentExchanges, limit: int | None) -> dict[str, Any]:
    """What ``GET /ui/api/exchanges`` says of one worker's exchanges, but its ``object``."""
    kept = {"exchanges": len(recent), "bytes": recent.kept_bytes, "max_exchanges": recent.max_exchanges,
            "max_bytes": recent.max_bytes}  # fmt: skip
    return {"data": recent.summaries(limit), "kept": kept}


def _listings(answers: list[tuple[str, bytes]]) -> Iterator[dict[str, Any]]:
    """The other workers' listings that can be read (a worker of another version may say otherwise)."""
    for worker, answer in answers:
        try:
            listing = orjson.loads(answer)
        except orjson.JSONDecodeError:
            listing = None
        if _readable(listing):
            yield listing
        else:
            log.warning("worker %s answered with a list of exchanges that cannot be read; left out", worker)


def _readable(listing: Any) -> bool:
    if type(listing) is not dict or type(listing.get("data")) is not list or type(listing.get("kept")) is not dict:
        return False
    kept = listing["kept"]
    return all(type(summary) is dict for summary in listing["data"]) and all(type(kept.get(n)) is int for n in _KEPT)


def _together(listings: list[dict[str, Any]], limit: int | None) -> dict[str, Any]:
    """Several workers' listings as one: their summaries merged, their rings added up."""
    kept = {name: sum(listing["kept"][name] for listing in listings) for name in _KEPT}
    return {"data": merged_summaries([listing["data"] for listing in listings], limit), "kept": kept}


async def _refusal(
    request: Request, keys: tuple[bytes, ...], requires_key: Callable[[], Awaitable[bool]] | None
) -> Response | None:
    """None if ``request`` may read exchanges; else the 401 or 403 to answer."""
    if keys:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        presented = token.strip().encode() if scheme.lower() == "bearer" else b""
        matched = False
        for key in keys:  # every key, in constant time, like ClientAuth
            matched |= hmac.compare_digest(presented, key)
        if matched and presented:
            return None
        body = {"error": {"message": "Send 'Authorization: Bearer <key>' with a client key.", "code": "invalid_api_key"}}
        return _json(body, 401, {"www-authenticate": "Bearer"})
    if requires_key is not None and await requires_key():
        message = (
            "This gateway has client keys, which do not open the inspector (it shows every key's traffic): "
            "start it with --admin-key-env VAR and send 'Authorization: Bearer <admin key>'."
        )
        return _json({"error": {"message": message, "code": "invalid_api_key"}}, 401, {"www-authenticate": "Bearer"})
    client = request.client
    if client is not None and is_loopback(client.host):
        return None
    message = "The inspector answers only loopback clients when the gateway has no client keys (--api-key-env)."
    return _json({"error": {"message": message, "code": "forbidden"}}, 403)


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status, {**_API_HEADERS, **(headers or {})}, "application/json")
