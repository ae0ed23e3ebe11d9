"""``toolwire serve`` run in this process, as a user types it: the flags, the checks before
serving, and what it hands uvicorn and each worker.

The port is taken beforehand, so uvicorn builds the app in this process exactly as a
worker does (the configuration read back from the environment, through the factory) and
then fails to listen, with its own message and status 3. The real process, serving,
runs in tests/server (GatewayProcess); here every flag and every refusal is checked.
"""

from __future__ import annotations

import gc
import http.server
import logging
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from typer.testing import CliRunner, Result

from tests.support.chat_upstream import ChatUpstream
from toolwire.cli import app
from toolwire.cli._serve import _validation_words
from toolwire.keys import KeySpec, create_key, open_key_store
from toolwire.server._factory import MODEL_OVERRIDE_ENV
from toolwire.server._settings import CONFIG_ENV

STARTUP_FAILURE = 3  # uvicorn's status when it cannot listen
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?P<level>[A-Z]+) (?P<name>[\w.]+): (?P<message>.*)$")


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else already listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


@pytest.fixture
def as_a_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """What ``toolwire serve`` changes in its process, put back afterwards: the variables it
    hands the workers, uvicorn's loggers and the garbage collector's settings."""
    monkeypatch.setenv(CONFIG_ENV, "unset")
    monkeypatch.setenv(MODEL_OVERRIDE_ENV, "unset")
    loggers = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error", "uvicorn.access")]
    saved = [(logger.handlers[:], logger.level, logger.propagate) for logger in loggers]
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        for logger, (handlers, level, propagate) in zip(loggers, saved, strict=True):
            logger.handlers, logger.propagate = handlers, propagate
            logger.setLevel(level)
        gc.unfreeze()
        gc.set_threshold(*threshold)


def serve(*args: str, env: dict[str, str | None] | None = None) -> Result:
    """``toolwire serve ARGS``, its root logger as empty as in a fresh process (so its own
    logging setup takes effect), and as it was afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers = []
    try:
        return CliRunner().invoke(app, ["serve", *args], env=env)
    finally:
        root.handlers = handlers
        root.setLevel(level)


def handed_to_workers() -> dict[str, Any]:
    config: dict[str, Any] = orjson.loads(os.environ[CONFIG_ENV])
    return config


def log_lines(stderr: str) -> list[tuple[str, str, str]]:
    """``(level, logger, message)`` of the lines in toolwire's log format."""
    return [(m["level"], m["name"], m["message"]) for line in stderr.splitlines() if (m := LOG_LINE.match(line))]


EVERY_FLAG = {
    "--host": "127.0.0.1",
    "--api-key-env": "TW_TEST_CLIENT_KEYS",
    "--admin-key-env": "TW_TEST_ADMIN_KEYS",
    "--max-body-bytes": "1000000",
    "--upstream-timeout": "12.5",
    "--upstream-event-timeout": "90",
    "--upstream-retries": "5",
    "--shutdown-grace": "7",
    "--ws-max-message-bytes": "2000000",
    "--ws-max-lifetime": "600",
    "--ws-ping-interval": "5",
    "--ws-ping-timeout": "6",
    "--store-ttl": "3600",
    "--store-max-entries": "50",
    "--store-max-bytes": "5000000",
    "--capture-max-bytes": "100000",
    "--history-cache-bytes": "3000000",
    "--workers": "1",
    "--client-header-timeout": "3",
    "--max-header-bytes": "4096",
    "--client-body-timeout": "4",
    "--client-body-min-rate": "100",
    "--client-send-timeout": "9",
    "--keep-alive-timeout": "11",
    "--max-connections": "100",
    "--max-streams": "10",
    "--upstream-max-line-bytes": "5000",
    "--upstream-max-event-bytes": "6000",
    "--upstream-max-body-bytes": "7000",
    "--upstream-max-stream-bytes": "8000",
}


