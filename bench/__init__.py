"""A rerunnable benchmark of toolwire: ``python -m bench.run`` (see bench/README.md)."""

import sys
import time


def log(message: str) -> None:
    """A progress line on stderr, with the time: what a long run is doing now."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
