"""The markdown report of a benchmark run, from the results dict of ``bench.run``.

Section titles are stable (``SECTIONS``; the CI smoke test looks for them), plus
``## Profile`` when the run was profiled. What follows ``KEPT_MARKER`` in the report
(sections other runs write, such as ``bench.hostile``'s) is kept when it is rewritten
(``with_kept_sections``).
"""

from __future__ import annotations

from typing import Any

from .chains import table as chains_table
from .paced import extra_per_event_us

SECTIONS = (
    "## Summary against the targets",
    "## Throughput and latency",
    "## Ratios",
    "## Paced streams",
    "## Core cost",
    "## Long sessions",
    "## Memory",
    "## Is the load generator the bottleneck?",
    "## Bodies",
)

KEPT_MARKER = "<!-- kept: the sections below come from other bench runs (bench.hostile, bench.answer_sizes, bench.connection_layer) -->"


def with_kept_sections(new: str, old: str) -> str:
    """``new``, followed by what followed ``KEPT_MARKER`` in ``old``."""
    if KEPT_MARKER not in old:
        return new
    return new.rstrip("\n") + "\n\n" + KEPT_MARKER + old.split(KEPT_MARKER, 1)[1]


ANCHOR = (
    "For comparison, LiteLLM's Responses bridge adds ~54 ms per request at one connection and "
    "reaches ~1 % of direct throughput at 16 connections (figures from the product issue, not measured here)."
)


def _ms(value: float) -> str:
    return f"{value:.3f} ms" if abs(value) < 10 else f"{value:.1f} ms"


def _signed_ms(value: float) -> str:
    return ("+" if value >= 0 else "-") + _ms(abs(value))


def _pct(value: float) -> str:
    return f"{100 * value:.1f} %"


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


WRITES = {
    "event": "upstream streams event by event",
    "answer": "upstream writes each answer at once",
}
"""How the canned upstream wrote its answers (``bench.run.UPSTREAM_WRITES``), as table labels."""


def _case(results: dict[str, Any], body: str, connections: int, writes: str) -> dict[str, Any]:
    return next(
        c for c in results["load"]
        if c["body"] == body and c["connections"] == connections and c["writes"] == writes
    )


def _process(comparison: dict[str, Any]) -> str:
    """The name the gateway's CPU figures are kept under (``bench.run`` watch names)."""
    return f"toolwire-w{comparison['workers']}" if "workers" in comparison else "toolwire"


