"""``MetricsObserver`` and ``GET /metrics``: what is counted, with which bounded labels."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from tests.support.chat_upstream import Call, ChatUpstream, HttpError, StreamError, Text, ToolCalls
from tests.support.observed import (
    CUSTOM_PATCH_TOOL,
    PATCH,
    exchange,
    observed_client,
    observed_config,
)
from toolwire.protocol import KNOWN_HISTORIES, parse_request
from toolwire.server._exchange import Exchange
from toolwire.server.observe import _metrics as metrics_module
from toolwire.server.observe._metrics import (
    OTHER,
    BoundedLabel,
    MetricsObserver,
    upstream_error_kind,
)
from toolwire.store import MemoryResponseStore, StoredResponse


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """``{(sample name, labels): value}`` of an exposition."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


def label_values(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, label: str) -> set[str]:
    return {dict(labels)[label] for sample, labels in found if sample == name}


def scrape(observer: MetricsObserver) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    from prometheus_client import generate_latest

    return samples(generate_latest(observer.registry).decode())


def test_a_gateway_serves_its_requests_as_prometheus_metrics(upstream: ChatUpstream) -> None:
    upstream.enqueue(ToolCalls([Call("apply_patch", orjson.dumps({"input": PATCH}).decode())]))
    upstream.enqueue(Text("Hello."))
    upstream.enqueue(HttpError(503, {"error": {"message": "overloaded", "type": "server_error"}}))
    with observed_client(observed_config(upstream.base_url, upstream_retries=1)) as (client, _):
        streamed = client.post(
            "/v1/responses", json={"model": "qwen3", "input": "patch", "stream": True, "tools": [CUSTOM_PATCH_TOOL]}
        )
        assert streamed.status_code == 200
        assert client.post("/v1/responses", json={"model": "qwen3", "input": "hi"}).status_code == 200
        assert client.post("/v1/responses", json={"model": "qwen3", "input": "hi"}).status_code == 503
        assert client.post("/v1/responses", content=b"{not json").status_code == 400
        response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    found = samples(response.text)

    assert value(found, "toolwire_requests_total", model="qwen3", upstream="local", status="200", outcome="completed") == 2
    assert value(found, "toolwire_requests_total", model="qwen3", upstream="local", status="503", outcome="error") == 1
    assert value(found, "toolwire_requests_total", model="", upstream="", status="400", outcome="error") == 1
    assert value(found, "toolwire_upstream_errors_total", upstream="local", kind="status_503") == 1
    assert label_values(found, "toolwire_upstream_errors_total", "kind") == {"status_503"}  # the 400 is the client's
    assert value(found, "toolwire_request_duration_seconds_count", model="qwen3", upstream="local") == 3
    assert value(found, "toolwire_time_to_first_token_seconds_count", model="qwen3", upstream="local") == 1
    assert value(found, "toolwire_tool_calls_total", upstream="local", type="custom_tool_call", tool="apply_patch") == 1
    assert value(found, "toolwire_conversions_total", upstream="local", conversion="custom apply_patch restored") == 1
    assert value(
        found, "toolwire_conversions_total", upstream="local", conversion="custom tool apply_patch wrapped as function"
    ) == 1
    assert value(found, "toolwire_tokens_total", model="qwen3", upstream="local", kind="input")
    assert value(found, "toolwire_tokens_total", model="qwen3", upstream="local", kind="output")
    assert value(found, "toolwire_open_streams") == 0
    assert value(found, "toolwire_requests_in_progress") == 0
    assert any(name == "process_cpu_seconds_total" for name, _ in found)
    assert any(name == "python_gc_collections_total" for name, _ in found)


def test_openmetrics_when_the_scraper_asks_for_it(upstream: ChatUpstream) -> None:
    with observed_client(observed_config(upstream.base_url)) as (client, _):
        response = client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.rstrip().endswith("# EOF")


def test_in_flight_streams_are_open_streams_until_they_finish() -> None:
    observer = MetricsObserver()
    running = Exchange("resp_a", b"{}")
    plain = Exchange("resp_b", b"{}")
    observer.started(running)
    observer.started(plain)
    running.stream = True  # known once the request is parsed, after ``started``
    found = scrape(observer)
    assert (value(found, "toolwire_open_streams"), value(found, "toolwire_requests_in_progress")) == (1, 2)
    running.finish("completed")
    observer.finished(running)
    found = scrape(observer)
    assert (value(found, "toolwire_open_streams"), value(found, "toolwire_requests_in_progress")) == (0, 1)


