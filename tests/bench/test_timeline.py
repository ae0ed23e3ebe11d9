"""``python -m bench.timeline``: one request's spans at one connection, toolwire beside the
bare relay. A short run, so that it never rots; it checks that both servers were probed and
every span measured, not any timing."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from bench.timeline import SPANS, spans

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"\d+\.\d"


def test_a_short_run_measures_every_span_of_both_servers(tmp_path: Path) -> None:
    assert shutil.which("wrk"), "`wrk` is not on PATH; install it with `apt-get install -y wrk`."
    command = [sys.executable, "-m", "bench.timeline", "--body", "v1", "--duration", "1", "--work-dir", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    table = result.stdout
    assert table.startswith("V1 body, one connection, upstream streaming event by event")
    for _, _, label in SPANS:
        assert re.search(rf"^\| {re.escape(label)} \| {NUMBER} \| {NUMBER} \| [+-]{NUMBER} \|$", table, re.M), table
    assert re.search(rf"^\| wrk's p50 latency \| {NUMBER} \| {NUMBER} \| [+-]{NUMBER} \|$", table, re.M), table
    # The probe noted each request's four moments in each server, in order.
    for name in ("toolwire", "relay"):
        moments = [line.split()[0] for line in (tmp_path / f"marks-{name}.txt").read_text().splitlines()]
        assert moments.count("post") > 100, name
        # (wrk stops with its last request on its way: that one may have no head)
        assert moments.count("post") - moments.count("head") in (0, 1), name
        # the first request sent upstream (a health probe sends none; toolwire's check of its
        # upstream at start is a post of no request)
        start = next(at for at in range(len(moments)) if moments[at : at + 2] == ["request", "post"])
        assert moments[start : start + 5] == ["request", "post", "head", "complete", "request"], name


def test_a_span_is_counted_only_between_the_moments_it_names() -> None:
    marks = [
        ("request", 0), ("post", 10_000), ("head", 30_000), ("complete", 60_000),
        ("request", 64_000), ("complete", 70_000),  # a request answered without the upstream (a 400)
        ("request", 80_000), ("post", 90_000), ("head", 100_000), ("complete", 120_000),
    ]
    found = spans(marks)
    labels = [label for _, _, label in SPANS]
    assert found == {
        labels[0]: [10.0, 10.0],
        labels[1]: [20.0, 10.0],
        labels[2]: [30.0, 20.0],
        labels[3]: [4.0, 10.0],
    }
