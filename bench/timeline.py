"""Where one request's time goes at one connection: toolwire and the bare relay, span by span.

    python -m bench.timeline                       # V2 body, 4 s each
    python -m bench.timeline --body v1 --duration 8

The one-connection latency (``bench.run``'s first figure) is the sum of what the gateway
does before it asks the upstream, the upstream's answer to its head, the answer's stream,
and the wait for the client's next request. This starts the canned upstream (streaming
event by event, as ``bench.run``'s first case), then ``toolwire serve`` and the bare relay
in turn, each with a probe (``python -m bench.timeline PROBE MARKS MODULE ARGS...``) that
notes, inside the server, the moment of four things for every request:

- ``request``: the HTTP parser begins a request (uvicorn's ``on_message_begin``);
- ``post``: the upstream POST begins (``aiohttp.ClientSession._request`` called);
- ``head``: the upstream's answer head is in (that call returns);
- ``complete``: the client's answer is complete and handed to the socket (uvicorn's
  ``on_response_complete``; toolwire's protocol writes the answer's last bytes then).

wrk then sends the body at one connection. The report gives the median of each span
(request → post → head → complete → the next request), for each server and the
difference. The probe wraps those four methods of uvicorn and aiohttp, as installed, by
the names they have in uvicorn 0.55 and aiohttp 3.14 (pinned in pyproject.toml); a probe
that finds one missing stops the server at once rather than measure nothing.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import itertools
import runpy
import signal
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from . import bodies, core, procs, wrk
from .relay import BODY_HEADER

ROOT = Path(__file__).resolve().parents[1]
PROBE = "probe"
MOMENTS = ("request", "post", "head", "complete")
SPANS = (
    ("request", "post", "request in → upstream POST begins"),
    ("post", "head", "upstream POST → its answer's head"),
    ("head", "complete", "head → the client's answer complete"),
    ("complete", "request", "answer complete → the next request begins"),
)


# --------------------------------------------------------------------------- the probe
def install_probe(marks: list[tuple[int, int]]) -> None:
    """Wrap the four methods that mark a request's moments; each appends (moment, ns)."""
    import aiohttp.client
    from uvicorn.protocols.http import httptools_impl

    clock = time.perf_counter_ns
    protocol = httptools_impl.HttpToolsProtocol
    session = aiohttp.client.ClientSession
    began, completed, requested = protocol.on_message_begin, protocol.on_response_complete, session._request

    def on_message_begin(self: Any) -> None:
        marks.append((0, clock()))
        began(self)

    async def _request(self: Any, *args: Any, **kwargs: Any) -> Any:
        marks.append((1, clock()))
        response = await requested(self, *args, **kwargs)
        marks.append((2, clock()))
        return response

    def on_response_complete(self: Any) -> None:
        completed(self)
        marks.append((3, clock()))

    protocol.on_message_begin = on_message_begin  # type: ignore[method-assign]
    protocol.on_response_complete = on_response_complete  # type: ignore[method-assign]
    session._request = _request  # type: ignore[method-assign]


def run_probed(marks_path: Path, module: str, arguments: list[str]) -> None:
    """Run ``python -m module arguments`` with the probe, its marks written at exit."""
    marks: list[tuple[int, int]] = []
    install_probe(marks)

    def write() -> None:
        marks_path.write_text("".join(f"{MOMENTS[moment]} {ns}\n" for moment, ns in marks))

    def stopped(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)  # (atexit then writes the marks)

    atexit.register(write)
    # uvicorn handles SIGTERM itself while it serves, then raises it again once it has shut
    # down, for the handler that was there before: this one, which exits through atexit.
    signal.signal(signal.SIGTERM, stopped)
    sys.argv = [module, *arguments]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


# --------------------------------------------------------------------------- the spans
def spans(marks: list[tuple[str, int]]) -> dict[str, list[float]]:
    """The µs of each span, from marks in order; a span is counted only between the moments
    it names, one right after the other (a request that failed before its POST, say, adds
    nothing to the POST's spans)."""
    found: dict[str, list[float]] = defaultdict(list)
    labels = {(start, end): label for start, end, label in SPANS}
    for (moment, at), (following, then) in itertools.pairwise(marks):
        label = labels.get((moment, following))
        if label is not None:
            found[label].append((then - at) / 1000)
    return found


def read_marks(path: Path) -> list[tuple[str, int]]:
    pairs = (line.split() for line in path.read_text().splitlines() if line.strip())
    return [(moment, int(ns)) for moment, ns in pairs]