def _comparisons(case: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(gateway label, comparison) for the one-worker gateway and the scaled one, if run."""
    out = [("toolwire", case)]
    if "scaled" in case:
        out.append((f"toolwire --workers {case['scaled']['workers']}", case["scaled"]))
    return out


def _measured(case: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(label, process, its figures, comparison) for each path measured against direct in
    ``case``: the gateways, then the bare relay (``bench.relay``), if it was measured."""
    out = [(label, _process(comparison), comparison["toolwire"], comparison) for label, comparison in _comparisons(case)]
    if "relay" in case:
        out.append(("relay", "relay", case["relay"]["relay"], case["relay"]))
    return out


def _interpreter_speed(machine: dict[str, Any]) -> str:
    loop_ms = machine.get("interpreter_loop_ms")  # runs before 2026-12-04 did not measure it
    if loop_ms is None:
        return ""
    return (
        f" The interpreter's speed before the run: a fixed loop of Python (a million additions of squares, "
        f"`bench.run.interpreter_loop_ms`) took **{loop_ms:g} ms**, best of 5 (smaller is faster; a quiet load "
        "average does not rule out a slow host: compare runs made at about the same speed)."
        + _memory_speed(machine)
    )


def _memory_speed(machine: dict[str, Any]) -> str:
    walk_ms = machine.get("memory_walk_ms")  # runs before 2026-12-06's evening did not measure it
    if walk_ms is None:
        return ""
    return (
        f" Its speed at memory-heavy work, which the loop does not show: parsing and freeing a fixed 3.7 MB JSON "
        f"document of 20,000 small items (`bench.run.memory_walk_ms`) took **{walk_ms:g} ms**, best of 5 (the "
        "long sessions move with it)."
    )


def render(results: dict[str, Any]) -> str:
    out: list[str] = []
    add = out.append
    machine = results["machine"]
    settings = results["settings"]
    targets = results["targets"]
    names = [body["name"] for body in results["bodies"]]
    labels = {body["name"]: f"{body['protocol']} ({body['fixture']})" for body in results["bodies"]}
    short = {body["name"]: body["protocol"] for body in results["bodies"]}

    add("# toolwire benchmark results")
    add("")
    add(f"Produced on {results['date']} in {results['seconds']:.0f} s by:")
    add("")
    add("```sh")
    add(results["command"])
    add("```")
    add("")
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items())
    add(
        f"Machine: **{machine['nproc']} CPUs** (`nproc`), {machine['cpu_model']}, {machine['memory']} RAM, "
        f"Linux {machine['kernel']}, Python {machine['python']}, {machine['wrk']}; {versions}. "
        f"toolwire at commit {machine['commit']}. Load average before the run: "
        f"{' '.join(machine['loadavg_before'])}. The machine is shared: figures move by several percent "
        "between runs; compare the ratios, which are measured side by side."
        + _interpreter_speed(machine)
    )
    add("")
    add(
        f"Settings: `wrk -t1 --latency`, {settings['duration_s']:g} s per run, {settings['repeat']} "
        f"round(s) per case (each target once, direct included), run back to back with the order alternating; "
        "medians of the runs. "
        f"{settings['warmup_s']:g} s of warm-up per target and case. Gateway: "
        f"`python {' '.join(settings['gateway_command'])} --upstream URL --host 127.0.0.1 --port PORT"
        f"{' ' + ' '.join(settings['gateway_flags']) if settings['gateway_flags'] else ''}` (its defaults: one "
        "worker process)"
        + (f"; at 16 connections also the same with `--workers {settings['scale_workers']}`"
           if settings.get("scale_workers") else "")
        + (", and the bare relay (`python -m bench.relay`: uvicorn + aiohttp, one process, no translation)"
           if any("relay" in case for case in results["load"]) else "")
        + ". The canned upstream is one process on one core; it answers each request with a role chunk, 40 text "
        "chunks, a `finish_reason` chunk, a usage chunk and `data: [DONE]`, either writing each SSE event on its "
        "own, as a model server streams tokens (*streams event by event*), or writing the whole answer at once, "
        "the cheapest upstream there can be (*writes each answer at once*). Both are measured."
        + (" **Quick smoke run: not a measurement.**" if settings["quick"] else "")
    )
    add("")
    if results.get("history"):
        add("The gateway keeps the histories of recent conversations (`--history-cache-bytes`): wrk resends one "
            "body, so from its second request on the gateway continues the history the first one taught it, with "
            "nothing new to parse or translate. Sessions that grow by a turn per request, as Codex sends them, are "
            "measured under Long sessions.")
        add("")

    # ------------------------------------------------------------------ summary
    add("## Summary against the targets")
    add("")
    add(_row(["figure", *[short[n] for n in names], "target", "verdict"]))
    add(_row(["---", *["---:" for _ in names], "---:", "---"]))
    writes_run = [w for w in WRITES if any(c["writes"] == w for c in results["load"])]
    for writes in writes_run:
        added = [_case(results, n, 1, writes)["added_p50_ms"] for n in names]
        add(_row([f"added p50 latency, 1 connection ({WRITES[writes]})", *[_signed_ms(v) for v in added],
                  f"≤ {targets['added_p50_ms']:g} ms", _verdict(all(v <= targets["added_p50_ms"] for v in added))]))
        for label, _ in _comparisons(_case(results, names[0], 16, writes)):
            ratios = [dict(_comparisons(_case(results, n, 16, writes)))[label]["throughput_ratio"] for n in names]
            add(_row([f"throughput at 16 connections, {label} ÷ direct ({WRITES[writes]})",
                      *[_pct(v) for v in ratios], f"≥ {100 * targets['throughput_ratio']:g} %",
                      _verdict(all(v >= targets["throughput_ratio"] for v in ratios))]))
    sessions = results.get("history")
    session_row = next((row for row in sessions["rows"] if row["turns"] == 800), None) if sessions else None
    if session_row is not None:
        target = targets.get("session_added_p50_ms", 3.0)
        add(_row([f"added p50 latency, 1 connection, a session of 800+ tool turns "
                  f"({session_row['body_bytes'] / 1e6:.2f} MB; upstream streams event by event)",
                  *([_signed_ms(session_row["added_p50_ms"])] + [""] * (len(names) - 1)),
                  f"≤ {target:g} ms", _verdict(session_row["added_p50_ms"] <= target)]))
    chains = results.get("chains")
    chain_row = next((row for row in chains["rows"] if row["turns"] == 800), None) if chains else None
    if chain_row is not None:
        target = targets.get("session_added_p50_ms", 3.0)
        add(_row([f"added p50 latency, 1 connection, a conversation of 800+ turns continued by "
                  f"`previous_response_id` ({chain_row['direct_body_bytes'] / 1e6:.2f} MB of Chat; upstream streams "
                  "event by event)",
                  *([_signed_ms(chain_row["added_p50_ms"])] + [""] * (len(names) - 1)),
                  f"≤ {target:g} ms", _verdict(chain_row["added_p50_ms"] <= target)]))
    first_rows = [row for row in sessions["rows"] if row["turns"] == 0 and "uncached" in row] if sessions else []
    if first_rows:
        first = first_rows[0]
        target = targets["added_p50_ms"]
        add(_row([f"added p50 latency, 1 connection, a request the gateway knows nothing of (a session of "
                  f"0-15 tool turns, {first['body_bytes'] / 1000:.0f} kB, `--history-cache-bytes 0`; upstream "
                  "streams event by event)",
                  *([_signed_ms(first["uncached_added_p50_ms"])] + [""] * (len(names) - 1)),
                  f"≤ {target:g} ms", _verdict(first["uncached_added_p50_ms"] <= target)]))
    memory = results["memory"]
    rss = memory["with_streams_mb"]
    add(_row([f"gateway RSS with {memory['streams']} open streams (half of each body)",
              *([f"{rss:.1f} MB"] + [""] * (len(names) - 1)),
              f"≤ {targets['rss_mb']:g} MB" + ("" if memory["streams"] >= 500 else " (at 500)"),
              _verdict(rss <= targets["rss_mb"]) + ("" if memory["streams"] >= 500 else " (fewer streams)")]))
    add("")
    for writes in writes_run:
        for n in names:
            c1, c16 = _case(results, n, 1, writes), _case(results, n, 16, writes)
            scaled = (f", toolwire --workers {c16['scaled']['workers']} {c16['scaled']['toolwire']['rps']:.0f}"
                      if "scaled" in c16 else "")
            add(
                f"- {labels[n]}, {WRITES[writes]}: direct {c1['direct']['rps']:.0f} / toolwire "
                f"{c1['toolwire']['rps']:.0f} req/s at 1 connection (p50 {_ms(c1['direct']['p50_ms'])} / "
                f"{_ms(c1['toolwire']['p50_ms'])}); direct {c16['direct']['rps']:.0f} / toolwire "
                f"{c16['toolwire']['rps']:.0f}{scaled} req/s at 16."
            )
    add("")
    relay_writes = [w for w in writes_run if all("relay" in _case(results, n, 16, w) for n in names)]
    if relay_writes:
        add("The floor of a Python gateway on toolwire's stack, measured alongside (`bench/relay.py`):")
        add("")
    for writes in relay_writes:
        cases = [_case(results, n, 16, writes) for n in names]
        add(
            f"- bare relay, {WRITES[writes]}: "
            + " / ".join(_pct(c["relay"]["throughput_ratio"]) for c in cases)
            + f" of direct throughput at 16 connections ({' / '.join(short[n] for n in names)}), "
            + " / ".join(f"{c['relay']['relay_cpu_us']:.0f}" for c in cases)
            + " µs of CPU per request against toolwire's "
            + " / ".join(f"{c['toolwire_cpu_us']:.0f}" for c in cases)
            + " µs: what uvicorn + aiohttp cost with no translation at all."
        )
    for writes in [w for w in writes_run if all("relay" in _case(results, n, 1, w) for n in names)]:
        cases = [_case(results, n, 1, writes) for n in names]
        add(
            f"- bare relay at 1 connection, {WRITES[writes]}: "
            + " / ".join(_signed_ms(c["relay"]["added_p50_ms"]) for c in cases)
            + f" added p50 ({' / '.join(short[n] for n in names)}) against toolwire's "
            + " / ".join(_signed_ms(c["added_p50_ms"]) for c in cases)
            + ": the part of the one-connection latency that uvicorn + aiohttp take before any translation."
        )
    if relay_writes:
        add("")
    _over_the_relay(add, results, names, short)
    add(ANCHOR)
    add("")

    # ------------------------------------------------------------------ load
    add("## Throughput and latency")
    add("")
    add("`direct`: wrk POSTs the Chat Completions body toolwire itself sends upstream for this request to the "
        "canned upstream. `toolwire`: wrk POSTs the Codex body, with Codex's headers, to `toolwire serve` in "
        "front of the same upstream. `relay`: wrk POSTs the Codex body to the bare relay, which "
        "drops it, sends the same pre-translated Chat body upstream and passes the upstream's bytes back "
        "unchanged. Latency is wrk's: request sent → whole stream received. Every response is "
        "checked (status 200 and the stream's end: `data: [DONE]` / `response.completed`); `errors` counts "
        "socket errors, timeouts and failed checks. CPU: % of one core used during the run, per process "
        "(gateway: toolwire or the relay).")
    add("")
    add(_row(["upstream", "body", "connections", "path", "requests/s", "p50", "p90", "p99", "errors",
              "CPU wrk / upstream / gateway"]))
    add(_row(["---", "---", "---:", "---", "---:", "---:", "---:", "---:", "---:", "---:"]))
    for case in results["load"]:
        rows: list[tuple[str, dict[str, Any], str | None]] = [("direct", case["direct"], None)]
        rows += [(label, figures, process) for label, process, figures, _ in _measured(case)]
        for path, figures, process in rows:
            cpu = figures["cpu"]
            gateway_cpu = cpu.get(process, 0) if process else 0
            add(_row([
                WRITES[case["writes"]], short[case["body"]], case["connections"], f"`{path}`",
                f"{figures['rps']:.0f}", _ms(figures["p50_ms"]), _ms(figures["p90_ms"]), _ms(figures["p99_ms"]),
                figures["errors"],
                f"{cpu.get('wrk', 0):.0f} % / {cpu.get('upstream', 0):.0f} % / {gateway_cpu:.0f} %",
            ]))
    add("")
    add("## Ratios")
    add("")
    add("Each gateway (and the bare relay) ÷ direct, from the runs above (medians); per pair: each direct run "
        "and the gateway's run right after or before it.")
    add("")
    add(_row(["upstream", "body", "connections", "gateway", "throughput ÷ direct", "added p50", "added p99",
              "per-pair throughput ratios", "per-pair added p50"]))
    add(_row(["---", "---", "---:", "---", "---:", "---:", "---:", "---", "---"]))
    for case in results["load"]:
        for label, _, _, comparison in _measured(case):
            add(_row([
                WRITES[case["writes"]], short[case["body"]], case["connections"], f"`{label}`",
                _pct(comparison["throughput_ratio"]), _signed_ms(comparison["added_p50_ms"]),
                _signed_ms(comparison["added_p99_ms"]),
                ", ".join(_pct(v) for v in comparison["pair_ratios"]),
                ", ".join(_signed_ms(v) for v in comparison["pair_added_p50_ms"]),
            ]))
    add("")
    add("CPU time per request, which depends little on what else the machine is running: the upstream's in "
        "the direct runs, the gateway's in its own runs (all its processes; its upstream adds the direct "
        "figure again). Their ratio is the throughput ratio the two would reach with one dedicated core each. "
        "The relay's figure is what uvicorn + aiohttp cost with no translation at all; what toolwire uses "
        "beyond it is its own work.")
    add("")
    add(_row(["upstream", "body", "connections", "gateway", "upstream CPU per request (direct)",
              "gateway CPU per request", "upstream ÷ gateway"]))
    add(_row(["---", "---", "---:", "---", "---:", "---:", "---:"]))
    for case in results["load"]:
        for label, process, figures, comparison in _measured(case):
            up, tw = comparison["upstream_cpu_us"], figures["cpu_us_per_request"][process]
            add(_row([WRITES[case["writes"]], short[case["body"]], case["connections"], f"`{label}`",
                      f"{up:.0f} µs", f"{tw:.0f} µs", _pct(up / tw) if tw else "-"]))
    add("")

    _paced_streams(add, results, short)

    # ------------------------------------------------------------------ core
    add("## Core cost")
    add("")
    add("The pure core in this process, no I/O (`python -m bench.core`); medians of "
        f"{results['core']['requests'][0]['iterations']} (requests) and "
        f"{results['core']['streams'][0]['iterations']} (streams) iterations, `time.perf_counter_ns`.")
    add("")
    add("Per request:")
    add("")
    add(_row(["body", "Codex body → Chat body", "`parse_request`", "`translate_request`", "`orjson.dumps(chat)`",
              "all three"]))
    add(_row(["---", "---:", "---:", "---:", "---:", "---:"]))
    for row in results["core"]["requests"]:
        add(_row([
            short[row["body"]], f"{row['body_bytes'] / 1000:.1f} kB → {row['chat_bytes'] / 1000:.1f} kB",
            f"{row['parse_us']:.0f} µs", f"{row['translate_us']:.0f} µs", f"{row['dumps_us']:.0f} µs",
            f"**{row['total_us']:.0f} µs**",
        ]))
    add("")
    add("Per upstream stream chunk (`feed`: `ChatStreamTranslator.feed` alone; pipeline: `orjson.loads` of the "
        "chunk + `feed` + `orjson.dumps` and `encode_event` of each event, i.e. bytes in to bytes out):")
    add("")
    add(_row(["body", "reply", "chunks → events", "`feed` per chunk", "pipeline per chunk", "`start` + `finish`"]))
    add(_row(["---", "---", "---:", "---:", "---:", "---:"]))
    for row in results["core"]["streams"]:
        add(_row([
            short[row["body"]], row["reply"], f"{row['chunks']} → {row['events']}",
            f"**{row['feed_us_per_chunk']:.2f} µs**", f"{row['pipeline_us_per_chunk']:.2f} µs",
            f"{row['start_finish_us']:.0f} µs",
        ]))
    add("")
    if results["core"].get("stream_path"):
        add("A streamed answer through the gateway's layers (`python -m bench.stream_path`): the canned text answer "
            "fed to a real `aiohttp.StreamReader` one event per loop iteration, each row adding one layer of what "
            "the gateway does with it, the sockets left out (CPU per stream, minimum over rounds):")
        add("")
        add(_row(["layer", "CPU per stream", "added by the layer", "over"]))
        add(_row(["---", "---:", "---:", "---"]))
        for row in results["core"]["stream_path"]:
            add(_row([f"`{row['layer']}`", f"{row['us_per_stream']:.0f} µs", f"{row['added_us']:+.0f} µs",
                      f"`{row['over']}`" if row["over"] else ""]))
        add("")

    # ------------------------------------------------------------------ long sessions
    if sessions:
        _long_sessions(add, results)

    # ------------------------------------------------------------------ memory
    add("## Memory")
    add("")
    add(
        f"A fresh `toolwire serve` in front of the canned upstream in `--hold` mode (it sends the head and the "
        f"first two chunks of each stream, then waits). `python -m bench.hold` opens {memory['streams']} "
        "streaming requests at once (the two bodies in turn) and waits until each has received its first "
        "`response.output_text.delta`; then the gateway's `VmRSS` is read from `/proc/<pid>/status` "
        f"({memory['opened']} of {memory['streams']} open after {memory['open_seconds']:.1f} s)."
    )
    add("")
    add(_row(["gateway", "RSS"]))
    add(_row(["---", "---:"]))
    add(_row(["at start, idle", f"{memory['baseline_mb']:.1f} MB"]))
    add(_row([f"**with {memory['streams']} open streams**", f"**{memory['with_streams_mb']:.1f} MB**"]))
    add(_row(["per open stream", f"{memory['per_stream_kb']:.0f} kB"]))
    add(_row(["after the streams closed", f"{memory['after_close_mb']:.1f} MB"]))
    add(_row(["peak (`VmHWM`)", f"{memory['peak_mb']:.1f} MB"]))
    after_load = memory["gateway_after_load"]
    add(_row(["the load-test gateway after all wrk runs (RSS / peak)",
              f"{after_load['rss_mb']:.1f} / {after_load['peak_mb']:.1f} MB"]))
    add(_row(["(the canned upstream holding the streams)", f"{memory['upstream_mb']:.1f} MB"]))
    add("")

    # ------------------------------------------------------------------ load generator
    add("## Is the load generator the bottleneck?")
    add("")
    for writes in writes_run:
        for n in names:
            c16 = _case(results, n, 16, writes)
            direct, through = c16["direct"], c16["toolwire"]
            factor = direct["rps"] / through["rps"] if through["rps"] else float("inf")
            add(
                f"- {short[n]}, {WRITES[writes]}, 16 connections: the same single wrk thread drove the direct "
                f"upstream at {direct['rps']:.0f} req/s ({factor:.1f}x toolwire's {through['rps']:.0f}), using "
                f"{direct['cpu'].get('wrk', 0):.0f} % of a core. Through toolwire, wrk used "
                f"{through['cpu'].get('wrk', 0):.0f} % and the upstream {through['cpu'].get('upstream', 0):.0f} %, "
                f"while toolwire used {through['cpu'].get('toolwire', 0):.0f} %."
            )
    add("")
    busiest = min(_case(results, n, 16, w)["toolwire"]["cpu"].get("toolwire", 0) for n in names for w in writes_run)
    if busiest >= 80:
        add("wrk and the upstream have headroom during the toolwire runs; the gateway process is the one at (or "
            "near) a full core, so the toolwire figures measure toolwire.")
    else:
        add("wrk and the upstream have headroom during the toolwire runs. toolwire itself used less than a full "
            "core in some runs: other work on this shared machine competed for the CPUs (load average "
            f"{' '.join(machine['loadavg_before'])} before the run, {' '.join(machine.get('loadavg_after', []))} "
            "after). Its requests/s and latencies are then lower than on an idle machine; its CPU time per request "
            "(table under Ratios) is the figure that does not depend on that.")
    add("")

    # ------------------------------------------------------------------ bodies
    add("## Bodies")
    add("")
    add("Built by `bench/bodies.py` from the captured Codex 0.169.0 requests: placeholders padded back to the "
        "real size (SIZES.md), then the tool rounds of the turn repeated with fresh ids. `stream: true`. "
        "toolwire's answer is the one it gave the check request before the load; text chunks that came in "
        "one read go out as one text delta, so how many there are depends on how the reads fell.")
    add("")
    add(_row(["body", "fixture", "real capture", "padded fixture", "benchmark body", "input items", "tool rounds",
              "Chat body upstream", "toolwire's answer"]))
    add(_row(["---", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---"]))
    for body in results["bodies"]:
        add(_row([
            body["protocol"], f"`{body['fixture']}`", f"{body['real_size']} B", f"{body['padded_size']} B",
            f"{body['size']} B", body["items"], body["tool_rounds"], f"{body['chat_size']} B",
            f"{body['gateway_events']} events ({body['gateway_text_deltas']} text deltas), "
            f"{body['gateway_response_bytes']} B",
        ]))
    add("")
    flags = settings.get("upstream_flags", [])
    reply = ("one tool call whose arguments arrive in 40 chunks" if "tool" in flags
             else "40 text chunks")
    add(f"The canned upstream's answer (both paths): a role chunk, {reply}, a `finish_reason` chunk, a usage "
        f"chunk and `data: [DONE]` (`python -m bench.upstream {' '.join(flags)} [--write-per-event]`; see "
        "`python -m bench.upstream --help`).")
    add("")

    # ------------------------------------------------------------------ profile
    if results.get("profiles"):
        add("## Profile")
        add("")
        add("py-spy (sampling, Python frames) on the gateway during an extra 16-connection run per body, not "
            "counted above. Self: samples where the function itself was running; total: samples with the "
            "function anywhere on the stack.")
        add("")
        for profile in results["profiles"]:
            add(f"### {short[profile['body']]}: {profile['samples']} samples, {profile['rps']:.0f} req/s "
                f"under py-spy")
            add("")
            add(_row(["stage (each sample counted once, at its innermost stage)", "share"]))
            add(_row(["---", "---:"]))
            for name, share in profile.get("stages", []):
                add(_row([name, _pct(share)]))
            add("")
            add(_row(["by package (self)", "share"]))
            add(_row(["---", "---:"]))
            for name, share in profile["packages"][:12]:
                add(_row([f"`{name}`", _pct(share)]))
            add("")
            add(_row(["function (self)", "share"]))
            add(_row(["---", "---:"]))
            for name, share in profile["self"][:15]:
                add(_row([f"`{name}`", _pct(share)]))
            add("")
            add(_row(["function (total)", "share"]))
            add(_row(["---", "---:"]))
            for name, share in profile["total"][:20]:
                add(_row([f"`{name}`", _pct(share)]))
            add("")
            add(f"Flame graph: `{profile['svg']}`; collapsed stacks: `{profile['raw']}`.")
            add("")
    return "\n".join(out).rstrip() + "\n"


def _long_sessions(add: Any, results: dict[str, Any]) -> None:
    """The section ``## Long sessions``: added latency against history length, the core's
    cost per turn, the history cache's memory (``bench.history``, ``bench.core``)."""
    sessions = results["history"]
    turns = sessions["turns_per_series"]
    add("## Long sessions")
    add("")
    add(
        "Codex sends the whole conversation with every request (`store: false`). For each history length, wrk at "
        f"one connection sends the {turns} requests of one Codex session growing by one tool turn per request "
        "(`bench/bodies.py` `session_series`: the captured `gpt-5.4` session, each turn a reasoning item, two calls "
        "and their outputs, ~1.7 kB), in order, over and over; `direct` sends the Chat bodies toolwire sends for "
        "the same requests to the same upstream (streaming event by event); the bare relay (`bench/relay.py`) takes "
        "the same Codex bodies and sends the Chat body of the series' middle request: what moving that many bytes "
        "through uvicorn and aiohttp costs with no translation. Each pass starts the session over, "
        f"so 1 request in {turns} has no history the gateway knows: p50 is a turn that continues its session, p99 "
        f"includes the fresh starts. {sessions['duration_s']:g} s per run, {sessions['repeat']} pair(s) of runs "
        "per length, medians (`python -m bench.history` runs this part alone)."
    )
    add("")
    add(_row(["history (tool turns)", "Codex body", "input items", "Chat body", "direct p50", "toolwire p50",
              "added p50", "per-pair added p50", "toolwire p99", "toolwire CPU per request", "relay added p50",
              "relay CPU per request", "nothing kept: added p50", "nothing kept: CPU per request"]))
    add(_row(["---:", "---:", "---:", "---:", "---:", "---:", "---:", "---", "---:", "---:", "---:", "---:",
              "---:", "---:"]))
    for row in sessions["rows"]:
        add(_row([
            f"{row['turns']}-{row['turns'] + row['requests_in_series'] - 1}", f"{row['body_bytes'] / 1000:.0f} kB",
            f"{row['items']:.0f}", f"{row['chat_bytes'] / 1000:.0f} kB", _ms(row["direct"]["p50_ms"]),
            _ms(row["toolwire"]["p50_ms"]), f"**{_signed_ms(row['added_p50_ms'])}**",
            ", ".join(_signed_ms(v) for v in row["pair_added_p50_ms"]), _ms(row["toolwire"]["p99_ms"]),
            f"{row['toolwire']['cpu_us_per_request']:.0f} µs", _signed_ms(row["relay_added_p50_ms"]),
            f"{row['relay']['cpu_us_per_request']:.0f} µs",
            _signed_ms(row["uncached_added_p50_ms"]) if "uncached" in row else "",
            f"{row['uncached']['cpu_us_per_request']:.0f} µs" if "uncached" in row else "",
        ]))
    add("")
    add("*Nothing kept*: a gateway started with `--history-cache-bytes 0`, which parses and translates every "
        "body whole: what each request costs when the gateway knows nothing of it (a session's first request, "
        "or every request of a client that writes its JSON otherwise than orjson).")
    add("")
    core_rows = results["core"].get("history", [])
    if core_rows:
        add("The core's cost per turn, in this process (`python -m bench.core`): each request continuing the one "
            "before it (parse, translate and serialize only what is new, after comparing the known history's "
            "bytes), against the same request whole (the first of a session, or with `--history-cache-bytes 0`); "
            "medians.")
        add("")
        add(_row(["history (tool turns)", "Codex body", "per turn: parse", "translate", "serialize", "**total**",
                  "whole: parse", "translate", "serialize", "**total**"]))
        add(_row(["---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:"]))
        for row in core_rows:
            add(_row([
                row["turns"], f"{row['body_bytes'] / 1000:.0f} kB", f"{row['parse_us']:.0f} µs",
                f"{row['translate_us']:.0f} µs", f"{row['serialize_us']:.0f} µs", f"**{row['total_us']:.0f} µs**",
                f"{row['whole_parse_us']:.0f} µs", f"{row['whole_translate_us']:.0f} µs",
                f"{row['whole_serialize_us']:.0f} µs", f"**{row['whole_total_us']:.0f} µs**",
            ]))
        add("")
        if "cold_total_us" in core_rows[0]:
            add("The same continuing requests with the processor's caches evicted before each (`bench.core."
                "evict_caches`), what grows with the history when nothing is in cache: each pass over the "
                "history's items or bytes. An upper bound: a served turn finds some of it in cache (inside a "
                "serving gateway an 800-turn turn's parse and translation took 264 and 250 µs on 2026-12-06).")
            add("")
            add(_row(["history (tool turns)", "cold: parse", "translate", "serialize", "freeing the request",
                      "**total**", "over the same at 0 turns"]))
            add(_row(["---:", "---:", "---:", "---:", "---:", "---:", "---:"]))
            for row in core_rows:
                add(_row([
                    row["turns"], f"{row['cold_parse_us']:.0f} µs", f"{row['cold_translate_us']:.0f} µs",
                    f"{row['cold_serialize_us']:.0f} µs", f"{row['cold_free_us']:.0f} µs",
                    f"**{row['cold_total_us']:.0f} µs**",
                    f"{row['cold_total_us'] - core_rows[0]['cold_total_us']:+.0f} µs",
                ]))
            add("")
    memory = sessions["memory"]
    add(
        f"The history cache's memory: a fresh gateway, then {memory['sessions']} different sessions of "
        f"{memory['turns']} turns ({memory['body_bytes'] / 1e6:.2f} MB each), two requests each (the second "
        f"continues the first): RSS {memory['baseline_mb']:.1f} → {memory['after_mb']:.1f} MB, "
        f"**{memory['per_session_mb']:.1f} MB per session kept**; the cache's own estimate (`/metrics` "
        f"`toolwire_history_cache_bytes`) {memory['estimated_mb']:.1f} MB in {memory['entries']:.0f} entries. "
        "It keeps at most `--history-cache-bytes` (128 MiB by default) of such estimates."
    )
    add("")
    chains = results.get("chains")
    if chains:
        add("**Conversations continued by `previous_response_id`** (`bench/chains.py`; alone: `python -m "
            "bench.chains`). The openai SDK's way to hold a conversation (`store` is true by default; Codex does the "
            "same over its WebSocket): each request sends only its new input, a 1 kB user message here, and names "
            "the response it continues; the gateway (store: "
            f"`{chains['store']}`) puts the rest in front of it. For each length, {chains['turns_timed']} turns more, "
            "each continuing the one before, timed one by one at one connection (httpx, the whole stream read); "
            "`direct` posts a Chat body of the same conversation to the same upstream as many times. *Keeping no "
            "conversation*: a gateway with `--history-cache-bytes 0`, which reads the whole conversation from its "
            "store, parses and translates it on every turn. *Over a WebSocket*: the same conversation as Codex's "
            "built-in provider holds it, on one connection to the first gateway, `store: false`, each turn "
            "continuing the connection's own last response (the `websockets` client reading each event as text).")
        add("")
        add(chains_table(chains))
        add("")


def _over_the_relay(add: Any, results: dict[str, Any], names: list[str], short: dict[str, str]) -> None:
    """The summary's lines on toolwire's CPU per request over the bare relay's: figures with
    no target, which measure toolwire's own work rather than the machine's speed."""
    load = [c for c in (_case(results, n, 16, "event") for n in names) if "relay" in c]
    paced = results.get("paced")
    if not load and not paced:
        return
    add("What toolwire costs over the bare relay, in CPU per request (no target is set on these; they measure "
        "toolwire's own work, where the ratios to direct move with the machine's speed):")
    add("")
    bodies = " / ".join(short[n] for n in names)
    if len(load) == len(names):
        ratios = " / ".join(f"{case['toolwire_cpu_us'] / case['relay']['relay_cpu_us']:.2f}" for case in load)
        add(f"- {ratios} ({bodies}), the upstream streaming event by event at 16 connections (most of an answer "
            "read at once).")
    if paced:
        cases = {case["body"]: case for case in paced["cases"]}
        shown = [cases[n] for n in names if n in cases]
        ratios = " / ".join(f"{case['cpu_ratio']:.2f}" for case in shown)
        add(f"- {ratios} ({bodies}), the upstream's events "
            f"{paced['pace_ms']:g} ms apart at {paced['connections']} connections (each event read alone): "
            "toolwire " + " / ".join(f"{case['toolwire']['cpu_us']:.0f}" for case in shown)
            + " µs, the relay " + " / ".join(f"{case['relay']['cpu_us']:.0f}" for case in shown)
            + " µs; " + " / ".join(f"{extra_per_event_us(case):+.1f}" for case in shown)
            + " µs per event beyond the relay (see Paced streams).")
    add("")


def _paced_streams(add: Any, results: dict[str, Any], short: dict[str, str]) -> None:
    paced = results.get("paced")
    if not paced:
        return
    add("## Paced streams")
    add("")
    add(f"The canned upstream writes each event of an answer {paced['pace_ms']:g} ms after the one before, as a "
        f"model generating 200 tokens a second does, so every event is read alone; toolwire and the bare relay "
        f"each in front of it at {paced['connections']} connections, in turn, the order alternating "
        "(`bench/paced.py`). The requests per second are set by the pace; the CPU per request is the figure to "
        "read. Beyond the relay, per event: the difference of the two, spread over the answer's "
        f"{paced['events']} events (the request's own share included).")
    add("")
    add(_row(["body", "toolwire: requests/s, p50", "CPU per request", "relay: requests/s, p50", "CPU per request",
              "toolwire ÷ relay (per round)", "beyond the relay, per event", "errors"]))
    add(_row(["---", "---:", "---:", "---:", "---:", "---", "---:", "---:"]))
    for case in paced["cases"]:
        mine, theirs = case["toolwire"], case["relay"]
        add(_row([
            short[case["body"]], f"{mine['rps']:.0f}, {_ms(mine['p50_ms'])}", f"{mine['cpu_us']:.0f} µs",
            f"{theirs['rps']:.0f}, {_ms(theirs['p50_ms'])}", f"{theirs['cpu_us']:.0f} µs",
            f"{case['cpu_ratio']:.2f} ({', '.join(f'{r:.2f}' for r in case['round_ratios'])})",
            f"{extra_per_event_us(case):+.1f} µs", mine["errors"] + theirs["errors"],
        ]))
    add("")