def test_client_chosen_label_values_are_capped() -> None:
    observer = MetricsObserver(max_label_values=3)
    for n in range(10):
        observer.finished(exchange(f"resp_{n}", model=f"model-{n}", tool_calls=[("function_call", f"tool_{n}", None)],
                                   conversions=[f"tool name t{n} resolved to tool_{n}"]))
    observer.finished(exchange("resp_long", model="x" * 500))
    found = scrape(observer)
    assert label_values(found, "toolwire_requests_total", "model") == {"model-0", "model-1", "model-2", OTHER}
    assert value(found, "toolwire_requests_total", model=OTHER, upstream="local", status="200", outcome="completed") == 8
    assert label_values(found, "toolwire_tool_calls_total", "tool") == {"tool_0", "tool_1", "tool_2", OTHER}
    assert len(label_values(found, "toolwire_conversions_total", "conversion")) == 4


def test_every_app_has_its_own_registry() -> None:
    first, second = MetricsObserver(), MetricsObserver()
    first.finished(exchange())
    assert value(scrape(first), "toolwire_requests_total", model="m", upstream="local", status="200", outcome="completed") == 1
    assert value(scrape(second), "toolwire_requests_total", model="m", upstream="local", status="200", outcome="completed") is None
    assert REGISTRY.get_sample_value("toolwire_requests_total", {"model": "m"}) is None


def test_namespaced_tools_are_counted_by_their_full_name() -> None:
    observer = MetricsObserver()
    observer.finished(exchange(tool_calls=[("function_call", "list_agents", "collaboration"), ("tool_search_call", "tool_search", None)]))
    found = scrape(observer)
    assert value(found, "toolwire_tool_calls_total", upstream="local", type="function_call", tool="collaboration.list_agents") == 1
    assert value(found, "toolwire_tool_calls_total", upstream="local", type="tool_search_call", tool="tool_search") == 1


def test_tokens_by_kind() -> None:
    observer = MetricsObserver()
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60}, "output_tokens": 20,
             "output_tokens_details": {"reasoning_tokens": 5}, "total_tokens": 120}
    observer.finished(exchange(usage=usage))
    found = scrape(observer)
    counts = {kind: value(found, "toolwire_tokens_total", model="m", upstream="local", kind=kind)
              for kind in ("input", "output", "cached_input", "reasoning")}
    assert counts == {"input": 100, "output": 20, "cached_input": 60, "reasoning": 5}


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"outcome": "completed"}, None),
        ({"outcome": "error", "status": 400, "error": "bad", "error_kind": "RequestError"}, None),
        ({"outcome": "error", "status": 404, "error": "no model", "error_kind": "NotFoundError"}, None),
        ({"outcome": "error", "status": 502, "error": "unreachable", "error_kind": "UpstreamError"}, "status_502"),
        ({"outcome": "error", "status": 429, "error": "slow down", "error_kind": "UpstreamError"}, "status_429"),
        ({"outcome": "error", "status": 502, "error": "not JSON", "error_kind": "UpstreamProtocolError"}, "protocol"),
        ({"outcome": "failed", "error": "boom", "error_kind": "server_error"}, "stream_server_error"),
        ({"outcome": "failed", "error": "too long", "error_kind": "context_length_exceeded"}, "stream_context_length_exceeded"),
        ({"outcome": "disconnected"}, None),
        ({"outcome": "incomplete"}, None),
        ({"outcome": "failed", "error": "cut"}, "stream_unknown"),
    ],
)
def test_upstream_error_kinds(fields: dict[str, Any], kind: str | None) -> None:
    assert upstream_error_kind(exchange(**fields)) == kind


def test_an_in_stream_upstream_failure_is_an_upstream_error(upstream: ChatUpstream) -> None:
    upstream.enqueue(StreamError(after_chunks=2))
    with observed_client(observed_config(upstream.base_url)) as (client, _):
        client.post("/v1/responses", json={"model": "m", "input": "hi", "stream": True})
        found = samples(client.get("/metrics").text)
    assert value(found, "toolwire_upstream_errors_total", upstream="local", kind="stream_server_error") == 1
    assert value(found, "toolwire_requests_total", model="m", upstream="local", status="200", outcome="failed") == 1


def test_bounded_label_passes_known_values_and_caps_new_ones() -> None:
    label = BoundedLabel(2)
    assert [label(v) for v in ("a", "b", "c", "a", None, "b")] == ["a", "b", OTHER, "a", "", "b"]


def test_a_hundred_models_are_counted_by_name_and_the_rest_as_other() -> None:
    observer = MetricsObserver()
    for n in range(101):
        observer.finished(exchange(f"resp_{n}", model=f"model-{n}"))
    models = label_values(scrape(observer), "toolwire_requests_total", "model")
    assert models == {f"model-{n}" for n in range(100)} | {OTHER}


