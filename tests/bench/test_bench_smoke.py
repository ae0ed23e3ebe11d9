"""A short smoke run of the benchmark (``python -m bench.run --quick``), so that it never rots.

It checks that the run completes, that every exchange was valid (no wrk errors, every
stream ended properly) and that the report has every section with numbers in it. It
checks no timing: the figures of a one-second run on a shared machine mean nothing.
Needs ``wrk`` on PATH (Debian/Ubuntu: ``apt-get install -y wrk``).
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bench.report import SECTIONS

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"[-+]?\d+(?:\.\d+)?"


def test_quick_benchmark_run_reports_every_figure(tmp_path: Path) -> None:
    assert shutil.which("wrk"), (
        "`wrk` is not on PATH; the benchmark smoke run needs it. Install it with `apt-get install -y wrk`."
    )
    out = tmp_path / "RESULTS.md"
    work = tmp_path / "out"
    command = [sys.executable, "-m", "bench.run", "--quick", "--duration", "1", "--scale-workers", "2",
               "--out", str(out), "--work-dir", str(work)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"bench.run failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"

    report = out.read_text()
    for section in SECTIONS:
        assert section in report, f"missing section {section!r}"
    assert "python -m bench.run --quick --duration 1 --scale-workers 2" in report
    # how fast the interpreter ran: the figure that tells a slow host from a quiet one
    assert re.search(rf"a fixed loop of Python \(a million additions of squares, `bench.run.interpreter_loop_ms`\) "
                     rf"took \*\*{NUMBER} ms\*\*, best of 5", report)
    assert re.search(rf"of 20,000 small items \(`bench.run.memory_walk_ms`\) took \*\*{NUMBER} ms\*\*, best of 5", report)
    for writes in ("streams event by event", "writes each answer at once"):
        assert re.search(
            rf"\| added p50 latency, 1 connection \(upstream {writes}\) \| {NUMBER} ms \| {NUMBER} ms \|",
            report.replace("+", ""),
        )
        for gateway in ("toolwire", "toolwire --workers 2"):
            assert re.search(
                rf"\| throughput at 16 connections, {gateway} ÷ direct \(upstream {writes}\) "
                rf"\| {NUMBER} % \| {NUMBER} % \|",
                report,
            ), (gateway, writes)
        # the bare relay: under the summary, and a row in each table (throughput, ratios, CPU per request)
        assert re.search(
            rf"^- bare relay, upstream {writes}: {NUMBER} % / {NUMBER} % of direct throughput at 16 connections "
            rf"\(V1 / V2\), {NUMBER} / {NUMBER} µs of CPU per request against toolwire's {NUMBER} / {NUMBER} µs: "
            r"what uvicorn \+ aiohttp cost with no translation at all\.$",
            report, re.M,
        ), writes
        assert re.search(
            rf"^- bare relay at 1 connection, upstream {writes}: {NUMBER} ms / {NUMBER} ms added p50 \(V1 / V2\) "
            rf"against toolwire's {NUMBER} ms / {NUMBER} ms: the part of the one-connection latency",
            report.replace("+", ""), re.M,
        ), writes
        for body, connections in itertools.product(("V1", "V2"), (1, 16)):
            relay_row = rf"^\| upstream {writes} \| {body} \| {connections} \| `relay` \| "
            assert re.search(relay_row + rf"{NUMBER} \| {NUMBER} ms \| {NUMBER} ms \| {NUMBER} ms \| 0 \|",
                             report, re.M), (writes, body)
            assert re.search(relay_row + rf"{NUMBER} % \| \+?{NUMBER} ms \|", report, re.M), (writes, body)
            assert re.search(relay_row + rf"{NUMBER} µs \| {NUMBER} µs \| {NUMBER} % \|$", report, re.M), (writes, body)
    assert re.search(rf"\| gateway RSS with \d+ open streams[^|]*\| {NUMBER} MB \|", report)
    # toolwire over the bare relay, in the summary; paced streams, a row per body
    assert re.search(rf"^- {NUMBER} / {NUMBER} \(V1 / V2\), the upstream streaming event by event at 16 connections",
                     report, re.M)
    assert re.search(rf"^- {NUMBER} / {NUMBER} \(V1 / V2\), the upstream's events 5 ms apart at 64 connections "
                     rf"\(each event read alone\): toolwire {NUMBER} / {NUMBER} µs, the relay {NUMBER} / {NUMBER} µs; "
                     rf"{NUMBER} / {NUMBER} µs per event beyond the relay", report, re.M)
    for body in ("V1", "V2"):
        assert re.search(rf"^\| {body} \| {NUMBER}, {NUMBER} ms \| {NUMBER} µs \| {NUMBER}, {NUMBER} ms \| "
                         rf"{NUMBER} µs \| {NUMBER} \({NUMBER}\) \| {NUMBER} µs \| 0 \|$", report, re.M), body
    # long sessions: a row per history length, the core's cost per turn, the cache's memory
    assert re.search(r"\| added p50 latency, 1 connection, a session of 800\+ tool turns", report)
    for turns in (0, 50, 200, 800):
        assert re.search(rf"^\| {turns}-{turns + 7} \| {NUMBER} kB \| \d+ \| {NUMBER} kB \| {NUMBER} ms \| "
                         rf"{NUMBER} ms \| \*\*[-+]{NUMBER} ms\*\* \|", report, re.M), turns
        assert re.search(rf"^\| {turns} \| {NUMBER} kB \| {NUMBER} µs \|", report, re.M), turns
        # and with the caches evicted, against the shortest history
        assert re.search(rf"^\| {turns} \| {NUMBER} µs \| {NUMBER} µs \| {NUMBER} µs \| {NUMBER} µs \| "
                         rf"\*\*{NUMBER} µs\*\* \| [-+]{NUMBER} µs \|$", report, re.M), turns
    assert re.search(rf"\*\*{NUMBER} MB per session kept\*\*", report)
    # conversations continued by previous_response_id: a row per length (over HTTP, keeping none, over a
    # WebSocket), their memory
    assert re.search(r"\| added p50 latency, 1 connection, a conversation of 800\+ turns continued by", report)
    for turns in (0, 50, 200, 800):
        assert re.search(rf"^\| {turns} \| {NUMBER} MB \| {NUMBER} ms \| {NUMBER} ms \| \*\*[-+]{NUMBER} ms\*\* \| "
                         rf"[-+]{NUMBER} ms \| [-+]{NUMBER} ms \|$", report, re.M), turns
    assert re.search(rf"Memory after \d+ turns of one conversation: RSS {NUMBER} → {NUMBER} MB", report)
    assert re.search(rf"\*\*{NUMBER} µs\*\*", report)  # core cost figures
    for layer in ("reader", "relay", "batches", "translated", "encoded", "pump"):  # the stream path's layers
        assert re.search(rf"^\| `{layer}` \| {NUMBER} µs \| [-+]{NUMBER} µs \|", report, re.M), layer

    results = json.loads((work / "results.json").read_text())
    assert {case["body"] for case in results["load"]} == {"v1", "v2"}
    assert {case["connections"] for case in results["load"]} == {1, 16}
    assert {case["writes"] for case in results["load"]} == {"event", "answer"}
    for case in results["load"]:
        comparisons = [(case, "toolwire"), *([(case["scaled"], "toolwire")] if "scaled" in case else []),
                       *([(case["relay"], "relay")] if "relay" in case else [])]
        assert len(comparisons) == (3 if case["connections"] == 16 else 2), case.keys()
        for comparison, side in comparisons:
            for target in ("direct", side):
                figures = comparison[target]
                where = (case["writes"], case["body"], case["connections"], target)
                assert figures["requests"] > 0, where
                assert figures["errors"] == 0, (where, comparison["raw"])
                assert figures["p50_ms"] > 0 and figures["p99_ms"] >= figures["p50_ms"]
            assert comparison["throughput_ratio"] > 0
    for body in results["bodies"]:
        assert 1 <= body["gateway_text_deltas"] <= 40, body  # plain chunks read together are one delta
    for row in results["core"]["requests"]:
        assert row["parse_us"] > 0 and row["translate_us"] > 0
    for row in results["core"]["streams"]:
        assert row["feed_us_per_chunk"] > 0
    sessions = results["history"]
    assert [row["turns"] for row in sessions["rows"]] == [0, 50, 200, 800]
    for row in sessions["rows"]:
        for target in ("direct", "toolwire"):
            assert row[target]["requests"] > 0 and row[target]["errors"] == 0, (row["turns"], target)
    assert sessions["memory"]["entries"] == sessions["memory"]["sessions"] == 2
    assert sessions["memory"]["continued"] == 2  # each session's second request continued its first
    paced = results["paced"]
    assert [case["body"] for case in paced["cases"]] == ["v1", "v2"]
    for case in paced["cases"]:
        for side in ("toolwire", "relay"):
            assert case[side]["rps"] > 0 and case[side]["errors"] == 0 and case[side]["cpu_us"] > 0, (case, side)
        # paced: 64 streams of 43 steps of 5 ms each, at most (a stream cut short would be an error)
        assert case["toolwire"]["rps"] < 64 / (43 * 0.005) * 1.1, case
    memory = results["memory"]
    assert memory["opened"] == memory["streams"] > 0
    assert memory["with_streams_mb"] > memory["baseline_mb"] > 0
