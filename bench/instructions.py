"""Versions of toolwire side by side in instructions per request: a measure the machine's noise does not move.

    python -m bench.instructions HEAD~1 HEAD            # git revisions of this checkout
    python -m bench.instructions HEAD /elsewhere/src --body v1 --requests 640
    python -m bench.instructions HEAD~1 HEAD --pace-ms 20 --connections 8   # paced streams
    python -m bench.instructions HEAD~1 HEAD --websocket   # Codex's turns over one WebSocket

On a shared machine the CPU time of a request moves by a third from one minute to the
next (``bench.compare``'s rounds of one version range from 650 to 1,000 µs), so a change
worth a few percent cannot be seen in it. The instructions a request executes hardly move:
each version is served by its own ``toolwire serve`` (one worker) under valgrind's
callgrind, before one canned upstream streaming event by event (``bench.run``'s first
case; with ``--pace-ms``, its events that far apart, so that each is read alone and what
an event costs is counted); a client sends it ``--warmup`` requests (the history is
learned, the caches are filled), then the count is switched on for ``--requests``
requests, ``--connections`` at a time, and off again. Two runs of one version agree
within about 1 %. With ``--websocket`` the requests are Codex's turns over one WebSocket
(``bench.websocket_turns``: the body's fields again, ``previous_response_id`` and one user
message, a new conversation every hundred turns), one at a time.

What it does not see: the time the kernel spends (the sockets' system calls, about an
eighth of the gateway's CPU), and what waiting costs (cache misses). Under valgrind a
request takes about fifty times as long, so the event loop groups its work differently;
what depends on time (a timer due, writes joined in one turn) is counted as it happens
there. For the bench's own figures use ``bench.run``; this is for choosing between
versions of the code. The ratio between toolwire and the bare relay in instructions
(2.6 for V1, measured 2026-12-02) is the ratio of their CPU per request in ``bench.run``.

glibc copies large blocks with ``rep movsb``, which valgrind counts once per byte: a
32 kB copy would count as 32,000 instructions and weigh as much as a third of a request's
Python. ``GLIBC_TUNABLES`` turns that off in the served process, so a copy counts about
what it costs.

Needs ``valgrind`` (Debian: ``apt-get install valgrind``). Versions are named as for
``bench.compare`` (a revision's ``src`` is extracted under ``--work-dir``).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from . import bodies, procs, websocket_turns
from .compare import (
    ROOT,
    pace_option,
    parse_versions,
    slug,
    source_of,
    streaming,
    upstream_writes,
    version_parser,
)

COUNTED_COPIES = "glibc.cpu.x86_rep_movsb_threshold=1000000000:glibc.cpu.x86_rep_stosb_threshold=1000000000"
"""glibc's tunables that keep ``rep movsb`` / ``rep stosb`` out of memcpy and memset."""
_START_SECONDS = 300.0  # toolwire's imports, fifty times slower


@dataclass
class Count:
    """One version's count: instructions per request over ``requests`` requests."""

    name: str
    instructions: int
    requests: int

    @property
    def per_request(self) -> float:
        return self.instructions / self.requests


def count(name: str, source: Path, upstream_url: str, body: bodies.Body, *, requests: int, warmup: int,
          connections: int, work: Path, websocket: bool = False) -> Count:
    """Serve ``source`` under callgrind and count the instructions of ``requests`` requests
    (``websocket``: turns over one WebSocket)."""
    port = procs.free_port()
    out = work / f"callgrind-{slug(name)}.out"
    out.unlink(missing_ok=True)
    args = ["env", f"PYTHONPATH={source}", f"GLIBC_TUNABLES={COUNTED_COPIES}",  # env execs: valgrind keeps its pid
            "valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
            *procs.gateway_command(), "--upstream", upstream_url, "--host", "127.0.0.1", "--port", str(port)]
    gateway = procs.Service(f"toolwire {name} under callgrind", args, work / f"gateway-{slug(name)}.log",
                            port=port, health_path="/healthz")
    gateway.start(timeout=_START_SECONDS)
    try:
        if websocket:
            url = websocket_turns.responses_url(gateway.url)
            websocket_turns.run_turns(url, body.data, warmup)
            _instrument(gateway.pid, "on")
            websocket_turns.run_turns(url, body.data, requests)
        else:
            asyncio.run(_load(gateway.url, body, warmup, connections))
            _instrument(gateway.pid, "on")
            asyncio.run(_load(gateway.url, body, requests, connections))
        _instrument(gateway.pid, "off")
    finally:
        gateway.stop(timeout=120)  # callgrind writes its count as the gateway exits
    return Count(name, _total(out), requests)


