"""Long sessions: added latency against history length, and the history cache's memory.

    python -m bench.history [--quick] [--lengths 0,50,200,800] [--turns 16] [--duration 5] [--repeat 2]

Codex sends its whole conversation with every request (``store: false``). For each
history length H, wrk at one connection sends the requests of one session growing from
H to H + turns - 1 tool turns (``bodies.session_series``: each request is the one before
plus a turn), in order, over and over; ``direct`` sends the Chat bodies toolwire sends
for the same requests to the same upstream (which streams event by event), and the bare
relay (``bench.relay``) takes the same Codex bodies and sends the Chat body of the
series' middle request: what moving that many bytes through uvicorn and aiohttp costs
with no translation. The added p50 is a path's p50 minus direct's, run by run as in
``bench.run``. A pass over the
series starts the session over, so 1 request in ``turns`` has no known history: the p50
is the cost of a turn that continues its session, the p99 includes the fresh starts.

Beside them, unless ``--no-history-uncached``, a gateway keeping no history
(``--history-cache-bytes 0``, every request parsed and translated whole): what the
cache buys, side by side.

Then the memory of the history cache: a fresh gateway gets ``--sessions`` different
sessions of 800 turns (two turns each, so that each keeps its history and its saved
translation); its RSS before and after, and the cache's own estimate (``/metrics``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import re
import statistics
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

from . import log, procs, wrk
from .bodies import Body, session_series
from .relay import BODY_HEADER

LENGTHS = (0, 50, 200, 800)
MEMORY_TURNS = 800


def chat_of(body: Body) -> bytes:
    """The Chat body toolwire sends upstream for ``body`` (translated whole, no history)."""
    from toolwire.protocol import parse_request
    from toolwire.translate import translate_request

    return orjson.dumps(translate_request(parse_request(orjson.loads(body.data))).chat)


def write_series(work: Path, length: int, turns: int, *, store: bool = False) -> dict[str, Any]:
    """The bodies of one growing session from ``length`` turns, and their Chat bodies, as files;
    ``store``: with ``"store": true`` where Codex writes false (a client that leaves the API's
    default and resends its history: the gateway stores every response)."""
    folder = work / "bodies" / f"session-{length}"
    folder.mkdir(parents=True, exist_ok=True)
    bodies = session_series(length, turns)
    if store:
        bodies = [store_requested(body) for body in bodies]
    paths, chat_paths = [], []
    for body in bodies:
        path = folder / f"{body.name}.json"
        path.write_bytes(body.data)
        chat_path = folder / f"{body.name}.chat.json"
        chat_path.write_bytes(chat_of(body))
        paths.append(path)
        chat_paths.append(chat_path)
    return {
        "turns": length,
        "requests": len(bodies),
        "headers": bodies[0].headers,
        "paths": paths,
        "chat_paths": chat_paths,
        "body_bytes": [body.size for body in bodies],
        "items": [body.items for body in bodies],
        "chat_bytes": [path.stat().st_size for path in chat_paths],
    }


def store_requested(body: Body) -> Body:
    """``body`` asking for its response to be stored (Codex's bodies say ``"store":false``)."""
    if body.data.count(b'"store":false') != 1:
        raise ValueError(f"{body.name}: not one store:false to turn into store:true")
    return dataclasses.replace(body, data=body.data.replace(b'"store":false', b'"store":true'))


def _figures(runs: list[wrk.WrkResult], process: str) -> dict[str, Any]:
    def median(key: str) -> float:
        return float(statistics.median(getattr(run, key) for run in runs))

    return {
        "runs": len(runs),
        "requests": sum(run.requests for run in runs),
        "rps": median("rps"),
        "p50_ms": median("p50_ms"),
        "p90_ms": median("p90_ms"),
        "p99_ms": median("p99_ms"),
        "errors": sum(run.errors for run in runs),
        "cpu_us_per_request": float(statistics.median(run.cpu_us_per_request.get(process, 0.0) for run in runs)),
    }


def latency_runs(
    args: argparse.Namespace,
    work: Path,
    series: list[dict[str, Any]],
    upstream: procs.Service,
    gateway: procs.Service,
    relay: procs.Service,
    uncached: procs.Service | None = None,
) -> list[dict[str, Any]]:
    """Direct, toolwire and the relay at one connection for each series, ``args.repeat``
    rounds each; and ``uncached``, a gateway keeping no history, when given."""
    watch = {"upstream": upstream.pid, "toolwire": gateway.pid, "relay": relay.pid}
    if uncached is not None:
        watch["toolwire-uncached"] = uncached.pid
    rows = []
    for case in series:
        length = case["turns"]
        relay_script = wrk.write_sequence_script(
            work / f"relay-session-{length}.lua", case["paths"],
            {**case["headers"], "Content-Type": "application/json", BODY_HEADER: relay_body_name(length)},
            wrk.UPSTREAM_MARKER,
        )
        direct_script = wrk.write_sequence_script(
            work / f"direct-session-{length}.lua", case["chat_paths"],
            {"Content-Type": "application/json", "Accept": "text/event-stream"}, wrk.UPSTREAM_MARKER,
        )
        gateway_script = wrk.write_sequence_script(
            work / f"toolwire-session-{length}.lua", case["paths"],
            {**case["headers"], "Content-Type": "application/json"}, wrk.GATEWAY_MARKER,
        )
        targets = {
            "direct": (upstream.url + "/v1/chat/completions", direct_script),
            "toolwire": (gateway.url + "/v1/responses", gateway_script),
            "relay": (relay.url + "/v1/responses", relay_script),
        }
        if uncached is not None:
            targets["toolwire-uncached"] = (uncached.url + "/v1/responses", gateway_script)
        if args.warmup > 0:
            for name, (url, script) in targets.items():
                wrk.run(url, script, target=name, connections=1, duration=max(1, round(args.warmup)),
                        output_path=work / "wrk" / f"warmup-session-{length}-{name}.txt")
        runs: dict[str, list[wrk.WrkResult]] = {name: [] for name in targets}
        for repeat in range(args.repeat):
            for name in list(targets) if repeat % 2 == 0 else list(targets)[::-1]:
                url, script = targets[name]
                result = wrk.run(
                    url, script, target=name, connections=1, duration=args.duration,
                    output_path=work / "wrk" / f"session-{length}-{name}-r{repeat}.txt",
                    watch=watch, cpu_seconds=procs.cpu_seconds,
                )
                runs[name].append(result)
                log(f"session {length}+ turns {name:8s} #{repeat + 1}: {result.rps:6.0f} req/s, p50 "
                     f"{result.p50_ms:.3f} ms, p99 {result.p99_ms:.3f} ms, errors {result.errors}")
        pairs = list(zip(runs["direct"], runs["toolwire"], strict=True))
        direct, through = _figures(runs["direct"], "upstream"), _figures(runs["toolwire"], "toolwire")
        relayed = _figures(runs["relay"], "relay")
        if uncached is not None:
            without = _figures(runs["toolwire-uncached"], "toolwire-uncached")
        rows.append({
            "turns": length,
            "requests_in_series": case["requests"],
            "body_bytes": statistics.median(case["body_bytes"]),
            "items": statistics.median(case["items"]),
            "chat_bytes": statistics.median(case["chat_bytes"]),
            "direct": direct,
            "toolwire": through,
            "relay": relayed,
            "added_p50_ms": through["p50_ms"] - direct["p50_ms"],
            "added_p99_ms": through["p99_ms"] - direct["p99_ms"],
            "relay_added_p50_ms": relayed["p50_ms"] - direct["p50_ms"],
            "pair_added_p50_ms": [t.p50_ms - d.p50_ms for d, t in pairs],
            "raw": [run.as_dict() for name in targets for run in runs[name]],
        })
        if uncached is not None:
            rows[-1]["uncached"] = without
            rows[-1]["uncached_added_p50_ms"] = without["p50_ms"] - direct["p50_ms"]
    return rows


def relay_body_name(length: int) -> str:
    return f"session-{length}"


def history_metrics(gateway_url: str) -> dict[str, float]:
    """The gateway's ``toolwire_history_*`` figures from ``/metrics``."""
    with urllib.request.urlopen(gateway_url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    figures = {}
    for name in ("cache_entries", "cache_bytes", "continued_total", "learned_total"):
        match = re.search(rf"^toolwire_history_{name} (\S+)$", text, re.M)
        figures[name] = float(match[1]) if match else float("nan")
    return figures


def memory_run(work: Path, upstream_url: str, sessions: int) -> dict[str, Any]:
    """RSS of a fresh gateway before and after ``sessions`` different 800-turn sessions."""
    logs = work / "logs"
    with procs.gateway_service(upstream_url, logs, name="gateway-history-memory") as gateway:
        post = _poster(gateway.url + "/v1/responses")
        warm = session_series(0, 2, variant=sessions + 1)  # imports, first allocations: not the cache
        for body in warm:
            post(body)
        time.sleep(0.5)
        baseline = procs.memory_kib(gateway.pid)
        before = history_metrics(gateway.url)
        body_bytes = 0
        for variant in range(1, sessions + 1):
            for body in session_series(MEMORY_TURNS, 2, variant=variant):
                post(body)
                body_bytes = body.size
        time.sleep(0.5)
        after = procs.memory_kib(gateway.pid)
        figures = history_metrics(gateway.url)
    return {
        "sessions": sessions,
        "turns": MEMORY_TURNS,
        "body_bytes": body_bytes,
        "baseline_mb": baseline / 1024,
        "after_mb": after / 1024,
        "per_session_mb": (after - baseline) / 1024 / max(1, sessions),
        "entries": figures["cache_entries"] - before["cache_entries"],
        "estimated_mb": (figures["cache_bytes"] - before["cache_bytes"]) / 1024 / 1024,
        "continued": figures["continued_total"] - before["continued_total"],
    }


def _poster(url: str) -> Any:
    def post(body: Body) -> None:
        request = urllib.request.Request(
            url, data=body.data, headers={**body.headers, "Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            text = answer.read()
        if answer.status != 200 or b'"type":"response.completed"' not in text:
            raise RuntimeError(f"toolwire did not complete {body.name}: {text[:1000]!r}")

    return post


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The latency table and the memory figure, with an upstream streaming event by event."""
    for sub in ("bodies", "wrk", "logs"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    series = [write_series(work, length, args.history_turns, store=args.history_store) for length in args.history_lengths]
    logs = work / "logs"
    middle_chats = {relay_body_name(case["turns"]): case["chat_paths"][len(case["chat_paths"]) // 2] for case in series}
    with procs.upstream_service(logs, *args.upstream_flags, "--write-per-event", name="upstream-history") as upstream, \
            procs.gateway_service(upstream.url + "/v1", logs, *args.gateway_flag, name="gateway-history") as gateway, \
            procs.relay_service(upstream.url + "/v1", middle_chats, logs, "relay-history") as relay, \
            contextlib.ExitStack() as optional:
        uncached = None
        if args.history_uncached:
            uncached = optional.enter_context(procs.gateway_service(
                upstream.url + "/v1", logs, *args.gateway_flag, "--history-cache-bytes", "0", name="gateway-uncached"))
        rows = latency_runs(args, work, series, upstream, gateway, relay, uncached)
        cache = history_metrics(gateway.url)
        memory = memory_run(work, upstream.url + "/v1", args.history_sessions)
    return {
        "turns_per_series": args.history_turns,
        "duration_s": args.duration,
        "repeat": args.repeat,
        "rows": rows,
        "cache_after_runs": cache,
        "memory": memory,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--history-lengths", default=",".join(map(str, LENGTHS)),
                        help="tool turns of history, comma-separated [0,50,200,800]")
    parser.add_argument("--history-turns", type=int, default=None,
                        help="requests per growing session (each one more turn) [16; --quick 8]")
    parser.add_argument("--history-sessions", type=int, default=None,
                        help="800-turn sessions kept for the memory figure [8; --quick 2]")
    parser.add_argument("--history-store", action="store_true",
                        help='the session\'s bodies say "store": true (a client resending its history with the API\'s'
                             " default): every response is stored")
    parser.add_argument("--history-uncached", action=argparse.BooleanOptionalAction, default=True,
                        help="also a gateway keeping no history (--history-cache-bytes 0): what the cache buys [on]")


def finish_arguments(args: argparse.Namespace) -> None:
    args.history_lengths = [int(n) for n in str(args.history_lengths).split(",") if n.strip()]
    args.history_turns = args.history_turns or (8 if args.quick else 16)
    args.history_sessions = args.history_sessions or (2 if args.quick else 8)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.history", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--duration", type=int, default=None, help="seconds per wrk run [5; --quick 1]")
    parser.add_argument("--repeat", type=int, default=None, help="pairs of runs per length [2; --quick 1]")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--work-dir", type=Path, default=Path(__file__).resolve().parent / "out")
    add_arguments(parser)
    args = parser.parse_args(argv)
    args.duration = args.duration or (1 if args.quick else 5)
    args.repeat = args.repeat or (1 if args.quick else 2)
    args.upstream_flags, args.gateway_flag = ["--reply", "text"], []
    finish_arguments(args)
    wrk.require_wrk()
    result = measure(args, args.work_dir)
    (args.work_dir / "history.json").write_text(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    for row in result["rows"]:
        print(f"{row['turns']:4d}+ turns ({row['body_bytes'] / 1e6:.2f} MB): direct p50 {row['direct']['p50_ms']:.3f} ms,"
              f" toolwire p50 {row['toolwire']['p50_ms']:.3f} ms, added {row['added_p50_ms']:+.3f} ms "
              f"(the bare relay {row['relay_added_p50_ms']:+.3f} ms"
              + (f"; no history cache {row['uncached_added_p50_ms']:+.3f} ms" if "uncached" in row else "") + ") "
              f"({', '.join(f'{v:+.3f}' for v in row['pair_added_p50_ms'])}), toolwire CPU "
              f"{row['toolwire']['cpu_us_per_request']:.0f} us/request")
    memory = result["memory"]
    print(f"memory: {memory['sessions']} sessions of {memory['turns']} turns: RSS {memory['baseline_mb']:.1f} -> "
          f"{memory['after_mb']:.1f} MB ({memory['per_session_mb']:.1f} MB each), the cache's estimate "
          f"{memory['estimated_mb']:.1f} MB in {memory['entries']:.0f} entries")


if __name__ == "__main__":
    main()
