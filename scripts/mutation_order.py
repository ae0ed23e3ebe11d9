"""A pytest plugin for mutation runs: a mutant's tests run fastest first.

mutmut hands each mutant the tests that reached the mutated function as an unordered set,
and stops at the first failure (``-x``). Run in the order of the durations mutmut measured
(``mutmut-stats.json`` in the working folder, ``mutants/``), a mutant the fast tests kill
is decided before the slow ones (gateway processes, worker supervision) start; a mutant
that survives runs every test either way, so no verdict changes, only the time it takes.
Without the stats file (mutmut's own first runs) the order is left alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

STATS = Path("mutmut-stats.json")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not STATS.is_file():
        return
    durations: dict[str, float] = json.loads(STATS.read_text()).get("duration_by_test", {})
    unknown = max(durations.values(), default=0.0)
    items.sort(key=lambda item: durations.get(item.nodeid, unknown))
