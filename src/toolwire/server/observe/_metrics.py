"""``MetricsObserver``: Prometheus metrics of every exchange, and the ``GET /metrics`` route.

Each observer owns its ``CollectorRegistry`` (never the process-global one), so two apps
in one process, as in tests, count separately. The metrics, all prefixed ``toolwire_``:

==========================================  =========  ====================================
``requests_total``                          counter    model, upstream, status, outcome
``request_duration_seconds``                histogram  model, upstream
``time_to_first_token_seconds``             histogram  model, upstream (streams only)
``upstream_errors_total``                   counter    upstream, kind
``tokens_total``                            counter    model, upstream, kind (input,
                                                       output, reasoning, cached_input)
``tool_calls_total``                        counter    upstream, type, tool
``conversions_total``                       counter    upstream, conversion
``open_streams``                            gauge      (streaming requests in progress)
``requests_in_progress``                    gauge
``key_requests_total``                      counter    key, model, status
``key_tokens_total``                        counter    key, model, kind (input, output,
                                                       reasoning, cached_input)
``limits_tripped_total``                    counter    limit (the setting: ``max_streams``,
                                                       ``client_header_timeout``,
                                                       ``ws_max_message_bytes``, ...)
``client_connections``                      gauge      state (open, waiting for a request)
``history_cache_entries``                   gauge      conversation histories kept
``history_cache_bytes``                     gauge      their estimated memory
``history_continued_total``                 counter    bodies parsed past a kept history
``history_learned_total``                   counter    histories learned from whole bodies
``stored_conversations_entries``            gauge      conversations of stored responses kept
                                                       parsed (``previous_response_id``)
``stored_conversations_bytes``              gauge      their estimated memory
``stored_conversations_continued_total``    counter    continuations that found theirs kept
``stored_conversations_read_total``         counter    continuations that read the store's
``stored_conversations_caught_up_total``    counter    continuations that found theirs kept a
                                                       few responses before (another gateway
                                                       answered those), and read only those
``store_bytes``                             gauge      the response store's records, as of
                                                       this process's last write to it
``store_max_bytes``                         gauge      their bound (``--store-max-bytes``)
==========================================  =========  ====================================

The ``key_*`` metrics count the requests of callers with a client key, by the key's
*name* (static ``--api-key-env`` keys are ``static``); the key itself is never a label.

plus the standard ``process_*``, ``python_gc_*`` and ``python_info`` metrics.

Label values that clients choose (model and tool names, and conversion labels, which
carry tool names) are bounded: the first ``max_label_values`` distinct values of each
label are kept, later ones count as ``"other"``. Upstream error kinds are ``protocol``
(the upstream sent bytes we cannot read), ``status_<n>`` (the upstream failed before
streaming and the client got status n: 429 and 5xx from the upstream itself, 502 when it
could not be reached, 504 when it was too slow) and ``stream_<code>`` (a failure after
streaming began: ``stream_server_error``, ``stream_context_length_exceeded``) and
``too_large`` (a non-streamed answer larger than ``upstream_max_body_bytes``; a stream cut
at a limit counts as ``stream_server_error``, and every trip in ``limits_tripped_total``).
``limits_tripped_total``
and ``client_connections`` are the process's (``_limits``, ``_connections``), counted
below any app: they are the same in every app of one process.

With ``--workers N`` every worker has its own registry, and the worker a scrape reaches
asks the others for theirs (``siblings``): the answer holds every worker's series, each
labelled with its worker (``worker="0"``..), and ``toolwire_worker_answered`` says which
workers answered (one that is starting again after a crash may not). Sum over the label
for the gateway's totals, e.g. ``sum without (worker) (rate(toolwire_requests_total[5m]))``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TypeVar, cast

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.protocol import KNOWN_HISTORIES, KnownHistories
from toolwire.store import ResponseStore

from .._connections import CONNECTIONS_COLLECTOR
from .._exchange import Exchange
from .._history import KnownConversations
from .._limits import LIMITS_TRIPPED
from .._siblings import Siblings
from ._gathered import families_from_json, families_to_json, merged_families

log = logging.getLogger("toolwire.server")

OTHER = "other"
MAX_LABEL_LENGTH = 120

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
_TTFT_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0)
_UPSTREAM_ERROR_CLASSES = {"UpstreamError": None, "UpstreamProtocolError": "protocol", "UpstreamLimitError": "too_large"}


class BoundedLabel:
    """The first ``limit`` distinct values pass; later ones become ``"other"``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: set[str] = set()

    def __call__(self, value: str | None) -> str:
        if value is None:
            return ""
        if value in self._seen:
            return value
        if len(value) > MAX_LABEL_LENGTH or len(self._seen) >= self.limit:
            return OTHER
        self._seen.add(value)
        return value


_Metric = TypeVar("_Metric", Counter, Histogram)


