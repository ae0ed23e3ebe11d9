"""Versions of toolwire side by side under load: what a change buys, in CPU per request.

    python -m bench.compare HEAD~3 HEAD                # git revisions of this checkout
    python -m bench.compare HEAD~1 HEAD --body v1 --rounds 6
    python -m bench.compare /elsewhere/src HEAD       # a directory holding the toolwire package
    python -m bench.compare HEAD~1 HEAD --body v1 --connections 256 --pace-ms 20   # paced streams
    python -m bench.compare HEAD~1 HEAD --body v1 --websocket   # Codex's turns over a WebSocket

Full runs (``bench.run``) take twenty minutes and move by more than a small change between
one run and the next on a shared machine. This measures only what a change is about: each
version is served by its own ``toolwire serve`` process (one worker) in front of one
canned upstream (streaming event by event, as ``bench.run``'s first case), all started at
once, and wrk runs against each in turn at ``--connections``, the order alternating from
round to round. A version's figures are the medians of its rounds; so is its ratio to the
first version, taken round by round (each run beside the first version's run of the same
round), which cancels most of the machine's drift.

The canned upstream writes its events back to back, so a loaded gateway reads most of an
answer at once and what a request costs as a whole shows. With ``--pace-ms`` it writes them
that far apart, as a model generating tokens does: each event is read alone, and what the
gateway spends per event shows (the requests per second are then set by the pace and the
connections, so the CPU per request is the figure to read).

With ``--websocket``, each run is not wrk's but the turns of Codex's built-in provider
over one WebSocket (``bench.websocket_turns``): the body's fields sent again with every
turn, ``previous_response_id`` and a new user message, one turn at a time; the figures
are then turns per second and the gateway's CPU per turn (``--connections`` is not used).

A git revision's ``src`` is extracted (``git archive``) under the work directory; each
version is served from its ``src`` with ``PYTHONPATH``, ahead of the installed package. Its
dependencies are this environment's. Options are the gateway's own, not the version's: a
revision whose ``toolwire serve`` does not know one fails to start.
"""

from __future__ import annotations

import argparse
import functools
import io
import statistics
import subprocess
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import bodies, procs, websocket_turns, wrk
from .upstream import pace_ms

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Version:
    """One version under comparison: its name, its source directory, its runs."""

    name: str
    source: Path
    rps: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    errors: int = 0


def source_of(version: str, work: Path) -> Path:
    """The directory holding the ``toolwire`` package of ``version``: a directory as given
    (itself, or its ``src``), or a git revision of this checkout, checked out under ``work``."""
    given = Path(version)
    for candidate in (given, given / "src"):
        if (candidate / "toolwire" / "__init__.py").is_file():
            return candidate.resolve()
    commit = _git("rev-parse", "--verify", "--quiet", f"{version}^{{commit}}").decode().strip()
    tree = work / "sources" / commit
    if not (tree / "src" / "toolwire" / "__init__.py").is_file():
        with tarfile.open(fileobj=io.BytesIO(_git("archive", "--format=tar", commit, "src"))) as archive:
            archive.extractall(tree, filter="data")
    return tree / "src"


def _git(*args: str) -> bytes:
    result = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"not a directory with the toolwire package, nor a git revision: git {' '.join(args)}: "
                         f"{result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def serve(version: Version, upstream_url: str, log_dir: Path) -> procs.Service:
    """``toolwire serve`` of ``version`` (not started): its source ahead of the installed one."""
    port = procs.free_port()
    args = ["env", f"PYTHONPATH={version.source}", *procs.gateway_command(),
            "--upstream", upstream_url, "--host", "127.0.0.1", "--port", str(port)]
    return procs.Service(f"toolwire {version.name}", args, log_dir / f"gateway-{slug(version.name)}.log",
                         port=port, health_path="/healthz")


def slug(name: str) -> str:
    """A version's name as it can stand in a file's name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def compare(versions: list[Version], *, body_name: str, connections: int, duration: float, rounds: int,
            work: Path, pace_ms: float = 0.0, websocket: bool = False) -> None:
    work.mkdir(parents=True, exist_ok=True)
    body = bodies.build(body_name)
    body_path = work / f"{body_name}.json"
    body_path.write_bytes(body.data)
    script = wrk.write_script(work / f"{body_name}.lua", body_path,
                              {**body.headers, "Content-Type": "application/json"}, wrk.GATEWAY_MARKER)
    with procs.upstream_service(work, "--reply", "text", *upstream_writes(pace_ms)) as upstream:
        gateways: list[procs.Service] = []
        try:
            for version in versions:
                gateways.append(serve(version, upstream.url + "/v1", work).start())
            run: Callable[[procs.Service, float], tuple[float, float, int]] = (
                functools.partial(_run_websocket, body=body.data) if websocket
                else functools.partial(_run, script=script, connections=connections, work=work)
            )  # fmt: skip
            for gateway in gateways:  # warm up: each learns the body's history
                run(gateway, 2.0)
            for number in range(rounds):
                order = list(zip(versions, gateways, strict=True))
                for version, gateway in order if number % 2 == 0 else reversed(order):
                    rps, cpu_us, errors = run(gateway, duration)
                    version.rps.append(rps)
                    version.cpu_us.append(cpu_us)
                    version.errors += errors
                    print(f"round {number + 1}: {version.name:>20}  {rps:7.0f} {'turns' if websocket else 'req'}/s  "
                          f"{cpu_us:5.0f} µs CPU per {'turn' if websocket else 'request'}", file=sys.stderr, flush=True)
        finally:
            for gateway in gateways:
                gateway.stop()
    print(report(versions, body_name=body_name, connections=connections, duration=duration, pace_ms=pace_ms,
                 websocket=websocket))


def _run(gateway: procs.Service, duration: float, *, script: Path, connections: int, work: Path) -> tuple[float, float, int]:
    """wrk against ``gateway``: requests/s, the gateway's CPU µs per request, errors."""
    result = wrk.run(gateway.url + "/v1/responses", script, target="toolwire", connections=connections,
                     duration=duration, output_path=work / "wrk.txt", watch={"gateway": gateway.pid},
                     cpu_seconds=procs.cpu_seconds)
    return result.rps, result.cpu_us_per_request["gateway"], result.errors