def test_the_observer_counts_into_the_registry_it_is_given() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    MetricsObserver(registry=registry).finished(exchange())
    assert value(samples(generate_latest(registry).decode()), "toolwire_requests_total",
                 model="m", upstream="local", status="200", outcome="completed") == 1


def test_a_label_value_of_up_to_120_characters_passes() -> None:
    label = BoundedLabel(10)
    assert [label("m" * 120), label("m" * 121)] == ["m" * 120, OTHER]


def test_tokens_of_a_kind_the_upstream_reported_none_of_are_not_counted() -> None:
    observer = MetricsObserver()
    usage = {"input_tokens": 10, "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0}}
    observer.finished(exchange(usage=usage))
    found = scrape(observer)
    kinds = {dict(labels)["kind"] for (name, labels) in found if name == "toolwire_tokens_total"}
    assert kinds == {"input"}


FAMILIES: dict[str, tuple[str, str, list[str] | None]] = {
    # name: (type, help, labels)
    "toolwire_requests": ("counter", "Requests to /v1/responses by how they ended.", ["model", "outcome", "status", "upstream"]),
    "toolwire_request_duration_seconds": (
        "histogram", "From the request body read to the last byte sent.", ["le", "model", "upstream"],
    ),
    "toolwire_time_to_first_token_seconds": (
        "histogram", "Of streaming requests: until the upstream's first chunk.", ["le", "model", "upstream"],
    ),
    "toolwire_upstream_errors": ("counter", "Requests that failed because of the upstream, by kind.", ["kind", "upstream"]),
    "toolwire_tokens": ("counter", "Tokens the upstream reported.", ["kind", "model", "upstream"]),
    "toolwire_tool_calls": ("counter", "Tool calls sent to clients, by item type and tool.", ["tool", "type", "upstream"]),
    "toolwire_conversions": ("counter", "Conversions applied to requests and streams.", ["conversion", "upstream"]),
    "toolwire_key_requests": ("counter", "Requests to /v1/responses by client key name.", ["key", "model", "status"]),
    "toolwire_key_tokens": ("counter", "Tokens the upstream reported, by client key name.", ["key", "kind", "model"]),
    "toolwire_open_streams": ("gauge", "Streaming responses in progress.", []),
    "toolwire_requests_in_progress": ("gauge", "Requests to /v1/responses in progress.", []),
    # The process's own: their samples depend on what else this process has served.
    "toolwire_limits_tripped": (
        "counter", "Reads from clients and upstreams cut short by a bound, by the setting that bounds them.", None,
    ),
    "toolwire_client_connections": ("gauge", "Client connections of this process, by state.", None),
    "toolwire_history_cache_entries": ("gauge", "Conversation histories kept.", []),
    "toolwire_history_cache_bytes": ("gauge", "The estimated memory of the kept conversation histories.", []),
    "toolwire_history_continued": ("counter", "Request bodies parsed past a kept history.", []),
    "toolwire_history_learned": ("counter", "Histories learned from request bodies parsed whole.", []),
    "toolwire_stored_conversations_entries": ("gauge", "Conversations of stored responses kept parsed.", []),
    "toolwire_stored_conversations_bytes": ("gauge", "The estimated memory of the kept stored conversations.", []),
    "toolwire_stored_conversations_continued": (
        "counter", "Continuations (previous_response_id) that found theirs kept.", [],
    ),
    "toolwire_stored_conversations_read": (
        "counter", "Continuations (previous_response_id) that read theirs from the store.", [],
    ),
    "toolwire_stored_conversations_caught_up": (
        "counter",
        "Continuations (previous_response_id) that found theirs kept a few responses before, and read only those.",
        [],
    ),
}  # fmt: skip
LATENCY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, float("inf")]
TTFT_BUCKETS = [0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0, float("inf")]


def test_every_family_with_its_type_help_and_labels() -> None:
    """The families the module docstring lists, as a scraper reads their ``# TYPE`` and
    ``# HELP`` lines, each with its labels once every metric has been counted."""
    observer = MetricsObserver()
    usage = {"input_tokens": 3, "output_tokens": 2}
    observer.finished(exchange(stream=True, first_token_at=0.0, key_name="alice", usage=usage, conversions=["c"],
                               tool_calls=[("function_call", "f", None)], outcome="failed", error="x", error_kind="server_error"))
    families = {family.name: family for family in observer.registry.collect()}
    found = {
        name: (
            family.type,
            family.documentation,
            None if FAMILIES.get(name, (0, 0, 0))[2] is None else sorted({label for s in family.samples for label in s.labels}),
        )
        for name, family in families.items()
        if name.startswith("toolwire_")
    }
    assert found == FAMILIES
    assert {"process_cpu_seconds", "python_info", "python_gc_collections"} <= families.keys()
    buckets = {
        name: [float(sample.labels["le"]) for sample in families[name].samples if sample.name.endswith("_bucket")]
        for name in ("toolwire_request_duration_seconds", "toolwire_time_to_first_token_seconds")
    }
    assert buckets == {"toolwire_request_duration_seconds": LATENCY_BUCKETS, "toolwire_time_to_first_token_seconds": TTFT_BUCKETS}