def upstream_error_kind(exchange: Exchange) -> str | None:
    """The upstream-error kind of a finished exchange (see the module docstring), or None."""
    if exchange.error_kind in _UPSTREAM_ERROR_CLASSES:
        return _UPSTREAM_ERROR_CLASSES[exchange.error_kind] or f"status_{exchange.status}"
    if exchange.outcome == "failed":
        return f"stream_{exchange.error_kind or 'unknown'}"
    return None


class MetricsObserver:
    """Counts every exchange into its own registry; ``route`` serves it at ``/metrics``."""

    wants_traffic = False

    def __init__(
        self,
        *,
        max_label_values: int = 100,
        registry: CollectorRegistry | None = None,
        conversations: KnownConversations | None = None,
        store: ResponseStore | None = None,
        siblings: Siblings | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._siblings = siblings
        if siblings is not None:
            siblings.answer("metrics", lambda argument: families_to_json(self.registry.collect()))
        self._model = BoundedLabel(max_label_values)
        self._tool = BoundedLabel(max_label_values)
        self._conversion = BoundedLabel(max_label_values)
        self._error_kind = BoundedLabel(max_label_values)
        self._key = BoundedLabel(max_label_values)
        self._in_progress: dict[str, Exchange] = {}
        self._tallies: dict[tuple[object, ...], _Tally] = {}
        r = self.registry
        r.register(_Flush(self.flush))  # first: every collection of the registry counts what is pending
        self.requests = Counter(
            "toolwire_requests", "Requests to /v1/responses by how they ended.",
            ["model", "upstream", "status", "outcome"], registry=r,
        )
        self.duration = Histogram(
            "toolwire_request_duration_seconds", "From the request body read to the last byte sent.",
            ["model", "upstream"], buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.time_to_first_token = Histogram(
            "toolwire_time_to_first_token_seconds", "Of streaming requests: until the upstream's first chunk.",
            ["model", "upstream"], buckets=_TTFT_BUCKETS, registry=r,
        )
        self.upstream_errors = Counter(
            "toolwire_upstream_errors", "Requests that failed because of the upstream, by kind.",
            ["upstream", "kind"], registry=r,
        )
        self.tokens = Counter(
            "toolwire_tokens", "Tokens the upstream reported.", ["model", "upstream", "kind"], registry=r,
        )
        self.tool_calls = Counter(
            "toolwire_tool_calls", "Tool calls sent to clients, by item type and tool.",
            ["upstream", "type", "tool"], registry=r,
        )
        self.conversions = Counter(
            "toolwire_conversions", "Conversions applied to requests and streams.",
            ["upstream", "conversion"], registry=r,
        )
        self.key_requests = Counter(
            "toolwire_key_requests", "Requests to /v1/responses by client key name.",
            ["key", "model", "status"], registry=r,
        )
        self.key_tokens = Counter(
            "toolwire_key_tokens", "Tokens the upstream reported, by client key name.",
            ["key", "model", "kind"], registry=r,
        )
        self._children: dict[tuple[object, ...], Counter | Histogram] = {}
        r.register(_InProgressCollector(self._in_progress))
        r.register(LIMITS_TRIPPED)
        r.register(CONNECTIONS_COLLECTOR)
        r.register(_HistoryCollector(KNOWN_HISTORIES, conversations if conversations is not None else KnownConversations()))
        if store is not None:
            r.register(_StoreCollector(store))
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)

    def started(self, exchange: Exchange) -> None:
        self._in_progress[exchange.request_id] = exchange

    def finished(self, exchange: Exchange) -> None:
        """Count ``exchange``. Exchanges alike (the same labels everywhere) share a ``_Tally``,
        which counts them until the next collection of the registry (``flush``): one
        exchange costs a few additions, not a dozen label look-ups and locked increments."""
        self._in_progress.pop(exchange.request_id, None)
        alike = (
            exchange.model, exchange.upstream, exchange.status, exchange.outcome, exchange.error_kind,
            exchange.key_name, tuple(exchange.tool_calls), tuple(exchange.conversions),
        )
        tally = self._tallies.get(alike)
        if tally is None:
            if len(self._tallies) >= _MAX_TALLIES:
                self.flush()
                self._tallies.clear()
            tally = self._tallies[alike] = self._tally(exchange)
        tally.exchanges += 1
        if exchange.latency is not None:
            tally.duration.observe(exchange.latency)
        if exchange.stream and exchange.time_to_first_token is not None:
            tally.time_to_first_token.observe(exchange.time_to_first_token)
        if exchange.usage:
            tokens = tally.tokens
            for token_kind, count in _token_counts(exchange.usage):
                tokens[token_kind] = tokens.get(token_kind, 0) + count

    def flush(self) -> None:
        """Add what the tallies counted since the last flush to the registry's metrics."""
        for tally in self._tallies.values():
            if tally.exchanges:
                for counter in tally.counters:
                    counter.inc(tally.exchanges)
                tally.exchanges = 0
            if tally.tokens:
                for token_kind, count in tally.tokens.items():
                    for counter in tally.token_counters(token_kind):
                        counter.inc(count)
                tally.tokens.clear()

    def _tally(self, exchange: Exchange) -> _Tally:
        """The metrics an exchange like ``exchange`` counts in, its labels bounded now."""
        model, upstream = self._model(exchange.model), exchange.upstream or ""
        labelled = self._labelled
        counters = [labelled(self.requests, model, upstream, str(exchange.status), exchange.outcome)]
        kind = upstream_error_kind(exchange)
        if kind is not None:
            counters.append(labelled(self.upstream_errors, upstream, self._error_kind(kind)))
        key = None
        if exchange.key_name is not None:
            key = self._key(exchange.key_name)
            counters.append(labelled(self.key_requests, key, model, str(exchange.status)))
        for call in exchange.tool_calls:
            tool = call.name if call.namespace is None else f"{call.namespace}.{call.name}"
            counters.append(labelled(self.tool_calls, upstream, call.type, self._tool(tool)))
        for conversion in exchange.conversions:
            counters.append(labelled(self.conversions, upstream, self._conversion(conversion)))

        def token_counters(token_kind: str) -> list[Counter]:
            found = [labelled(self.tokens, model, upstream, token_kind)]
            if key is not None:
                found.append(labelled(self.key_tokens, key, model, token_kind))
            return found

        return _Tally(
            counters, token_counters,
            labelled(self.duration, model, upstream), labelled(self.time_to_first_token, model, upstream),
        )  # fmt: skip

    def _labelled(self, metric: _Metric, *values: str) -> _Metric:
        """``metric.labels(*values)``, looked up in a dict: ``labels`` validates the values
        and takes a lock every time. The values are bounded (``BoundedLabel``, configured
        upstream names, HTTP statuses), and so is the dict."""
        key = (metric, *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return cast("_Metric", child)

    @property
    def route(self) -> Route:
        """``GET /metrics``: the text format, or OpenMetrics when the scraper asks for it."""

        async def metrics(request: Request) -> Response:
            encoder, content_type = choose_encoder(request.headers.get("accept", ""))
            registry = self.registry if self._siblings is None else await self._every_worker()
            return Response(encoder(registry), headers={"content-type": content_type})

        return Route("/metrics", metrics, methods=["GET"])

    async def _every_worker(self) -> CollectorRegistry:
        """This worker's metrics and its siblings', labelled by worker, as one registry."""
        siblings = self._siblings
        assert siblings is not None
        by_worker = [(siblings.name, list(self.registry.collect()))]
        for worker, answer in await siblings.ask("metrics", max_bytes=MAX_SIBLING_METRICS_BYTES):
            try:
                by_worker.append((worker, families_from_json(answer)))
            except ValueError as exc:
                log.warning("worker %s answered with metrics that cannot be read (%s); left out", worker, exc)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families(merged_families(by_worker, siblings.names)))
        return registry


MAX_SIBLING_METRICS_BYTES = 16 * 1024 * 1024
"""The most one other worker's metrics may take (as JSON): their label values are bounded."""
_MAX_TALLIES = 1024
"""Kinds of exchange tallied at once; one more adds every tally to the metrics and starts again."""


class _Tally:
    """Exchanges alike, counted since the last flush: ``exchanges`` adds to each of the
    ``counters``, ``tokens`` (by kind) to each of ``token_counters(kind)``; their latencies
    go to the histograms at once."""

    __slots__ = ("counters", "duration", "exchanges", "time_to_first_token", "token_counters", "tokens")

    def __init__(
        self,
        counters: list[Counter],
        token_counters: Callable[[str], list[Counter]],
        duration: Histogram,
        time_to_first_token: Histogram,
    ) -> None:
        self.counters = counters
        self.token_counters = token_counters
        self.duration = duration
        self.time_to_first_token = time_to_first_token
        self.exchanges = 0
        self.tokens: dict[str, int] = {}


class _Families(Collector):
    """Families collected already (the workers' metrics put together)."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


class _Flush(Collector):
    """Collected first in an observer's registry: it adds what is tallied to the metrics,
    and yields nothing itself."""

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        self._flush()
        return iter(())


def _token_counts(usage: dict[str, object]) -> Iterator[tuple[str, int]]:
    input_details = usage.get("input_tokens_details")
    output_details = usage.get("output_tokens_details")
    counts = {
        "input": usage.get("input_tokens"),
        "output": usage.get("output_tokens"),
        "cached_input": input_details.get("cached_tokens") if isinstance(input_details, dict) else None,
        "reasoning": output_details.get("reasoning_tokens") if isinstance(output_details, dict) else None,
    }
    for kind, count in counts.items():
        if isinstance(count, int) and count > 0:
            yield kind, count


class _InProgressCollector(Collector):
    """``open_streams`` and ``requests_in_progress``, counted when scraped.

    An exchange's ``stream`` is known only once its request is parsed, after
    ``started``; counting at scrape time reads it when it is known.
    """

    _OPEN_STREAMS = ("toolwire_open_streams", "Streaming responses in progress.")
    _IN_PROGRESS = ("toolwire_requests_in_progress", "Requests to /v1/responses in progress.")

    def __init__(self, in_progress: dict[str, Exchange]) -> None:
        self._in_progress = in_progress

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(*self._OPEN_STREAMS)
        yield GaugeMetricFamily(*self._IN_PROGRESS)

    def collect(self) -> Iterator[Metric]:
        exchanges = list(self._in_progress.values())
        yield GaugeMetricFamily(*self._OPEN_STREAMS, value=sum(e.stream for e in exchanges))
        yield GaugeMetricFamily(*self._IN_PROGRESS, value=len(exchanges))


class _HistoryCollector(Collector):
    """The kept conversation histories (``toolwire.protocol.KNOWN_HISTORIES``) and the kept
    conversations of stored responses (the gateway's ``KnownConversations``), when scraped."""

    _ENTRIES = ("toolwire_history_cache_entries", "Conversation histories kept.")
    _BYTES = ("toolwire_history_cache_bytes", "The estimated memory of the kept conversation histories.")
    _CONTINUED = ("toolwire_history_continued", "Request bodies parsed past a kept history.")
    _LEARNED = ("toolwire_history_learned", "Histories learned from request bodies parsed whole.")
    _STORED_ENTRIES = ("toolwire_stored_conversations_entries", "Conversations of stored responses kept parsed.")
    _STORED_BYTES = ("toolwire_stored_conversations_bytes", "The estimated memory of the kept stored conversations.")
    _STORED_CONTINUED = (
        "toolwire_stored_conversations_continued", "Continuations (previous_response_id) that found theirs kept.",
    )
    _STORED_READ = (
        "toolwire_stored_conversations_read", "Continuations (previous_response_id) that read theirs from the store.",
    )
    _STORED_CAUGHT_UP = (
        "toolwire_stored_conversations_caught_up",
        "Continuations (previous_response_id) that found theirs kept a few responses before, and read only those.",
    )

    def __init__(self, histories: KnownHistories, conversations: KnownConversations) -> None:
        self._histories = histories
        self._conversations = conversations

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(*self._ENTRIES)
        yield GaugeMetricFamily(*self._BYTES)
        yield CounterMetricFamily(*self._CONTINUED)
        yield CounterMetricFamily(*self._LEARNED)
        yield GaugeMetricFamily(*self._STORED_ENTRIES)
        yield GaugeMetricFamily(*self._STORED_BYTES)
        yield CounterMetricFamily(*self._STORED_CONTINUED)
        yield CounterMetricFamily(*self._STORED_READ)
        yield CounterMetricFamily(*self._STORED_CAUGHT_UP)

    def collect(self) -> Iterator[Metric]:
        histories = self._histories
        yield GaugeMetricFamily(*self._ENTRIES, value=len(histories))
        yield GaugeMetricFamily(*self._BYTES, value=histories.weight)
        yield CounterMetricFamily(*self._CONTINUED, value=histories.continued)
        yield CounterMetricFamily(*self._LEARNED, value=histories.learned)
        conversations = self._conversations
        yield GaugeMetricFamily(*self._STORED_ENTRIES, value=len(conversations))
        yield GaugeMetricFamily(*self._STORED_BYTES, value=conversations.weight)
        yield CounterMetricFamily(*self._STORED_CONTINUED, value=conversations.continued)
        yield CounterMetricFamily(*self._STORED_READ, value=conversations.read)
        yield CounterMetricFamily(*self._STORED_CAUGHT_UP, value=conversations.caught_up)


class _StoreCollector(Collector):
    """The response store's bytes, as this process last saw them (``bytes_seen``: reading
    a shared store at each scrape would be I/O), and their bound."""

    _BYTES = ("toolwire_store_bytes", "The bytes of the stored responses' records, as of this process's last write.")
    _MAX_BYTES = ("toolwire_store_max_bytes", "The most bytes of records the response store keeps (0: no bound).")

    def __init__(self, store: ResponseStore) -> None:
        self._store = store

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(*self._BYTES)
        yield GaugeMetricFamily(*self._MAX_BYTES)

    def collect(self) -> Iterator[Metric]:
        seen = self._store.bytes_seen
        if seen is not None:
            yield GaugeMetricFamily(*self._BYTES, value=seen)
        yield GaugeMetricFamily(*self._MAX_BYTES, value=self._store.max_bytes or 0)