@pytest.mark.usefixtures("as_a_process")
def test_every_flag_reaches_the_configuration_each_worker_builds_its_app_from(
    taken_port: int, tmp_path: Path
) -> None:
    capture = tmp_path / "capture"
    flags = [part for flag, value in EVERY_FLAG.items() for part in (flag, value)]
    result = serve(
        "--upstream", "http://127.0.0.1:9/v1", "--upstream-key-env", "TW_TEST_UPSTREAM_KEY", "--preset", "deepseek",
        "--model", "qwen3", "--port", str(taken_port), "--store", "memory://", "--capture", str(capture),
        "--inspector", "--insecure-no-auth", *flags,
        env={"TW_TEST_CLIENT_KEYS": "client-1", "TW_TEST_ADMIN_KEYS": "admin-1", "TW_TEST_UPSTREAM_KEY": "sk-x"},
    )  # fmt: skip
    assert result.exit_code == STARTUP_FAILURE, result.output
    assert f"error while attempting to bind on address ('127.0.0.1', {taken_port})" in result.stderr
    config = handed_to_workers()
    server = config["server"]
    for flag, value in EVERY_FLAG.items():
        name = {"--store-ttl": "store_ttl_seconds"}.get(flag, flag[2:].replace("-", "_"))
        assert str(server[name]) in (value, value + ".0"), (flag, server[name])
    assert (server["port"], server["store"], server["capture_dir"]) == (taken_port, "memory://", str(capture))
    assert server["inspector"] is True and server["insecure_no_auth"] is True
    assert config["upstreams"] == [
        {**config["upstreams"][0], "name": "upstream", "kind": "chat", "base_url": "http://127.0.0.1:9/v1",
         "api_key_env": "TW_TEST_UPSTREAM_KEY", "preset": "deepseek", "default": True},
    ]  # fmt: skip
    assert os.environ[MODEL_OVERRIDE_ENV] == "qwen3"
    # uvicorn built the app from that configuration in this process, as each worker does:
    # its capture directory is made, and the open-files limit it logged is this process's.
    assert capture.is_dir()
    assert log_lines(result.stderr)[0][:2] == ("INFO", "toolwire.server")
    assert re.fullmatch(
        r"per process: at most 100 client connections and 10 streams \(open files limit \d+\)",
        log_lines(result.stderr)[0][2],
    )
    # what it serves, as it starts: the address, the upstream (its key's variable, not the key)
    assert [message for _, _, message in log_lines(result.stderr)[1:4]] == [
        f"the Responses API at http://127.0.0.1:{taken_port}/v1",
        "upstream 'upstream': a Chat Completions server (vLLM, Ollama, llama.cpp, DeepSeek, ...) at "
        "http://127.0.0.1:9/v1, preset deepseek, its key from $TW_TEST_UPSTREAM_KEY; serves every model (as qwen3)",
        "responses and client keys kept in this process only (memory://)",
    ]
    assert "sk-x" not in result.stderr
    # uvicorn was told the app is a factory (no warning that it guessed so).
    assert [line for line in result.stderr.splitlines() if line.startswith("WARNING:")] == []


@pytest.mark.usefixtures("as_a_process")
def test_defaults_without_flags(taken_port: int) -> None:
    result = serve("--upstream", "mock", "--port", str(taken_port), "--store", "none")
    assert result.exit_code == STARTUP_FAILURE, result.output
    config = handed_to_workers()
    assert config["upstreams"] == [{**config["upstreams"][0], "name": "mock", "kind": "mock", "default": True}]
    assert config["server"]["insecure_no_auth"] is False and config["server"]["capture_dir"] is None
    assert os.environ[MODEL_OVERRIDE_ENV] == ""
    assert "INFO:     Started server process" in result.stderr  # uvicorn logs at --log-level info


@pytest.mark.usefixtures("as_a_process")
def test_log_level_warning_keeps_the_information_out(taken_port: int) -> None:
    result = serve("--upstream", "mock", "--port", str(taken_port), "--store", "none", "--log-level", "warning")
    assert result.exit_code == STARTUP_FAILURE, result.output
    assert log_lines(result.stderr) == []
    assert "Started server process" not in result.stderr
    assert "address already in use" in result.stderr