async def test_the_store_as_this_process_last_wrote_to_it() -> None:
    store = MemoryResponseStore(ttl_seconds=None, max_entries=None, max_bytes=5_000)
    observer = MetricsObserver(store=store)
    assert value(scrape(observer), "toolwire_store_max_bytes") == 5_000
    await store.put(StoredResponse.from_exchange({"id": "resp_1", "output": []}, "x" * 1_000))
    await store.put(StoredResponse.from_exchange({"id": "resp_2", "output": []}, "y" * 2_000))
    assert value(scrape(observer), "toolwire_store_bytes") == await store.stored_bytes() > 3_000
    await store.delete("resp_1")
    assert value(scrape(observer), "toolwire_store_bytes") == await store.stored_bytes() > 2_000
    unbounded = MetricsObserver(store=MemoryResponseStore(ttl_seconds=60, max_entries=None, max_bytes=None))
    assert value(scrape(unbounded), "toolwire_store_max_bytes") == 0
    assert value(scrape(MetricsObserver()), "toolwire_store_bytes") is None  # no store, no figure


def test_the_history_cache_as_the_process_keeps_it() -> None:
    body = {"model": "m", "input": [{"type": "message", "role": "user", "content": f"turn {n}"} for n in range(3)]}
    parse_request(orjson.dumps(body))
    found = scrape(MetricsObserver())
    assert KNOWN_HISTORIES.weight > 0
    assert value(found, "toolwire_history_cache_entries") == len(KNOWN_HISTORIES)
    assert value(found, "toolwire_history_cache_bytes") == KNOWN_HISTORIES.weight
    assert value(found, "toolwire_history_continued_total") == KNOWN_HISTORIES.continued
    assert value(found, "toolwire_history_learned_total") == KNOWN_HISTORIES.learned


def test_requests_and_tokens_by_client_key_name() -> None:
    observer = MetricsObserver(max_label_values=2)
    usage = {"input_tokens": 7, "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 1}}
    observer.finished(exchange("resp_1", key_name="alice", usage=usage))
    observer.finished(exchange("resp_2", key_name="alice", status=429, outcome="error", error="slow", error_kind="RateLimited"))
    observer.finished(exchange("resp_3", key_name="static"))
    observer.finished(exchange("resp_4", key_name="carol"))  # past the cap of names
    observer.finished(exchange("resp_5", usage={"input_tokens": 2}))  # a gateway without keys: not counted by key
    found = scrape(observer)
    requests = {labels: count for (name, labels), count in found.items() if name == "toolwire_key_requests_total"}
    assert requests == {
        frozenset({("key", "alice"), ("model", "m"), ("status", "200")}): 1,
        frozenset({("key", "alice"), ("model", "m"), ("status", "429")}): 1,
        frozenset({("key", "static"), ("model", "m"), ("status", "200")}): 1,
        frozenset({("key", OTHER), ("model", "m"), ("status", "200")}): 1,
    }
    tokens = {dict(labels)["kind"]: count for (name, labels), count in found.items() if name == "toolwire_key_tokens_total"}
    assert tokens == {"input": 7, "output": 3, "reasoning": 1}
    assert value(found, "toolwire_key_tokens_total", key="alice", model="m", kind="input") == 7
    assert label_values(found, "toolwire_key_tokens_total", "key") == {"alice"}
    assert value(found, "toolwire_tokens_total", model="m", upstream="local", kind="input") == 9


def test_a_whole_response_is_counted_by_how_it_ended(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("cut", finish_reason="length"))
    with observed_client(observed_config(upstream.base_url)) as (client, _):
        answer = client.post("/v1/responses", json={"model": "m", "input": "hi"})
        found = samples(client.get("/metrics").text)
    assert answer.json()["status"] == "incomplete"
    assert value(found, "toolwire_requests_total", model="m", upstream="local", status="200", outcome="incomplete") == 1


def counted(found: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """What an observer counts of its exchanges in a scrape: its counters' totals and its
    histograms' counts (not the sums of times, nor what the process counts)."""
    return {
        key: count for key, count in found.items()
        if key[0].startswith("toolwire_") and key[0].endswith(("_total", "_count"))
        and not key[0].startswith(("toolwire_history_", "toolwire_limits_"))
    }  # fmt: skip


KINDS = [
    {},
    {"model": "other-model", "usage": {"input_tokens": 5, "output_tokens": 2}},
    {"key_name": "alice", "usage": {"input_tokens": 3, "output_tokens_details": {"reasoning_tokens": 1}}},
    {"outcome": "error", "status": 502, "error": "down", "error_kind": "UpstreamError"},
    {"conversions": ["custom apply_patch restored"], "tool_calls": [("custom_tool_call", "apply_patch", None)]},
    {"stream": True, "first_token_at": 0.0, "conversions": ["namespace tools flattened", "custom apply_patch restored"]},
]


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.one_of(st.integers(0, len(KINDS) - 1), st.just("scrape")), max_size=40),
       most_tallies=st.integers(1, 4))  # fmt: skip
