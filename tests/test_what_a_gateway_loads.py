"""What a gateway process loads: Redis's client and cryptography only when it uses them.

Each costs ~7 MB of every worker's memory (bench: RSS with 500 open streams), so a
gateway with no Redis and no compaction in sight must not import them. Run in a fresh
interpreter: this test process has long imported both.
"""

from __future__ import annotations

import subprocess
import sys

# What ``toolwire serve`` and each of its workers import (the app factory's module).
LOADS = """
import sys
import toolwire.cli
import toolwire.server._factory
print(sorted(name for name in ("redis", "cryptography") if name in sys.modules))
"""


def test_a_gateway_without_redis_or_compaction_loads_neither() -> None:
    ran = subprocess.run([sys.executable, "-c", LOADS], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.strip() == "[]"
