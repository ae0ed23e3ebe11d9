"""Streams as a model writes them: toolwire and the bare relay in front of a paced upstream.

    python -m bench.run ...      # part of every full run (the "Paced streams" section)

The canned upstream writes each event of an answer ``PACE_MS`` after the one before (200
tokens a second), so that the gateway reads every event alone, as it does in front of a
real model; the throughput cases (``bench.run``'s load) read most of an answer in one or
two reads and measure a request's fixed cost only. Here the requests per second are set
by the pace and the connections, and the figure to read is the CPU per request: toolwire's
and the bare relay's (``bench/relay.py``: uvicorn + aiohttp, nothing parsed), measured
in turn against the same upstream, ``--repeat`` rounds with the order alternating. Their
ratio, and what toolwire spends per event beyond the relay, measure toolwire's own work
on the streams a gateway shared by a team spends most on; both cancel most of the
machine's speed, which the ratios to a direct upstream do not.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from . import log, procs, wrk
from .bodies import Body
from .relay import BODY_HEADER

PACE_MS = 5.0
"""Milliseconds between two events of an answer: 200 tokens a second."""
CONNECTIONS = 64
"""Streams open at once: at 5 ms a step, about 290 requests a second (64 answers of 44 events)."""
EVENTS = 44
"""SSE events per answer of the canned upstream: a role chunk, 40 text chunks, the finish and
usage chunks, ``[DONE]``."""


def measure(args: argparse.Namespace, work: Path, bodies: list[Body]) -> dict[str, Any]:
    """For each body, toolwire's and the relay's runs against one paced upstream."""
    logs = work / "logs"
    chat_paths = {body.name: work / "bodies" / f"{body.name}.chat.json" for body in bodies}
    flags = [*args.upstream_flags, "--pace-ms", f"{PACE_MS:g}"]
    cases = []
    with procs.upstream_service(logs, *flags, name="upstream-paced") as upstream, \
            procs.gateway_service(upstream.url + "/v1", logs, *args.gateway_flag, name="gateway-paced") as gateway, \
            procs.relay_service(upstream.url + "/v1", chat_paths, logs, "relay-paced") as relay:
        services = {"toolwire": gateway, "relay": relay}
        watch = {"upstream": upstream.pid, **{name: service.pid for name, service in services.items()}}
        for body in bodies:
            body_path = work / "bodies" / f"{body.name}.json"
            headers = {**body.headers, "Content-Type": "application/json"}
            scripts = {  # the relay passes the upstream's bytes: the upstream's end marker
                "toolwire": wrk.write_script(work / f"paced-toolwire-{body.name}.lua", body_path, headers,
                                             wrk.GATEWAY_MARKER),
                "relay": wrk.write_script(work / f"paced-relay-{body.name}.lua", body_path,
                                          {**headers, BODY_HEADER: body.name}, wrk.UPSTREAM_MARKER),
            }
            runs: dict[str, list[wrk.WrkResult]] = {name: [] for name in services}
            for name in services if args.warmup > 0 else ():
                _run(services[name], scripts[name], name, max(1, round(args.warmup)), work / "wrk" / "warmup-paced.txt")
            for repeat in range(args.repeat):
                for name in list(services) if repeat % 2 == 0 else list(services)[::-1]:
                    output = work / "wrk" / f"paced-{body.name}-{name}-r{repeat}.txt"
                    result = _run(services[name], scripts[name], name, args.duration, output, watch)
                    runs[name].append(result)
                    log(f"paced {body.name} c={CONNECTIONS} {name:8s} #{repeat + 1}: {result.rps:5.0f} req/s, "
                        f"p50 {result.p50_ms:.1f} ms, errors {result.errors}, "
                        f"{result.cpu_us_per_request[name]:.0f} µs CPU per request")
            cases.append(_case(body.name, runs))
    return {"pace_ms": PACE_MS, "connections": CONNECTIONS, "events": EVENTS, "cases": cases}


def _run(service: procs.Service, script: Path, name: str, duration: float, output: Path,
         watch: dict[str, int] | None = None) -> wrk.WrkResult:
    return wrk.run(service.url + "/v1/responses", script, target=name, connections=CONNECTIONS, duration=duration,
                   output_path=output, watch=watch, cpu_seconds=procs.cpu_seconds if watch else None)


def _case(body: str, runs: dict[str, list[wrk.WrkResult]]) -> dict[str, Any]:
    """The medians of each side's rounds, and toolwire over the relay, round by round."""
    cpu = {name: [run.cpu_us_per_request[name] for run in results] for name, results in runs.items()}
    ratios = [mine / theirs for mine, theirs in zip(cpu["toolwire"], cpu["relay"], strict=True) if theirs]
    return {
        "body": body,
        **{name: {"rps": statistics.median(run.rps for run in results),
                  "p50_ms": statistics.median(run.p50_ms for run in results),
                  "errors": sum(run.errors for run in results),
                  "cpu_us": statistics.median(cpu[name])} for name, results in runs.items()},
        "cpu_ratio": statistics.median(ratios) if ratios else 0.0,
        "round_ratios": ratios,
    }


def extra_per_event_us(case: dict[str, Any]) -> float:
    """What toolwire spends beyond the relay, per event of the answer (the request's own
    share included: an upper bound)."""
    return (case["toolwire"]["cpu_us"] - case["relay"]["cpu_us"]) / EVENTS