def report(figures: dict[str, dict[str, list[float]]], *, body_name: str, latency: dict[str, float]) -> str:
    """A Markdown table: each span's median per server, and toolwire's beyond the relay."""
    lines = [
        f"{body_name.upper()} body, one connection, upstream streaming event by event; medians (µs)",
        "",
        "| span | toolwire | relay | toolwire - relay |",
        "| --- | ---: | ---: | ---: |",
    ]
    totals = {"toolwire": 0.0, "relay": 0.0}
    for _, _, label in SPANS:
        medians = {name: statistics.median(figures[name][label]) if figures[name].get(label) else float("nan")
                   for name in ("toolwire", "relay")}
        for name, value in medians.items():
            totals[name] += value
        lines.append(f"| {label} | {medians['toolwire']:.1f} | {medians['relay']:.1f} | "
                     f"{medians['toolwire'] - medians['relay']:+.1f} |")
    lines.append(f"| the spans' sum | {totals['toolwire']:.1f} | {totals['relay']:.1f} | "
                 f"{totals['toolwire'] - totals['relay']:+.1f} |")
    lines.append(f"| wrk's p50 latency | {1000 * latency['toolwire']:.1f} | {1000 * latency['relay']:.1f} | "
                 f"{1000 * (latency['toolwire'] - latency['relay']):+.1f} |")
    return "\n".join(lines)


def probed(service: procs.Service, marks_path: Path) -> procs.Service:
    """``service`` (``python -m MODULE ...``) run under the probe, its marks to ``marks_path``."""
    python, flag, *module_and_arguments = service.args
    if (python, flag) != (sys.executable, "-m"):
        raise ValueError(f"not a `python -m` command: {service.args}")
    probe = [sys.executable, "-m", "bench.timeline", PROBE, str(marks_path)]
    return dataclasses.replace(service, args=[*probe, *module_and_arguments])


def measure(*, body_name: str, duration: float, work: Path) -> str:
    work.mkdir(parents=True, exist_ok=True)
    body = bodies.build(body_name)
    body_path, chat_path = work / f"{body_name}.json", work / f"{body_name}.chat.json"
    body_path.write_bytes(body.data)
    chat_path.write_bytes(core.chat_body(body))
    headers = {**body.headers, "Content-Type": "application/json"}
    scripts = {
        "toolwire": wrk.write_script(work / f"toolwire-{body_name}.lua", body_path, headers, wrk.GATEWAY_MARKER),
        "relay": wrk.write_script(work / f"relay-{body_name}.lua", body_path,
                                  {**headers, BODY_HEADER: body_name}, wrk.UPSTREAM_MARKER),
    }
    figures: dict[str, dict[str, list[float]]] = {}
    latency: dict[str, float] = {}
    with procs.upstream_service(work, "--reply", "text", "--write-per-event") as upstream:
        upstream_url = upstream.url + "/v1"
        servers = {
            "toolwire": procs.gateway_service(upstream_url, work, name="toolwire"),
            "relay": procs.relay_service(upstream_url, {body_name: chat_path}, work),
        }
        for name, server in servers.items():
            marks_path = work / f"marks-{name}.txt"
            marks_path.unlink(missing_ok=True)
            service = probed(server, marks_path)
            with service:
                wrk.run(service.url + "/v1/responses", scripts[name], target=name, connections=1, duration=1,
                        output_path=work / f"wrk-{name}-warmup.txt")
                result = wrk.run(service.url + "/v1/responses", scripts[name], target=name, connections=1,
                                 duration=duration, output_path=work / f"wrk-{name}.txt")
            if result.errors:
                raise SystemExit(f"{name}: {result.errors} failed requests: {result.error_detail}")
            figures[name] = spans(read_marks(marks_path))
            latency[name] = result.p50_ms
    return report(figures, body_name=body_name, latency=latency)


def main(argv: list[str] | None = None) -> None:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == [PROBE]:
        run_probed(Path(arguments[1]), arguments[2], arguments[3:])
        return
    parser = argparse.ArgumentParser(prog="python -m bench.timeline", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--body", default="v2", choices=["v1", "v2"])
    parser.add_argument("--duration", type=float, default=4.0, help="seconds of wrk per server (whole seconds)")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "bench" / "out" / "timeline")
    args = parser.parse_args(arguments)
    print(measure(body_name=args.body, duration=args.duration, work=args.work_dir.resolve()))


if __name__ == "__main__":
    main()
