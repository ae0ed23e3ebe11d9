"""``python -m bench.instructions``: versions side by side in instructions per request. A
short count, so that it never rots; it checks that each version served its requests under
callgrind and that its count is a request's, not any figure."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from bench.compare import upstream_writes
from bench.instructions import Count, report

from .comparisons import ROOT, run_head_against_src


def test_a_revision_and_a_directory_are_counted_side_by_side(tmp_path: Path) -> None:
    options = ("--requests", "24", "--warmup", "8", "--connections", "4")
    result = run_head_against_src("bench.instructions", "valgrind", tmp_path, *options)
    table = result.stdout
    assert "V1 body, 24 requests at 4 connections" in table
    counted = {name: float(millions) for name, millions in re.findall(r"^\| (\S+) \| (\d+\.\d+) M \| \d\.\d+ \|$", table, re.M)}
    assert set(counted) == {"HEAD", str(ROOT / "src")}, table
    # A streamed V1 request is a few million instructions: the count is of the requests
    # (not of the start-up, some hundreds of millions, nor of nothing).
    assert all(0.5 < millions < 50 for millions in counted.values()), counted
    assert re.search(r"^\| HEAD \| .* \| 1\.000 \|$", table, re.M)  # the first: itself
    assert len(re.findall(r"M instructions per request$", result.stderr, re.M)) == 2


def test_the_report_gives_each_version_over_the_first() -> None:
    table = report([Count("a", 3_000_000, 10), Count("b", 27_000_000, 100)], body_name="v2", connections=16)
    assert table.splitlines()[0] == (
        "V2 body, 10 requests at 16 connections, upstream streaming event by event; instructions counted by callgrind"
    )
    assert table.splitlines()[-2:] == ["| a | 0.300 M | 1.000 |", "| b | 0.270 M | 0.900 |"]


def test_a_paced_count_is_said_and_its_pace_given_to_the_upstream(tmp_path: Path) -> None:
    table = report([Count("a", 6_000_000, 1)], body_name="v1", connections=8, pace_ms=20)
    assert table.splitlines()[0] == (
        "V1 body, 1 requests at 8 connections, upstream streaming its events 20 ms apart; instructions counted by callgrind"
    )
    assert upstream_writes(20) == ("--pace-ms", "20") and upstream_writes(0) == ("--write-per-event",)
    command = [sys.executable, "-m", "bench.instructions", "HEAD", "--pace-ms", "-1", "--work-dir", str(tmp_path)]
    refused = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2 and "--pace-ms cannot be negative" in refused.stderr


def test_codex_turns_over_a_websocket_are_counted(tmp_path: Path) -> None:
    options = ("--requests", "12", "--warmup", "4", "--websocket")
    result = run_head_against_src("bench.instructions", "valgrind", tmp_path, *options)
    table = result.stdout
    assert "V1 body, 12 turns over one WebSocket, upstream streaming event by event" in table
    assert "| version | instructions per turn | ÷ HEAD's |" in table
    counted = {name: float(millions) for name, millions in re.findall(r"^\| (\S+) \| (\d+\.\d+) M \| \d\.\d+ \|$", table, re.M)}
    assert set(counted) == {"HEAD", str(ROOT / "src")}, table
    # A turn is a few million instructions, as a request is (not the start-up's hundreds).
    assert all(0.5 < millions < 50 for millions in counted.values()), counted