@pytest.mark.usefixtures("as_a_process")
def test_a_configuration_file_with_flags_over_it(taken_port: int, tmp_path: Path) -> None:
    path = tmp_path / "toolwire.toml"
    path.write_text(
        '[server]\nport = 1\nmax_streams = 3\nstore = "none"\n\n'
        '[[upstreams]]\nname = "local"\nkind = "mock"\ndefault = true\n\n'
        '[[models]]\nname = "fast"\nupstream = "local"\n'
    )
    result = serve("--config", str(path), "--port", str(taken_port), "--upstream", "mock")
    assert result.exit_code == STARTUP_FAILURE, result.output
    config = handed_to_workers()
    assert (config["server"]["port"], config["server"]["max_streams"]) == (taken_port, 3)
    assert [(u["name"], u["default"]) for u in config["upstreams"]] == [("local", False), ("mock", True)]
    assert [model["name"] for model in config["models"]] == ["fast"]


def test_a_configuration_file_that_cannot_be_read(tmp_path: Path) -> None:
    result = serve("--config", str(tmp_path / "missing.toml"))
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {tmp_path / 'missing.toml'}: cannot read the configuration file: No such file or directory\n"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--port", "70000"], "error: port: Input should be less than or equal to 65535\n"),
        (
            ["--upstream-retries", "0", "--max-body-bytes", "0"],
            "error: max_body_bytes: Input should be greater than 0; "
            "upstream_retries: Input should be greater than or equal to 1\n",
        ),
        (["--upstream", "nowhere"], "error: --upstream takes a URL or one of: mock, ollama, vllm"),
        (
            ["--upstream", "http://user:secret-pw@[::1/v1"],
            "error: base_url: http://[::1/v1 is not a URL: its port must be a number up to 65535, and an IPv6 host "
            "goes in brackets\n",
        ),
    ],
)
def test_flags_that_make_no_sense_are_refused_naming_the_setting(flags: list[str], message: str) -> None:
    result = serve("--upstream", "mock", *flags)
    assert result.exit_code == 2
    assert result.stderr.startswith(message)


@pytest.mark.parametrize(
    ("error", "words"),
    [
        ({"loc": ("port",), "msg": "Input should be less than or equal to 65535"}, "port: Input should be less than or equal to 65535"),
        ({"loc": ("upstreams", 0, "base_url"), "msg": "Value error, ftp://h is not an http:// or https:// URL"},
         "upstreams[0].base_url: ftp://h is not an http:// or https:// URL"),
        ({"loc": (), "msg": "Value error, upstream 'u' of kind 'chat' needs a base_url"}, "upstream 'u' of kind 'chat' needs a base_url"),
    ],
)  # fmt: skip
def test_a_validation_error_reads_as_where_then_what(error: dict[str, object], words: str) -> None:
    """pydantic's own prefix for a validator's ValueError is left out, and so is an empty place."""
    assert _validation_words(error) == words


def test_every_problem_is_printed_before_exiting_2() -> None:
    result = serve(
        "--upstream", "http://127.0.0.1:9/v1", "--upstream-key-env", "TW_TEST_UNSET", "--host", "0.0.0.0",
        "--store", "none", env={"TW_TEST_UNSET": None},
    )  # fmt: skip
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0] == "error: the upstream 'upstream' takes its key from TW_TEST_UNSET, which is not set."
    assert lines[1].startswith("error: refusing to listen on 0.0.0.0 without client keys")
    assert len(lines) == 2


def test_client_key_variables_are_read_from_the_environment() -> None:
    result = serve(
        "--upstream", "mock", "--store", "none", "--api-key-env", "TW_TEST_KEYS", "--admin-key-env", "TW_TEST_ADMIN",
        env={"TW_TEST_KEYS": None, "TW_TEST_ADMIN": None},
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: --api-key-env names TW_TEST_KEYS, which holds no key.",
        "error: --admin-key-env names TW_TEST_ADMIN, which holds no key.",
    ]


def test_caps_that_do_not_fit_the_open_files_limit() -> None:
    result = serve("--upstream", "mock", "--store", "none", "--max-connections", "100000000")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: 100000000 connections (max_connections) and ")
    assert "(ulimit -n): raise the limit, or set lower caps." in result.stderr


