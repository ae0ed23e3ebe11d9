"""``python -m bench.compare``: versions side by side under load. A short run, so that it
never rots; it checks that each version served and was measured, not any timing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from bench.compare import source_of

from .comparisons import ROOT, run_head_against_src


def test_a_revision_and_a_directory_are_compared_side_by_side(tmp_path: Path) -> None:
    options = ("--rounds", "2", "--duration", "1", "--connections", "2")
    result = run_head_against_src("bench.compare", "wrk", tmp_path, *options)
    table = result.stdout
    assert "V1 body, 2 connections, 2 round(s) of 1 s" in table
    number = r"\d+(?:\.\d+)?"
    for name in ("HEAD", re.escape(str(ROOT / "src"))):
        assert re.search(rf"^\| {name} \| {number} \| {number} µs \| {number} \({number}, {number}\) \| 0 \|$",
                         table, re.M), (name, table)
    assert re.search(r"^\| HEAD \| .* \| 1\.000 \(1\.000, 1\.000\) \| 0 \|$", table, re.M)  # the first: itself
    assert (tmp_path / "sources").is_dir() and len(list((tmp_path / "sources").iterdir())) == 1
    assert len(re.findall(r"^round [12]: ", result.stderr, re.M)) == 4


def test_a_version_is_a_source_directory_or_a_revision(tmp_path: Path) -> None:
    assert source_of(str(ROOT), tmp_path) == ROOT / "src"  # a checkout: its src
    assert source_of(str(ROOT / "src"), tmp_path) == ROOT / "src"
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    head = source_of("HEAD", tmp_path)
    assert head == tmp_path / "sources" / commit.strip() / "src"
    assert (head / "toolwire" / "__init__.py").is_file() and (head / "toolwire" / "cli").is_dir()
    (head / "toolwire" / "marker").write_text("kept")
    assert source_of("HEAD", tmp_path) == head and (head / "toolwire" / "marker").exists()  # extracted once
    with pytest.raises(SystemExit, match="nor a git revision"):
        source_of("no-such-revision-or-directory", tmp_path)


def test_a_paced_upstream_is_compared_and_said(tmp_path: Path) -> None:
    """With ``--pace-ms`` the upstream spaces its events; every request still completes (a
    stream cut short would count as an error), and the report says how the upstream wrote."""
    options = ("--rounds", "1", "--duration", "1", "--connections", "4", "--pace-ms", "2")
    table = run_head_against_src("bench.compare", "wrk", tmp_path, *options).stdout
    assert "V1 body, 4 connections, 1 round(s) of 1 s, upstream streaming its events 2 ms apart" in table
    rows = re.findall(r"^\| (\S+) \| (\d+) \| \d+ µs \| .* \| (\d+) \|$", table, re.M)
    assert [(name, errors) for name, _, errors in rows] == [("HEAD", "0"), (str(ROOT / "src"), "0")]
    # 4 connections, each answer ~43 gaps of 2 ms: far fewer requests than back to back
    assert all(0 < int(rps) < 4 / (43 * 0.002) * 1.1 for _, rps, _ in rows), table


def test_the_pace_cannot_be_negative(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "bench.compare", "HEAD", "--pace-ms", "-1", "--work-dir", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and "--pace-ms cannot be negative" in result.stderr


def test_codex_turns_over_a_websocket_are_compared(tmp_path: Path) -> None:
    """With ``--websocket`` each run is Codex's turns over one WebSocket: every turn
    completes (a failed one counts as an error), and the report says turns, not requests."""
    options = ("--rounds", "1", "--duration", "1", "--websocket", "--body", "v2")
    table = run_head_against_src("bench.compare", "wrk", tmp_path, *options).stdout
    assert "V2 body, Codex's turns over one WebSocket, 1 round(s) of 1 s, upstream streaming event by event" in table
    assert "| version | turns/s | CPU per turn | CPU per turn ÷ HEAD's, per round | errors |" in table
    rows = re.findall(r"^\| (\S+) \| (\d+) \| (\d+) µs \| .* \| (\d+) \|$", table, re.M)
    assert [(name, errors) for name, _, _, errors in rows] == [("HEAD", "0"), (str(ROOT / "src"), "0")]
    assert all(int(turns) > 0 and int(cpu) > 0 for _, turns, cpu, _ in rows), table
