"""What the workers of one gateway observe, put together (no I/O).

With ``--workers N`` each worker counts and keeps its own exchanges; a scrape of
``/metrics`` or a look at the inspector reaches one of them, which asks the others
(``toolwire.server._siblings``) and puts their answers beside its own:

* metric families travel as JSON (``families_to_json``, ``families_from_json``: the
  families' names, help, types and units, and their samples' names, labels and values;
  toolwire's metrics carry no timestamps or exemplars)
  and are merged by name (``merged_families``), every sample labelled with its worker
  (``worker="0"``..), so that no two workers' series collide and a counter that a
  restarted worker starts again from zero is one series starting again, as Prometheus
  expects; ``toolwire_worker_answered`` says which workers are in the answer;
* the inspector's summaries are merged newest first, exchanges in progress before the
  finished ones, as one worker lists its own (``merged_summaries``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import orjson
from prometheus_client.metrics_core import Metric

__all__ = [
    "WORKER_LABEL",
    "families_from_json",
    "families_to_json",
    "merged_families",
    "merged_summaries",
]

WORKER_LABEL = "worker"
_ANSWERED = ("toolwire_worker_answered", "1 for each worker whose metrics this answer holds, 0 for one that did not answer.")


def families_to_json(families: Iterable[Metric]) -> bytes:
    """``families`` (a registry's collection) as JSON; a value that is not a finite number
    (NaN, an infinity) travels as its name."""
    return orjson.dumps([
        {
            "name": family.name,
            "documentation": family.documentation,
            "type": family.type,
            "unit": family.unit,
            "samples": [[sample.name, sample.labels, _number(sample.value)] for sample in family.samples],
        }
        for family in families
    ])


def families_from_json(data: bytes) -> list[Metric]:
    """The families ``families_to_json`` wrote; ``ValueError`` says what is wrong with ``data``."""
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if type(decoded) is not list:
        raise ValueError("not a list of metric families")
    return [_family(entry, index) for index, entry in enumerate(decoded)]


def merged_families(by_worker: Sequence[tuple[str, Sequence[Metric]]], workers: Sequence[str]) -> list[Metric]:
    """The families of every worker in ``by_worker`` (its name, its families) as one
    collection, each sample labelled with its worker; then ``toolwire_worker_answered``
    for each of ``workers``. A family keeps the help and type of the first worker that
    has it; a worker's family of another type is left out (two versions of toolwire)."""
    merged: dict[str, Metric] = {}
    for worker, families in by_worker:
        for family in families:
            into = merged.get(family.name)
            if into is None:
                into = merged[family.name] = _empty_like(family)
            elif into.type != family.type:
                continue
            for sample in family.samples:
                into.add_sample(sample.name, {**sample.labels, WORKER_LABEL: worker}, sample.value)
    answered = {worker for worker, _ in by_worker}
    up = Metric(_ANSWERED[0], _ANSWERED[1], "gauge")
    for worker in workers:
        up.add_sample(_ANSWERED[0], {WORKER_LABEL: worker}, 1.0 if worker in answered else 0.0)
    return [*merged.values(), up]


def merged_summaries(lists: Iterable[Sequence[dict[str, Any]]], limit: int | None) -> list[dict[str, Any]]:
    """Several workers' inspector summaries as one list: exchanges in progress (outcome
    ``pending``), then the finished ones, each newest first by ``time``; at most ``limit``."""
    everything = [summary for summaries in lists for summary in summaries]
    everything.sort(key=lambda summary: str(summary.get("time", "")), reverse=True)
    everything.sort(key=lambda summary: summary.get("outcome") != "pending")  # (a stable sort keeps the times' order)
    return everything if limit is None else everything[: max(0, limit)]


def _number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def _family(entry: Any, index: int) -> Metric:
    where = f"family {index}"
    if type(entry) is not dict:
        raise ValueError(f"{where} is not an object")
    name, documentation, kind, unit = (entry.get(key) for key in ("name", "documentation", "type", "unit"))
    if type(name) is not str or type(documentation) is not str or type(kind) is not str or type(unit) is not str:
        raise ValueError(f"{where} lacks a name, help, type or unit")
    try:
        family = Metric(name, documentation, kind, unit)
    except ValueError as exc:
        raise ValueError(f"{where} ({name}): {exc}") from None
    samples = entry.get("samples")
    if type(samples) is not list:
        raise ValueError(f"{where} ({name}) has no list of samples")
    for sample in samples:
        if type(sample) is not list or len(sample) != 3:
            raise ValueError(f"{where} ({name}) has a sample that is not [name, labels, value]")
        sample_name, labels, value = sample
        if type(sample_name) is not str or type(labels) is not dict or not all(type(v) is str for v in labels.values()):
            raise ValueError(f"{where} ({name}) has a sample without a name or with labels that are not text")
        family.add_sample(sample_name, labels, _value(value, where))
    return family


def _value(value: Any, where: str) -> float:
    if type(value) in (int, float):
        return float(value)
    if type(value) is str and value in ("nan", "inf", "-inf"):
        return float(value)
    raise ValueError(f"{where} has a sample whose value is not a number")


def _empty_like(family: Metric) -> Metric:
    return Metric(family.name, family.documentation, family.type, family.unit)