@pytest.mark.usefixtures("as_a_process")
def test_an_open_address_is_served_when_the_store_holds_client_keys(taken_port: int, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'toolwire.sqlite3'}"
    refused = serve("--upstream", "mock", "--host", "0.0.0.0", "--port", str(taken_port), "--store", store)
    assert refused.exit_code == 2
    assert "refusing to listen on 0.0.0.0 without client keys" in refused.stderr

    async def make_key() -> None:
        keys = open_key_store(store, for_cli=True)
        try:
            await create_key(keys, KeySpec(name="alice"))
        finally:
            await keys.aclose()

    import asyncio

    asyncio.run(make_key())
    with socket.socket() as taken:  # the same port, on every address this time
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        served = serve("--upstream", "mock", "--host", "0.0.0.0", "--port", str(port), "--store", store)
    assert served.exit_code == STARTUP_FAILURE, served.output
    assert "refusing" not in served.stderr


def test_a_store_that_cannot_say_whether_it_holds_keys() -> None:
    result = serve("--upstream", "mock", "--host", "0.0.0.0", "--store", "redis://127.0.0.1:1/0")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: cannot tell whether the store holds client keys: ")


def test_a_store_file_that_cannot_be_made_is_refused_before_serving(tmp_path: Path) -> None:
    (tmp_path / "plain-file").write_bytes(b"")
    path = tmp_path / "plain-file" / "toolwire.sqlite3"
    result = serve("--upstream", "mock", "--store", f"sqlite://{path}")
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: the store cannot be used: The key store {path} failed: [Errno 20] Not a directory: "
        f"'{tmp_path / 'plain-file'}'. Give a file toolwire can create and write "
        "(--store sqlite:///path/to/toolwire.sqlite3), or --store memory:// (kept by this process only).\n"
    )
    assert "Started server process" not in result.stderr


@pytest.mark.usefixtures("as_a_process")
def test_a_store_server_that_cannot_be_reached_is_told_at_start(taken_port: int) -> None:
    """Redis may come up after the gateway: it serves, and says at once what is wrong."""
    result = serve("--upstream", "mock", "--port", str(taken_port), "--store", "redis://:hunter2@127.0.0.1:1/0")
    assert result.exit_code == STARTUP_FAILURE, result.output
    lines = log_lines(result.stderr)
    kept = lines.index(("INFO", "toolwire.server", "responses and client keys kept in Redis at redis://:***@127.0.0.1:1/0"))
    level, _, message = lines[kept + 1]
    assert level == "WARNING"
    assert message.startswith("the store cannot be reached now: The key store redis://:***@127.0.0.1:1/0 is unreachable (")
    assert message.endswith(
        "Until it can, the requests that need it are answered 503 (each one whose client key is looked up there, "
        "each one that keeps or continues a response), and so is /readyz."
    )
    assert "hunter2" not in result.stderr


@pytest.mark.usefixtures("as_a_process")
def test_a_store_that_answers_is_made_before_serving_and_not_warned_of(taken_port: int, tmp_path: Path) -> None:
    path = tmp_path / "state" / "toolwire.sqlite3"
    result = serve("--upstream", "mock", "--port", str(taken_port), "--store", f"sqlite://{path}")
    assert result.exit_code == STARTUP_FAILURE, result.output
    assert [line for line in log_lines(result.stderr) if line[0] != "INFO"] == []
    assert path.is_file()


@pytest.mark.usefixtures("as_a_process")
def test_an_upstream_that_cannot_be_reached_is_told_at_start(
    taken_port: int, upstream: ChatUpstream, tmp_path: Path
) -> None:
    """The model server may come up after the gateway: it serves, and says at once which
    upstream does not answer and why; an upstream that answers is not warned of."""
    config = (
        '[[upstreams]]\nname = "local"\nbase_url = "http://127.0.0.1:1/v1"\ndefault = true\n'
        f'[[upstreams]]\nname = "live"\nbase_url = "{upstream.base_url}"\n'
    )
    (tmp_path / "toolwire.toml").write_text(config)
    result = serve("--config", str(tmp_path / "toolwire.toml"), "--port", str(taken_port), "--store", "none")
    assert result.exit_code == STARTUP_FAILURE, result.output
    assert [line for line in log_lines(result.stderr) if line[0] != "INFO"] == [
        ("WARNING", "toolwire.server", "upstream 'local' does not answer now: Cannot reach the upstream at "
         "http://127.0.0.1:1/v1: no connection to 127.0.0.1:1 (Connection refused). Until it does, the requests "
         "sent to it are answered 502, and /readyz 503."),
    ]  # fmt: skip
    assert upstream.requests[-1].path == "/v1/models"


