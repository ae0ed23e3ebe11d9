"""Profile the gateway under load with py-spy and sum the samples up.

``profile_gateway`` runs wrk against the gateway twice with py-spy attached: once
recording collapsed stacks (``profile-<body>.txt``, summed here into self / total shares
per function and self shares per package) and once recording a flame graph
(``profile-<body>.svg``). ``summarize`` works on any ``py-spy record --format raw`` file:

    python -m bench.profiling bench/out/profile-v2.txt
"""

from __future__ import annotations

import collections
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import wrk

# The start-up chain under every stack (runpy, typer, uvicorn.run, the event loop's runner):
# left out of the "total" ranking, where it would only fill the top.
_ROOT_FRAMES = ("<frozen runpy>", "(typer/", "(click/", "(toolwire/cli.py)", "(toolwire/__main__.py)",
                "(uvicorn/main.py)", "(uvicorn/server.py)", "(uvicorn/_compat.py)", "(asyncio/runners.py)")
# Stages of the gateway's work. Each sample goes to exactly one, so shares add up to 100 %
# even when py-spy gets a truncated stack: the innermost frame of a specific stage
# (``STAGES``, patterns tried in order) decides; a sample with none goes to the generic
# stage of its innermost frame (``GENERIC_STAGES``), else to "other".
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("uvicorn `RequestResponseCycle.send`: one socket write per ASGI `send`", ("RequestResponseCycle.send (",)),
    ("read and parse the Codex body (`read_body`, `parse_request`)",
     ("read_body (", "parse_request (", "(toolwire/protocol/_request.py)")),
    ("translate the request (`translate_request`)", ("translate_request (", "(toolwire/translate/chat/request.py)")),
    ("dump the input items for the response store (`dump_item`)", ("dump_item (",)),
    ("stream translation (`ChatStreamTranslator`)",
     ("ChatStreamTranslator.", "(toolwire/translate/chat/stream.py)", "(toolwire/translate/custom_input.py)")),
    ("encode events (`orjson.dumps`, `encode_event`) and hand them down", ("send_events (", "encode_event (")),
    ("upstream HTTP client (aiohttp, SSE decoding)",
     ("HttpChatBackend.", "(toolwire/upstream/", "(aiohttp/", "SSEDecoder.")),
    ("exchange observers: log line, inspector record, metrics",
     ("(logging/", "Observer.", "(toolwire/server/observe/", "(prometheus_client/")),
)
GENERIC_STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Starlette routing and middleware", ("(starlette/",)),
    ("uvicorn, other (HTTP parsing, protocol callbacks)", ("(uvicorn/",)),
    ("rest of toolwire (endpoint, streaming, exchange record)", ("(toolwire/",)),
    ("event loop (uvloop, asyncio)", ("(asyncio/", "(uvloop/", "(contextlib")),
)
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("bench --profile: py-spy is not installed (`.venv/bin/pip install py-spy`).")
    return found


def _package(file: str) -> str:
    """``toolwire.translate``, ``uvicorn``, ``asyncio``, ... from a frame's file (absolute or not)."""
    path = file.split("/site-packages/", 1)[-1]
    if "/src/toolwire/" in path or path.startswith("toolwire/"):
        parts = path.split("toolwire/", 1)[1].split("/")
        return "toolwire." + parts[0].removesuffix(".py") if len(parts) > 1 else "toolwire"
    path = re.sub(r"^.*/lib/python3\.\d+/", "", path)
    if path.startswith("<"):
        return path + " (generated code, e.g. dataclass __init__)" if path == "<string>" else path
    return path.split("/", 1)[0].removesuffix(".py")


def _name(frame: str) -> tuple[str, str]:
    match = _FRAME.match(frame)
    if not match:
        return frame, "?"
    file = match["file"]
    short = file.split("/site-packages/", 1)[-1]
    short = "toolwire/" + short.split("/src/toolwire/", 1)[1] if "/src/toolwire/" in short else short
    short = re.sub(r"^.*/lib/python3\.\d+/", "", short)
    return f"{match['function']} ({short})", _package(file)


_OTHER = "other"


def _stage(frames: list[tuple[str, str]]) -> str:
    for table in (STAGES, GENERIC_STAGES):
        for name, _ in reversed(frames):
            for label, parts in table:
                if any(part in name for part in parts):
                    return label
    return _OTHER


def summarize(raw_path: Path, top: int = 40) -> dict[str, Any]:
    """Self and total shares per function, self share per package, from collapsed stacks."""
    self_counts: collections.Counter[str] = collections.Counter()
    total_counts: collections.Counter[str] = collections.Counter()
    package_counts: collections.Counter[str] = collections.Counter()
    stage_counts: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw_path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_name(frame) for frame in stack.split(";") if " (" in frame]
        if not frames:
            continue
        samples += count
        leaf, package = frames[-1]
        self_counts[leaf] += count
        package_counts[package] += count
        for name in {name for name, _ in frames}:
            total_counts[name] += count
        stage_counts[_stage(frames)] += count
    def share(counter: collections.Counter[str], skip_root: bool = False) -> list[tuple[str, float]]:
        if not samples:
            return []
        rows = [(name, n / samples) for name, n in counter.most_common()
                if not (skip_root and any(part in name for part in _ROOT_FRAMES))]
        return rows[:top]

    stages = [(label, stage_counts[label] / samples if samples else 0.0) for label, _ in (*STAGES, *GENERIC_STAGES, (_OTHER, ()))]
    return {"samples": samples, "self": share(self_counts), "total": share(total_counts, skip_root=True),
            "packages": share(package_counts), "stages": stages}


def _record(pid: int, output: Path, fmt: str, url: str, script: Path, duration: float, connections: int,
            wrk_output: Path) -> wrk.WrkResult:
    spy = subprocess.Popen(
        [py_spy(), "record", "--pid", str(pid), "--rate", "200", "--format", fmt, "--output", str(output),
         "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    time.sleep(1.0)  # attach
    try:
        result = wrk.run(url, script, target="toolwire", connections=connections, duration=duration,
                         output_path=wrk_output)
    finally:
        spy.send_signal(signal.SIGINT)
        _, errors = spy.communicate(timeout=60)
    if not output.exists():
        raise RuntimeError(f"py-spy wrote no {output}: {errors.decode(errors='replace')[-2000:]}")
    return result


def profile_gateway(pid: int, url: str, script: Path, body: str, work: Path, *, duration: float,
                    connections: int) -> dict[str, Any]:
    raw = work / f"profile-{body}.txt"
    svg = work / f"profile-{body}.svg"
    result = _record(pid, raw, "raw", url, script, duration, connections, work / "wrk" / f"profile-{body}-raw.txt")
    _record(pid, svg, "flamegraph", url, script, duration, connections, work / "wrk" / f"profile-{body}-svg.txt")
    return {"body": body, "rps": result.rps, "raw": str(raw), "svg": str(svg), **summarize(raw)}


def main(argv: list[str] | None = None) -> None:
    args = argv if argv is not None else sys.argv[1:]
    if not args:
        raise SystemExit("usage: python -m bench.profiling PROFILE.txt [TOP]")
    summary = summarize(Path(args[0]), int(args[1]) if len(args) > 1 else 25)
    print(f"{summary['samples']} samples")
    for title in ("stages", "packages", "self", "total"):
        print(f"\n{title}:")
        for name, share in summary[title]:
            print(f"  {100 * share:5.1f} %  {name}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
