"""``toolwire serve`` flags for observability and bounds, end to end through the real process."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson

from tests.support.chat_upstream import Call, ChatUpstream, ToolCalls
from tests.support.gateway import UPSTREAM_KEY, GatewayProcess
from toolwire.config import load_config


def test_capture_metrics_and_inspector_through_serve(upstream: ChatUpstream, tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    with GatewayProcess(upstream.base_url, tmp_path / "gw.log", "--capture", str(capture), "--inspector") as gateway:
        upstream.enqueue(ToolCalls([Call("apply_patch", '{"input": "*** Begin Patch\\n*** End Patch\\n"}')]))
        body = {
            "model": "m",
            "input": "patch it",
            "tools": [{"type": "custom", "name": "apply_patch", "description": "edit files"}],
        }
        response = httpx.post(gateway.base_url + "/responses", json=body, timeout=30)
        assert response.status_code == 200
        assert response.json()["output"][0]["type"] == "custom_tool_call"

        metrics = httpx.get(gateway.url + "/metrics", timeout=10).text
        assert "toolwire_requests_total" in metrics

        recent = httpx.get(gateway.url + "/ui/api/exchanges", timeout=10).json()
        assert recent, "the inspector lists the exchange"
        page = httpx.get(gateway.url + "/ui", timeout=10, follow_redirects=True)
        assert page.status_code == 200 and "<html" in page.text.lower()

    [capture_file] = list(capture.iterdir())
    text = capture_file.read_text()
    assert UPSTREAM_KEY not in text
    record = orjson.loads(text.splitlines()[0])
    assert "apply_patch" in orjson.dumps(record).decode()


def test_the_inspector_is_off_unless_asked_for(gateway: GatewayProcess) -> None:
    page = httpx.get(gateway.url + "/ui", timeout=10)
    assert page.status_code == 404 and "--inspector" in page.text
    assert httpx.get(gateway.url + "/ui/api/exchanges", timeout=10).status_code == 404


def test_the_serving_process_sets_its_garbage_collector_for_serving() -> None:
    """What each ``toolwire serve`` worker runs: once its app is built, what is alive then is
    out of every collection and young collections wait for more objects than the default."""
    script = (
        "import gc, os\n"
        "from toolwire.config import GatewayConfig\n"
        "from toolwire.server._factory import CONFIG_ENV, YOUNG_GENERATION_THRESHOLD, app_from_env\n"
        "config = GatewayConfig.model_validate({'server': {'store': 'memory://'}})\n"
        "os.environ[CONFIG_ENV] = config.model_dump_json()\n"
        "assert gc.get_freeze_count() == 0 and gc.get_threshold()[0] == 700\n"
        "app_from_env()\n"
        "print(gc.get_freeze_count(), gc.get_threshold()[0] == YOUNG_GENERATION_THRESHOLD)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    frozen, raised = result.stdout.split()
    assert int(frozen) > 10_000, "the modules, validators and app are frozen"
    assert raised == "True"


def test_the_caps_come_from_the_open_files_limit_raised_to_the_hard_one(tmp_path: Path) -> None:
    """Soft 256, hard 1024: the gateway lifts the soft limit (as Go's runtime does) and
    sizes its caps from 1024; with both at 256, from 256."""
    for (soft, hard), expected in [((256, 1024), (675, 240, 1024)), ((256, 256), (135, 48, 256))]:
        gateway = GatewayProcess("mock", tmp_path / f"gw-{soft}-{hard}.log")
        with gateway.log_path.open("ab") as log:
            gateway.process = subprocess.Popen(
                gateway.args, env=gateway.env, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=lambda soft=soft, hard=hard: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)),
            )
        try:
            assert _wait_for_log(gateway, "client connections"), gateway.log()
            connections, streams, files = expected
            assert (
                f"at most {connections} client connections and {streams} streams (open files limit {files})"
                in gateway.log()
            ), gateway.log()
        finally:
            gateway.stop()


def _wait_for_log(gateway: GatewayProcess, text: str, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in gateway.log():
            return True
        if gateway.process is not None and gateway.process.poll() is not None:
            return text in gateway.log()
        time.sleep(0.05)
    return False


def test_caps_that_do_not_fit_the_open_files_limit_are_refused_at_start(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "toolwire", "serve", "--upstream", "mock", "--store", "none", "--max-connections", "5000"],
        capture_output=True, text=True, timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024)),
    )
    assert result.returncode == 2, result.stderr
    assert "5000 connections (max_connections)" in result.stderr
    assert "may open 1024 (ulimit -n)" in result.stderr


def test_the_bounds_are_config_keys(tmp_path: Path) -> None:
    config = tmp_path / "toolwire.toml"
    config.write_text(
        "[server]\nclient_header_timeout = 5\nmax_header_bytes = 32768\nclient_body_timeout = 20\n"
        "client_body_min_rate = 4096\nclient_send_timeout = 30\nkeep_alive_timeout = 15\nmax_connections = 100\n"
        "max_streams = 10\nupstream_max_line_bytes = 1048576\nupstream_max_event_bytes = 2097152\n"
        "upstream_max_body_bytes = 4194304\nupstream_max_stream_bytes = 8388608\n"
    )
    server = load_config(config).server
    assert (server.client_header_timeout, server.max_header_bytes, server.max_connections, server.max_streams) == (5, 32768, 100, 10)
    assert (server.upstream_max_line_bytes, server.upstream_max_stream_bytes) == (1048576, 8388608)