class _AnsweringEveryGet(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the server's ``answer`` (status, body), its key echoed."""

    def do_GET(self) -> None:
        status, body = self.server.answer  # type: ignore[attr-defined]
        said = body.replace(b"{key}", self.headers.get("Authorization", "").removeprefix("Bearer ").encode())
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(said)))
        self.end_headers()
        self.wfile.write(said)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("answer", "warning"),
    [
        ((401, b"Invalid key {key}"),
         "answers, but it refuses the key the gateway sends (GET /models answered HTTP 401 Unauthorized "
         '("Invalid key [redacted]"))'),
        ((404, b"404 page not found"),
         'answers, but GET /models answered HTTP 404 Not Found ("404 page not found"), not an API\'s answer: '
         "is that the API's address (often ending in /v1)?"),
        ((200, b"{}"), None),
    ],
)  # fmt: skip
@pytest.mark.usefixtures("as_a_process")
def test_what_an_upstreams_answer_to_its_check_says_is_told_at_start(
    taken_port: int, answer: tuple[int, bytes], warning: str | None
) -> None:
    """A key it refuses (which it may echo: the gateway's secrets are taken out), or an
    address that is not the API's (its /v1 left out): told before the first request fails."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AnsweringEveryGet)
    server.answer = answer  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        result = serve(
            "--upstream", url, "--upstream-key-env", "TW_TEST_UPSTREAM_KEY", "--port", str(taken_port),
            "--store", "none", env={"TW_TEST_UPSTREAM_KEY": "sk-secret-9"},
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == STARTUP_FAILURE, result.output
    expected = [] if warning is None else [("WARNING", "toolwire.server", f"upstream 'upstream' {warning}")]
    assert [line for line in log_lines(result.stderr) if line[0] != "INFO"] == expected
    assert "sk-secret-9" not in result.stderr


@pytest.mark.usefixtures("as_a_process")
def test_workers_each_listen_on_the_address_and_stop_on_sigterm(capfd: pytest.CaptureFixture[str]) -> None:
    """``--workers 2``: this process supervises two worker processes, each serving the
    port; SIGTERM stops them all and ``serve`` returns 0. No one logs each request."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    answers: list[int] = []
    finished = threading.Event()

    def client() -> None:
        deadline = time.monotonic() + 60
        while not finished.is_set() and time.monotonic() < deadline:
            try:
                answers.append(httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code)
            except httpx.HTTPError:
                time.sleep(0.1)
                continue
            os.kill(os.getpid(), signal.SIGTERM)  # as a service manager stops it
            return

    helper = threading.Thread(target=client)
    helper.start()
    try:
        result = serve("--upstream", "mock", "--port", str(port), "--store", "none", "--workers", "2")
    finally:
        finished.set()
        helper.join()
    assert answers == [200], result.output
    assert result.exit_code == 0, result.output
    started = [message for level, name, message in log_lines(result.stderr) if name == "toolwire.server"]
    assert re.fullmatch(rf"2 workers on 127\.0\.0\.1:{port} \(pids \d+, \d+\)", started[-1]), started
    workers_said = capfd.readouterr()
    assert "GET /healthz" not in workers_said.out + workers_said.err


@pytest.mark.usefixtures("as_a_process")
def test_workers_refuse_a_port_in_use(taken_port: int) -> None:
    result = serve("--upstream", "mock", "--port", str(taken_port), "--store", "none", "--workers", "2")
    assert result.exit_code == 1
    assert ("ERROR", "toolwire.server", f"cannot listen on 127.0.0.1:{taken_port}: Address already in use") in log_lines(
        result.stderr
    )
