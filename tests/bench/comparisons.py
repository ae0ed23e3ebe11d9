"""Running a comparison command (``bench.compare``, ``bench.instructions``) of HEAD against
this checkout's ``src``, as a user would."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_head_against_src(module: str, tool: str, tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``python -m module HEAD ROOT/src --body v1 options...``: it must succeed; ``tool`` is
    the program it needs on PATH."""
    assert shutil.which(tool), f"`{tool}` is not on PATH; install it with `apt-get install -y {tool}`."
    command = [sys.executable, "-m", module, "HEAD", str(ROOT / "src"), "--body", "v1", *options,
               "--work-dir", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return result
