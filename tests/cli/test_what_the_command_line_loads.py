"""What reading the command line loads: each command its own work, when it runs.

``toolwire --help``, ``codex-config`` and ``keys`` took 1.6-1.9 s on a busy 2-core host
when every command's work was imported up front (the gateway, its HTTP client, the typed
protocol); they take a quarter of that when it is not. Run in a fresh interpreter: this
test process has long imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolwire.agent import Approval, Sandbox
from toolwire.cli._agent import ApprovalFlag, SandboxFlag

# What only serving (or the agent, or a key store) needs. (Not pydantic: typer itself
# loads it to read some signatures.)
HEAVY = ("aiohttp", "uvicorn", "starlette", "toolwire.protocol", "toolwire.server", "toolwire.upstream", "toolwire.agent")

RUN = """
import json
import sys
from toolwire.cli import app
try:
    app(sys.argv[1:], prog_name="toolwire")
except SystemExit as exit:
    assert not exit.code, exit.code
heavy = {heavy!r}
print(json.dumps(sorted(name for name in sys.modules if name.startswith(heavy))), file=sys.stderr)
"""


def loaded_by(*arguments: str) -> list[str]:
    """The heavy modules loaded by running ``toolwire ARGUMENTS`` (it must succeed)."""
    ran = subprocess.run(
        [sys.executable, "-c", RUN.format(heavy=HEAVY), *arguments], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    loaded: list[str] = json.loads(ran.stderr.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize("command", [["--help"], ["--version"], ["serve", "--help"], ["agent", "--help"], ["keys", "--help"]])
def test_help_loads_none_of_the_gateway(command: list[str]) -> None:
    assert loaded_by(*command) == []


def test_codex_config_loads_none_of_the_gateway() -> None:
    assert loaded_by("codex-config", "--base-url", "http://127.0.0.1:8787/v1", "--model", "qwen") == []


def test_listing_keys_loads_no_http_client_nor_server(tmp_path: Path) -> None:
    loaded = loaded_by("keys", "list", "--store", f"sqlite:///{tmp_path / 'keys.db'}")
    assert not [name for name in loaded if name.startswith(("aiohttp", "uvicorn", "starlette", "toolwire.server"))]


def test_the_agent_flags_take_the_agent_s_values() -> None:
    assert [flag.value for flag in SandboxFlag] == [mode.value for mode in Sandbox]
    assert [flag.value for flag in ApprovalFlag] == [mode.value for mode in Approval]
