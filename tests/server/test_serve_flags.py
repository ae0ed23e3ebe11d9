"""``toolwire serve`` flags for observability, end to end through the real process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import orjson

from tests.support.chat_upstream import Call, ChatUpstream, ToolCalls
from tests.support.gateway import UPSTREAM_KEY, GatewayProcess


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


def test_the_serving_process_sets_its_garbage_collector_for_serving(tmp_path: Path) -> None:
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
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    frozen, raised = result.stdout.split()
    assert int(frozen) > 10_000, "the modules, validators and app are frozen"
    assert raised == "True"
