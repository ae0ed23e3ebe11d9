"""Install and run the real Codex CLI against a local Responses server.

``ensure_codex(version)`` installs ``@openai/codex@<version>`` from npm into
``<repo>/.cache/codex-<version>`` once (guarded by ``fcntl.flock`` so parallel pytest
processes do not race) and returns the path of the ``codex`` binary. ``CODEX_VERSION`` is
the version the suite runs; ``SMOKE_CODEX_VERSIONS`` are older ones a few scenarios still
run on (``CODEX_VERSIONS`` has both). ``python -m tests.support.codex`` installs them all
(``scripts/test.sh`` does, so that a failed install fails the run before the tests).

``run_codex()`` runs one non-interactive turn,
``codex exec -m MODEL --skip-git-repo-check --sandbox danger-full-access PROMPT``, with
stdin closed. It writes a fresh ``config.toml`` that points the custom provider ``local``
at ``base_url`` (see /work/shared/REAL_CLIENTS.md) and isolates the run: ``CODEX_HOME``,
``HOME`` and ``TMPDIR`` are private directories, proxy variables and inherited
``CODEX_*``/``OPENAI_*``/``XDG_*`` variables are dropped, so no user config leaks in.

Extra settings (measured on 0.169.0 with ``strace`` on DNS/connect; none of them changes
the request body except ``"analytics_enabled"`` in the ``x-codex-turn-metadata`` JSON):

* ``analytics = { enabled = false }``: stops the lookup of ``ab.chatgpt.com``
  (analytics events).
* ``features = { plugins = false }``: stops the plugin marketplace sync, which looks up
  ``github.com``, ``api.github.com`` and ``chatgpt.com`` at startup.
* ``check_for_update_on_startup = false``: no measurable effect on ``codex exec`` (the
  update check is a TUI thing); kept so an interactive run would not check either.

With all three, a run makes no network access besides ``base_url``. Without them the
lookups only fail fast here (no DNS), but they would cost time on a slow resolver.

* ``TMPDIR`` (environment, not config) points at a private directory: Codex refuses to
  create its PATH helper aliases when ``CODEX_HOME`` is below the system temp dir and
  prints ``WARNING: proceeding, even though we could not create PATH aliases``.

Deliberately *not* set: ``web_search = "disabled"`` (the default sends a hosted
``{"type":"web_search","external_web_access":false}`` tool, which tests want to see), and
``project_doc_max_bytes`` (a fresh temp ``cwd`` has no ``AGENTS.md`` anyway).

Still in every request: ``current_date``/``timezone``/``cwd`` in the
``<environment_context>`` user message and fresh UUIDv7 ids, so bodies are never
byte-identical between runs. Codex always prints ``Reading additional input from
stdin...`` and a banner on stderr; stdout holds only the final assistant message.

With ``builtin=True`` the run uses Codex's built-in OpenAI provider instead, re-pointed
at ``base_url`` with ``openai_base_url`` (the other way users connect: WebSocket first,
remote compaction), its key in ``CODEX_API_KEY``; the quiet settings above still apply.
``version`` installs and runs another Codex release beside the pinned one.

``extra_config`` is appended verbatim at the end of ``config.toml``. Every generated
setting is a root-level key (the provider is an inline table), so ``extra_config`` may add
root keys or ``[tables]``; a default above whose key starts a line of ``extra_config`` is
left out so that it can be overridden.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CODEX_VERSION",
    "CODEX_VERSIONS",
    "SMOKE_CODEX_VERSIONS",
    "CodexResult",
    "ensure_codex",
    "render_builtin_config",
    "render_config",
    "run_codex",
]

CODEX_VERSION = "0.171.0"
SMOKE_CODEX_VERSIONS = ("0.169.0",)
CODEX_VERSIONS = (CODEX_VERSION, *SMOKE_CODEX_VERSIONS)
REPO_ROOT = Path(__file__).resolve().parents[2]

QUIET_DEFAULTS: dict[str, str] = {
    "analytics": "{ enabled = false }",
    "features": "{ plugins = false }",
    "check_for_update_on_startup": "false",
}

_DROPPED_PREFIXES = ("CODEX_", "OPENAI_", "XDG_")
_PROXY_VARS = frozenset({"http_proxy", "https_proxy", "all_proxy", "ftp_proxy", "no_proxy"})


@dataclass(frozen=True)
class CodexResult:
    returncode: int
    stdout: str
    stderr: str
    last_message: str


def ensure_codex(version: str = CODEX_VERSION) -> Path:
    """Install Codex ``version`` under ``.cache/`` if needed; return the binary."""
    prefix = REPO_ROOT / ".cache" / f"codex-{version}"
    binary = prefix / "node_modules" / ".bin" / "codex"
    if binary.exists():
        return binary
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with open(prefix.parent / f"codex-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            cmd = ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix)]
            proc = subprocess.run(
                [*cmd, f"@openai/codex@{version}"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0 or not binary.exists():
                raise RuntimeError(f"npm install of Codex failed:\n{proc.stdout}\n{proc.stderr}")
    return binary


def _quiet_lines(extra_config: str) -> list[str]:
    return [
        f"{key} = {value}"
        for key, value in QUIET_DEFAULTS.items()
        if not re.search(rf"^\s*\[?\s*{re.escape(key)}\b", extra_config, re.MULTILINE)
    ]


def render_builtin_config(base_url: str, extra_config: str = "") -> str:
    """The ``config.toml`` text ``run_codex(builtin=True)`` writes: ``openai_base_url`` alone."""
    lines = [f'openai_base_url = "{base_url}"', *_quiet_lines(extra_config)]
    return "\n".join(lines) + "\n" + extra_config + ("\n" if extra_config else "")


def render_config(base_url: str, extra_config: str = "", provider_settings: str = "") -> str:
    """The ``config.toml`` text ``run_codex`` writes; ``provider_settings`` are more keys of
    the provider's table (``stream_idle_timeout_ms = 20000``)."""
    lines = ['model_provider = "local"', *_quiet_lines(extra_config)]
    more = f", {provider_settings}" if provider_settings else ""
    lines.append(
        "model_providers = { local = { "
        f'name = "local", base_url = "{base_url}", env_key = "LOCAL_KEY", '
        f'wire_api = "responses", request_max_retries = 0, stream_max_retries = 0{more} }} }}'
    )
    return "\n".join(lines) + "\n" + extra_config + ("\n" if extra_config else "")


