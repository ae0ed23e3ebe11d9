"""``python -m bench.compare``: versions side by side under load. A short run, so that it
never rots; it checks that each version served and was measured, not any timing."""

from __future__ import annotations

import re
import subprocess
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