async def _load(url: str, body: bodies.Body, requests: int, connections: int) -> None:
    """``requests`` POSTs of ``body``, ``connections`` at a time; each must stream to its end."""
    headers = {**body.headers, "Content-Type": "application/json"}
    left = requests

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal left
        while left > 0:
            left -= 1
            async with session.post(url + "/v1/responses", data=body.data, headers=headers) as response:
                answer = await response.read()
            if response.status != 200 or b"event: response.completed" not in answer:
                raise SystemExit(f"a request was not answered in full ({response.status}): {answer[:300]!r}")

    timeout = aiohttp.ClientTimeout(total=None, sock_read=120)
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        await asyncio.gather(*(client(session) for _ in range(connections)))


def _instrument(pid: int, state: str) -> None:
    subprocess.run(["callgrind_control", "--instr=" + state, str(pid)], check=True, capture_output=True, timeout=120)


def _total(out: Path) -> int:
    """The instructions counted (callgrind's ``totals:`` / ``summary:`` line) in ``out``
    and the parts a dump on the way may have split it into."""
    total = 0
    for part in sorted(out.parent.glob(out.name + "*")):
        lines = part.read_text().splitlines()
        total += max((int(line.split()[1]) for line in lines if line.startswith(("totals:", "summary:"))), default=0)
    if total == 0:
        raise SystemExit(f"callgrind wrote no count to {out}")
    return total


def report(counts: list[Count], *, body_name: str, connections: int, pace_ms: float = 0.0,
           websocket: bool = False) -> str:
    """A Markdown table: each version's instructions per request (or turn), and over the first one's."""
    first = counts[0]
    how = f"{first.requests} turns over one WebSocket" if websocket else f"{first.requests} requests at {connections} connections"
    lines = [
        f"{body_name.upper()} body, {how}, upstream streaming {streaming(pace_ms)}; instructions counted by callgrind",
        "",
        f"| version | instructions per {'turn' if websocket else 'request'} | ÷ {first.name}'s |",
        "| --- | ---: | ---: |",
    ]
    for counted in counts:
        lines.append(f"| {counted.name} | {counted.per_request / 1e6:.3f} M | {counted.per_request / first.per_request:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = version_parser("python -m bench.instructions", __doc__)
    parser.add_argument("--requests", type=int, default=320, help="requests counted per version")
    parser.add_argument("--warmup", type=int, default=48, help="requests before the count")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--websocket", action="store_true",
                        help="count Codex's turns over one WebSocket, one at a time, instead of POSTs")
    pace_option(parser)
    parser.add_argument("--work-dir", type=Path, default=ROOT / "bench" / "out" / "instructions")
    args = parse_versions(parser, argv)
    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    sources = [(name, source_of(name, work)) for name in args.versions]
    body = bodies.build(args.body)
    counts = []
    with procs.upstream_service(work, "--reply", "text", *upstream_writes(args.pace_ms)) as upstream:
        for name, source in sources:
            counted = count(name, source, upstream.url + "/v1", body, requests=args.requests, warmup=args.warmup,
                            connections=args.connections, work=work, websocket=args.websocket)
            print(f"{name}: {counted.per_request / 1e6:.3f} M instructions per request", file=sys.stderr, flush=True)
            counts.append(counted)
    print(report(counts, body_name=args.body, connections=args.connections, pace_ms=args.pace_ms,
                 websocket=args.websocket))


if __name__ == "__main__":
    main()
