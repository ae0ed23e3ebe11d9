"""``bench.chains``: a short run, so that it never rots (it checks no timing)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"[-+]?\d+(?:\.\d+)?"


def test_a_quick_run_with_two_gateways_taking_turns_reports_each_length(tmp_path: Path) -> None:
    """Each length's row: direct, toolwire, keeping no conversation, over a WebSocket, and two gateways taking turns."""
    command = [sys.executable, "-m", "bench.chains", "--quick", "--taking-turns",
               "--store", f"sqlite:///{tmp_path}/responses.db", "--work-dir", str(tmp_path)]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"bench.chains failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    for turns in (0, 5):
        row = rf"^\| {turns} \| {NUMBER} MB \| {NUMBER} ms \| {NUMBER} ms \| \*\*{NUMBER} ms\*\* \| {NUMBER} ms \| {NUMBER} ms \| {NUMBER} ms \|$"
        assert re.search(row, result.stdout, re.M), (turns, result.stdout)
    pair = json.loads((tmp_path / "chains.json").read_text())["memory"]["taking_turns"]
    # 3 timed turns at length 0, 2 more to reach 5, 3 timed: 8 turns, answered by the two in turn. The
    # first starts the conversation; the second reads it (nothing kept yet); every later turn catches up.
    assert [(g["caught_up_total"], g["read_total"], g["continued_total"]) for g in pair] == [(3, 0, 0), (3, 1, 0)]


def test_taking_turns_needs_a_shared_store() -> None:
    result = subprocess.run([sys.executable, "-m", "bench.chains", "--taking-turns"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60, check=False)  # fmt: skip
    assert result.returncode == 2 and "needs a store the gateways share" in result.stderr