def test_counts_are_exact_however_exchanges_and_scrapes_interleave(
    steps: list[int | str], most_tallies: int
) -> None:
    """Exchanges alike are tallied until a scrape (or more kinds than the tallies' bound)
    adds them to the metrics: a scrape at any point shows exactly what one increment per
    exchange would."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(metrics_module, "_MAX_TALLIES", most_tallies)
        tallied, reference = MetricsObserver(), MetricsObserver()
        for n, step in enumerate([*steps, "scrape"]):
            if step == "scrape":
                assert counted(scrape(tallied)) == counted(scrape(reference))
                continue
            assert isinstance(step, int)
            fields = dict(KINDS[step])
            tallied.finished(exchange(f"resp_{n}", **fields))
            assert len(tallied._tallies) <= most_tallies  # the tallies' memory is bounded
            reference.finished(exchange(f"resp_{n}", **fields))
            scrape(reference)  # the reference adds each exchange at once


def test_with_other_workers_a_scrape_holds_every_workers_series_labelled() -> None:
    """Each worker counts its own exchanges; the one scraped asks the others, whose pending
    tallies count too (their collection flushes them), and labels every series."""
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from toolwire.server._siblings import LocalSiblings

    siblings = LocalSiblings.group(3)
    observers = [MetricsObserver(siblings=worker) for worker in siblings]
    for observer, count in zip(observers, (2, 5, 1), strict=True):
        for index in range(count):
            observer.finished(exchange(f"resp_{index}", status=200, usage={"input_tokens": 10, "output_tokens": 3}))
    observers[1].started(exchange("resp_open", stream=True))
    siblings[2].absent = True
    with TestClient(Starlette(routes=[observers[0].route])) as client:
        scraped = client.get("/metrics")
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    found = samples(scraped.text)
    requests = {"model": "m", "upstream": "local", "status": "200", "outcome": "completed"}
    assert value(found, "toolwire_requests_total", **requests, worker="0") == 2
    assert value(found, "toolwire_requests_total", **requests, worker="1") == 5
    assert label_values(found, "toolwire_requests_total", "worker") == {"0", "1"}
    assert value(found, "toolwire_tokens_total", model="m", upstream="local", kind="input", worker="1") == 50
    assert value(found, "toolwire_open_streams", worker="1") == 1
    assert value(found, "toolwire_open_streams", worker="0") == 0
    assert {worker: value(found, "toolwire_worker_answered", worker=worker) for worker in "012"} == {
        "0": 1.0, "1": 1.0, "2": 0.0,
    }  # fmt: skip
    assert all(dict(labels).get("worker") in {"0", "1", "2"} for _, labels in found)
    # The worker scraped alone (as a gateway of one process is) has no worker label.
    assert "worker" not in {name for _, labels in scrape(observers[0]) for name, _ in labels}


def test_another_workers_metrics_that_cannot_be_read_are_left_out(caplog: pytest.LogCaptureFixture) -> None:
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from toolwire.server._siblings import LocalSiblings

    siblings = LocalSiblings.group(2)
    observer = MetricsObserver(siblings=siblings[0])
    siblings[1].answer("metrics", lambda argument: b"[1]")
    with TestClient(Starlette(routes=[observer.route])) as client:
        found = samples(client.get("/metrics").text)
    assert value(found, "toolwire_worker_answered", worker="1") == 0.0
    assert value(found, "toolwire_worker_answered", worker="0") == 1.0
    assert [r.getMessage() for r in caplog.records if r.name == "toolwire.server"] == [
        "worker 1 answered with metrics that cannot be read (family 0 is not an object); left out"
    ]
