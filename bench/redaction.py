"""What redacting a capture record costs, in process.

    python -m bench.redaction [--iterations N]

The record is a long Codex session (~500 KB: 400 tool outputs) serialized as the capture
writes it; ``Redactor.redact_json`` runs on it clean (no secret in it: the common case,
which must return the very bytes it got) and with a secret in every tenth output. The
median of ``--iterations`` runs is printed, in milliseconds. This used to be a test
asserting "under 15 ms"; on a shared machine that says more about the neighbours than
about the code, so the number lives here.
"""

from __future__ import annotations

import argparse
import statistics
import time

import orjson

from toolwire.server.observe._redact import Redactor

SECRET = "sk-bench-0123456789abcdef"


def record(with_secrets: bool) -> bytes:
    items = [
        {
            "type": "function_call_output",
            "call_id": f"call_{n}",
            "output": "def task_runner():\n    return 42\n" * 40 + (SECRET if with_secrets and n % 10 == 0 else ""),
        }
        for n in range(400)
    ]
    return orjson.dumps({"model": "m", "prompt_cache_key": "k", "input": items})


def median_ms(redactor: Redactor, raw: bytes, iterations: int) -> float:
    timings = []
    for _ in range(iterations):
        started = time.perf_counter()
        redactor.redact_json(raw)
        timings.append(time.perf_counter() - started)
    return 1000 * statistics.median(timings)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args(argv)
    redactor = Redactor([SECRET, "client-key-alpha"])
    for label, raw in (("clean", record(False)), ("40 secrets", record(True))):
        print(f"redact_json, {len(raw) / 1000:.0f} KB record, {label}: {median_ms(redactor, raw, args.iterations):.2f} ms")


if __name__ == "__main__":
    main()