def _run_websocket(gateway: procs.Service, duration: float, *, body: bytes) -> tuple[float, float, int]:
    """Codex's turns over a WebSocket to ``gateway``, the first request ``body``: turns/s, the
    gateway's CPU µs per turn, errors."""
    url = websocket_turns.responses_url(gateway.url)
    result = websocket_turns.run(url, body, duration, lambda: procs.cpu_seconds(gateway.pid))
    return result.turns_per_second, result.cpu_us_per_turn, result.errors


def report(versions: list[Version], *, body_name: str, connections: int, duration: float, pace_ms: float = 0.0,
           websocket: bool = False) -> str:
    """A Markdown table: each version's medians, and its ratios to the first one."""
    first = versions[0]
    unit = "turn" if websocket else "request"
    how = "Codex's turns over one WebSocket" if websocket else f"{connections} connections"
    lines = [
        f"{body_name.upper()} body, {how}, {len(first.rps)} round(s) of {duration:g} s, "
        f"upstream streaming {streaming(pace_ms)}; medians of the rounds",
        "",
        f"| version | {unit}s/s | CPU per {unit} | CPU per {unit} ÷ {first.name}'s, per round | errors |",
        "| --- | ---: | ---: | --- | ---: |",
    ]
    for version in versions:
        ratios = [mine / theirs for mine, theirs in zip(version.cpu_us, first.cpu_us, strict=True)]
        lines.append(
            f"| {version.name} | {statistics.median(version.rps):.0f} | {statistics.median(version.cpu_us):.0f} µs | "
            f"{statistics.median(ratios):.3f} ({', '.join(f'{r:.3f}' for r in ratios)}) | {version.errors} |"
        )
    return "\n".join(lines)


def upstream_writes(pace_ms: float) -> tuple[str, ...]:
    """The canned upstream's options for ``--pace-ms``: its events that far apart, or
    each written on its own, back to back (0)."""
    return ("--pace-ms", f"{pace_ms:g}") if pace_ms > 0 else ("--write-per-event",)


def streaming(pace_ms: float) -> str:
    """How the upstream streams, as a report's heading says it."""
    return f"its events {pace_ms:g} ms apart" if pace_ms > 0 else "event by event"


def pace_option(parser: argparse.ArgumentParser) -> None:
    """``--pace-ms``, as every comparison takes it."""
    parser.add_argument("--pace-ms", type=pace_ms, default=0.0, metavar="MS",
                        help="the upstream writes a stream's events MS milliseconds apart (default: back to back)")


def version_parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """A command's parser with what every comparison takes: the versions and the body."""
    parser = argparse.ArgumentParser(prog=prog, description=(doc or "").splitlines()[0])
    parser.add_argument("versions", nargs="+", metavar="VERSION",
                        help="a git revision of this checkout, or a directory holding the toolwire package")
    parser.add_argument("--body", default="v2", choices=["v1", "v2"])
    return parser


def parse_versions(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``argv`` parsed, each version named once."""
    args = parser.parse_args(argv)
    if len(set(args.versions)) != len(args.versions):
        parser.error("name each version once")
    return args


def main(argv: list[str] | None = None) -> None:
    parser = version_parser("python -m bench.compare", __doc__)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--duration", type=float, default=6.0, help="seconds per run (whole seconds)")
    parser.add_argument("--rounds", type=int, default=4)
    pace_option(parser)
    parser.add_argument("--websocket", action="store_true",
                        help="Codex's turns over a WebSocket (bench.websocket_turns) instead of wrk")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "bench" / "out" / "compare")
    args = parse_versions(parser, argv)
    work = args.work_dir.resolve()
    versions = [Version(name, source_of(name, work)) for name in args.versions]
    compare(versions, body_name=args.body, connections=args.connections, duration=args.duration,
            rounds=args.rounds, work=work, pace_ms=args.pace_ms, websocket=args.websocket)


if __name__ == "__main__":
    main()
