"""What the bounded connection layer costs: the gateway on uvicorn's own httptools protocol
and on ``BoundedHttpToolsProtocol``, side by side.

    python -m bench.connection_layer [--rounds 3] [--duration 5] [--connections 1]

Both gateways serve the same configuration in front of the canned upstream (streaming
event by event) and take the V1 Codex body from wrk, one connection, in turns (the order
alternating each round); the report gives each one's p50 and requests/s per round and
the median. ``serve --http httptools|bounded`` is the server side: the app ``toolwire
serve`` builds, run by uvicorn with one protocol or the other and every other setting
equal.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from bench import bodies, procs, wrk

PROTOCOLS = {
    "httptools": "httptools",
    "bounded": "toolwire.server._connections:BoundedHttpToolsProtocol",
}


def serve(protocol: str, upstream: str, port: int) -> None:
    import uvicorn

    from toolwire.config import GatewayConfig, upstream_from_flag
    from toolwire.server._settings import CONFIG_ENV

    config = GatewayConfig(upstreams=[upstream_from_flag(upstream, api_key_env=None, preset=None)])
    config = config.model_copy(update={"server": config.server.model_copy(update={"store": "none"})})
    os.environ[CONFIG_ENV] = config.model_dump_json()
    uvicorn.run(
        "toolwire.server._factory:app_from_env", factory=True, host="127.0.0.1", port=port, log_level="warning",
        access_log=False, loop="uvloop", http=PROTOCOLS[protocol], timeout_keep_alive=30,
    )


def compare(rounds: int, duration: float, connections: int) -> dict[str, list[dict[str, float]]]:
    work = Path(tempfile.mkdtemp(prefix="bench-connection-layer-"))
    body = bodies.build("v1")
    body_path = work / "v1.json"
    body_path.write_bytes(body.data)
    script = wrk.write_script(work / "v1.lua", body_path, {"Content-Type": "application/json"}, wrk.GATEWAY_MARKER)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in PROTOCOLS}
    with procs.upstream_service(work, "--write-per-event") as upstream:
        gateways = {}
        for name in PROTOCOLS:
            port = procs.free_port()
            args = [sys.executable, "-m", "bench.connection_layer", "serve", "--http", name,
                    "--upstream", upstream.url + "/v1", "--port", str(port)]
            gateways[name] = procs.Service(name, args, work / f"{name}.log", port=port, health_path="/healthz").start()
        try:
            for index in range(rounds):
                order = list(PROTOCOLS) if index % 2 == 0 else list(reversed(PROTOCOLS))
                for name in order:
                    result = wrk.run(
                        gateways[name].url + "/v1/responses", script, target=name, connections=connections,
                        duration=duration, output_path=work / f"{name}-{index}.txt",
                    )
                    if result.errors:
                        raise RuntimeError(f"{name}: {result.errors} failed requests ({result.error_detail})")
                    results[name].append({"p50_ms": result.p50_ms, "p99_ms": result.p99_ms, "rps": result.rps})
        finally:
            for gateway in gateways.values():
                gateway.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    serving = sub.add_parser("serve")
    serving.add_argument("--http", choices=PROTOCOLS, required=True)
    serving.add_argument("--upstream", required=True)
    serving.add_argument("--port", type=int, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5)
    parser.add_argument("--connections", type=int, default=1)
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.http, args.upstream, args.port)
        return
    results = compare(args.rounds, args.duration, args.connections)
    print(json.dumps(results))
    print(f"| protocol | p50 per round | median p50 | median p99 | median requests/s ({args.connections} connection(s)) |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, runs in results.items():
        p50s = ", ".join(f"{run['p50_ms']:.3f}" for run in runs)
        print(
            f"| {name} | {p50s} ms | {statistics.median(r['p50_ms'] for r in runs):.3f} ms | "
            f"{statistics.median(r['p99_ms'] for r in runs):.3f} ms | {statistics.median(r['rps'] for r in runs):.0f} |"
        )


if __name__ == "__main__":
    main()
