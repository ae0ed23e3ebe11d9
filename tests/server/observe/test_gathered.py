"""Several workers' metrics and inspector summaries put together (``_gathered``, no I/O):
families round-trip through JSON as a registry collects them, merge by name with each
sample labelled by its worker, and what is not a worker's families is refused with a
reason; summaries merge as one worker lists its own."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from toolwire.server.observe._gathered import (
    families_from_json,
    families_to_json,
    merged_families,
    merged_summaries,
)


def worker_registry(requests: int, memory: float, latencies: list[float]) -> CollectorRegistry:
    registry = CollectorRegistry()
    counter = Counter("toolwire_requests", "Requests.", ["model"], registry=registry)
    counter.labels("m").inc(requests)
    Gauge("toolwire_store_bytes", "Bytes.", registry=registry, unit="bytes").set(memory)
    histogram = Histogram("toolwire_latency_seconds", "Latency.", buckets=(0.1, 1.0), registry=registry)
    for latency in latencies:
        histogram.observe(latency)
    return registry


def holding(families: list[Metric]) -> CollectorRegistry:
    """A registry whose one collector gives ``families`` (as a scrape's is built)."""
    registry = CollectorRegistry(auto_describe=False)

    class Collected:
        def collect(self) -> list[Metric]:
            return families

    registry.register(Collected())  # type: ignore[arg-type]
    return registry


def exposed(families: list[Metric]) -> str:
    return generate_latest(holding(families)).decode()


def exposed_openmetrics(families: list[Metric]) -> str:
    from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

    return generate_openmetrics(holding(families)).decode()


def as_samples(families: list[Metric]) -> list[tuple[str, str, str, str, list[tuple[str, dict[str, str], float]]]]:
    return [
        (f.name, f.documentation, f.type, f.unit, [(s.name, s.labels, s.value) for s in f.samples]) for f in families
    ]


def test_a_registrys_families_come_back_as_they_were_collected() -> None:
    collected = list(worker_registry(3, 1024.0, [0.05, 0.5, 5.0]).collect())
    assert as_samples(families_from_json(families_to_json(collected))) == as_samples(collected)
    assert {f.type for f in collected} == {"counter", "gauge", "histogram"}


def test_values_that_are_not_finite_travel_by_name() -> None:
    family = Metric("toolwire_odd", "Odd values.", "gauge")
    for index, value in enumerate((math.inf, -math.inf, math.nan, 2.5)):
        family.add_sample("toolwire_odd", {"n": str(index)}, value)
    values = [s.value for s in families_from_json(families_to_json([family]))[0].samples]
    assert values[:2] == [math.inf, -math.inf] and math.isnan(values[2]) and values[3] == 2.5


def test_workers_merge_into_one_family_each_with_every_sample_labelled() -> None:
    first = list(worker_registry(3, 100.0, [0.05]).collect())
    second = families_from_json(families_to_json(worker_registry(4, 50.0, [5.0]).collect()))
    text = exposed(merged_families([("0", first), ("1", second)], ("0", "1", "2")))
    assert text.count("# TYPE toolwire_requests_total counter") == 1
    assert text.count("# HELP toolwire_latency_seconds Latency.") == 1
    parsed = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert parsed[("toolwire_requests_total", (("model", "m"), ("worker", "0")))] == 3.0
    assert parsed[("toolwire_requests_total", (("model", "m"), ("worker", "1")))] == 4.0
    assert parsed[("toolwire_store_bytes", (("worker", "0"),))] == 100.0
    assert parsed[("toolwire_store_bytes", (("worker", "1"),))] == 50.0
    assert parsed[("toolwire_latency_seconds_bucket", (("le", "0.1"), ("worker", "0")))] == 1.0
    assert parsed[("toolwire_latency_seconds_bucket", (("le", "0.1"), ("worker", "1")))] == 0.0
    assert parsed[("toolwire_latency_seconds_bucket", (("le", "+Inf"), ("worker", "1")))] == 1.0
    assert {key: value for key, value in parsed.items() if key[0] == "toolwire_worker_answered"} == {
        ("toolwire_worker_answered", (("worker", "0"),)): 1.0,
        ("toolwire_worker_answered", (("worker", "1"),)): 1.0,
        ("toolwire_worker_answered", (("worker", "2"),)): 0.0,
    }
    assert all('worker="' in line for line in text.splitlines() if not line.startswith("#"))
    assert "# TYPE toolwire_worker_answered gauge\n" in text
    assert "# HELP toolwire_worker_answered 1 for each worker" in text
    opened = exposed_openmetrics(merged_families([("0", first), ("1", second)], ("0", "1")))
    assert "# UNIT toolwire_store_bytes bytes\n" in opened


def test_a_family_of_another_type_in_a_later_worker_is_left_out() -> None:
    counter = Metric("toolwire_thing", "As a counter.", "counter")
    counter.add_sample("toolwire_thing_total", {}, 1.0)
    gauge = Metric("toolwire_thing", "As a gauge.", "gauge")
    gauge.add_sample("toolwire_thing", {}, 7.0)
    other = Metric("toolwire_other", "Another.", "gauge")
    other.add_sample("toolwire_other", {}, 3.0)
    merged = merged_families([("0", [counter]), ("1", [gauge, other])], ("0", "1"))
    assert as_samples(merged[:2]) == [
        ("toolwire_thing", "As a counter.", "counter", "", [("toolwire_thing_total", {"worker": "0"}, 1.0)]),
        ("toolwire_other", "Another.", "gauge", "", [("toolwire_other", {"worker": "1"}, 3.0)]),
    ]


GAUGE = '"name": "x", "documentation": "d", "type": "gauge", "unit": ""'


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("[", "not JSON: unexpected end of data: line 1 column 2 (char 1)"),
        ('{"name": "x"}', "not a list of metric families"),
        ("[1]", "family 0 is not an object"),
        ('[{"name": "x", "documentation": "d", "type": "gauge"}]', "family 0 lacks a name, help, type or unit"),
        ('[{"name": 1, "documentation": "d", "type": "gauge", "unit": ""}]', "family 0 lacks a name, help, type or unit"),
        ('[{"name": "x", "documentation": 1, "type": "gauge", "unit": ""}]', "family 0 lacks a name, help, type or unit"),
        ('[{"name": "x", "documentation": "d", "type": 1, "unit": ""}]', "family 0 lacks a name, help, type or unit"),
        ('[{"name": "x", "documentation": "d", "type": "sideways", "unit": ""}]', "family 0 (x): Invalid metric type: sideways"),
        ('[{"name": "", "documentation": "d", "type": "gauge", "unit": ""}]', "family 0 (): metric name cannot be empty"),
        ("[{" + GAUGE + "}]", "family 0 (x) has no list of samples"),
        ("[{" + GAUGE + ', "samples": 3}]', "family 0 (x) has no list of samples"),
        ("[{" + GAUGE + ', "samples": [["x", {}]]}]', "family 0 (x) has a sample that is not [name, labels, value]"),
        ("[{" + GAUGE + ', "samples": [3]}]', "family 0 (x) has a sample that is not [name, labels, value]"),
        (
            "[{" + GAUGE + ', "samples": [["x", {"a": 1}, 1]]}]',
            "family 0 (x) has a sample without a name or with labels that are not text",
        ),
        ("[{" + GAUGE + ', "samples": [[2, {}, 1]]}]', "family 0 (x) has a sample without a name or with labels that are not text"),
        ("[{" + GAUGE + ', "samples": [["x", [], 1]]}]', "family 0 (x) has a sample without a name or with labels that are not text"),
        ("[{" + GAUGE + ', "samples": [["x", {}, "many"]]}]', "family 0 has a sample whose value is not a number"),
        ("[{" + GAUGE + ', "samples": [["x", {}, true]]}]', "family 0 has a sample whose value is not a number"),
    ],
)
def test_what_is_not_a_workers_families_is_refused_with_a_reason(data: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        families_from_json(data.encode())
    assert str(raised.value) == message


def test_the_second_family_is_named_when_it_is_the_one_refused() -> None:
    good = {"name": "x", "documentation": "d", "type": "gauge", "unit": "", "samples": [["x", {}, 1]]}
    with pytest.raises(ValueError, match=r"^family 1 \(y\) has no list of samples$"):
        families_from_json(orjson.dumps([good, {**good, "name": "y", "samples": None}]))


def summary(request_id: str, time: str, outcome: str = "completed") -> dict[str, Any]:
    return {"request_id": request_id, "time": time, "outcome": outcome}


def test_summaries_merge_in_progress_first_then_newest_first() -> None:
    first = [summary("a", "2026-12-05T10:00:03.000+00:00", "pending"), summary("b", "2026-12-05T10:00:04.000+00:00"),
             summary("c", "2026-12-05T10:00:01.000+00:00")]  # fmt: skip
    second = [summary("d", "2026-12-05T10:00:05.000+00:00", "pending"), summary("e", "2026-12-05T10:00:02.000+00:00")]
    merged = merged_summaries([first, second], None)
    assert [s["request_id"] for s in merged] == ["d", "a", "b", "e", "c"]
    assert [s["request_id"] for s in merged_summaries([first, second], 3)] == ["d", "a", "b"]
    assert merged_summaries([first, second], -1) == [] and merged_summaries([first, second], 0) == []
    assert merged_summaries([], None) == []
    timeless = {"request_id": "f", "outcome": "completed"}  # (another worker's, odd)
    assert [s["request_id"] for s in merged_summaries([first, [timeless]], None)] == ["a", "b", "c", "f"]