def _env(
    root: Path, codex_home: Path, api_key: str, extra: dict[str, str] | None
) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in _PROXY_VARS and not k.startswith(_DROPPED_PREFIXES)
    }
    for name in ("home", "tmp"):
        (root / name).mkdir(exist_ok=True)
    env.update(
        CODEX_HOME=str(codex_home),
        LOCAL_KEY=api_key,
        CODEX_API_KEY=api_key,
        HOME=str(root / "home"),
        TMPDIR=str(root / "tmp"),
        NO_PROXY="127.0.0.1,localhost",
    )
    env.update(extra or {})
    return env


def _kill_group(pgid: int) -> None:
    """Kill the process group of the run: node wrapper, native binary and their children."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_codex(
    *,
    base_url: str,
    model: str,
    prompt: str,
    cwd: Path,
    codex_home: Path | None = None,
    api_key: str = "test-key",
    extra_config: str = "",
    timeout: float = 120,
    env: dict[str, str] | None = None,
    builtin: bool = False,
    version: str = CODEX_VERSION,
    provider_settings: str = "",
) -> CodexResult:
    """Run one ``codex exec`` turn of Codex ``version`` against ``base_url``
    (``http://127.0.0.1:PORT/v1``); ``builtin``: through Codex's built-in OpenAI provider."""
    binary = ensure_codex(version)
    with tempfile.TemporaryDirectory(prefix="codex-run-", ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        home = codex_home if codex_home is not None else root / "codex-home"
        home.mkdir(parents=True, exist_ok=True)
        if builtin:
            assert not provider_settings, "the built-in provider takes no settings of its table here"
            config = render_builtin_config(base_url, extra_config)
        else:
            config = render_config(base_url, extra_config, provider_settings)
        (home / "config.toml").write_text(config)
        proc = subprocess.Popen(
            [
                str(binary),
                "exec",
                "-m",
                model,
                "--skip-git-repo-check",
                "--sandbox",
                "danger-full-access",
                prompt,
            ],
            cwd=cwd,
            env=_env(root, home, api_key, env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            stdout, stderr = proc.communicate()
            raise subprocess.TimeoutExpired(proc.args, timeout, stdout, stderr) from None
        _kill_group(proc.pid)  # leftovers, e.g. a command still running in an exec session
    lines = [line for line in stdout.splitlines() if line.strip()]
    return CodexResult(proc.returncode, stdout, stderr, lines[-1] if lines else "")


if __name__ == "__main__":
    for installed in CODEX_VERSIONS:
        print(f"Codex {installed}: {ensure_codex(installed)}")
