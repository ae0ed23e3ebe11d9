"""The web inspector: ``RecentExchanges``, its JSON API, and the page in headless Chromium.

The browser test needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium``
package; without them it is skipped, except under CI (``TOOLWIRE_CI=1``), where it fails.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import uvicorn

from tests.support.chat_upstream import Call, ChatUpstream, Text, ToolCalls
from tests.support.gateway import UPSTREAM_KEY_ENV, free_port
from tests.support.observed import (
    CUSTOM_PATCH_TOOL,
    PATCH,
    exchange,
    observed_app,
    observed_client,
    observed_config,
    same_size,
)
from tests.support.responses_upstream import ResponsesUpstream, Whole
from tests.support.served import as_asgi3
from toolwire.config import UpstreamConfig
from toolwire.protocol import SSEDecoder
from toolwire.server._exchange import Exchange
from toolwire.server.observe._inspector import RecentExchanges

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOT_ENV = "TOOLWIRE_INSPECTOR_SCREENSHOT"


def streamed_tool_call(client: Any, base_url: str = "") -> str:
    """A streamed request whose answer is a custom ``apply_patch`` call; the response id."""
    body = {"model": "qwen3", "input": "add hello.txt", "stream": True, "tools": [CUSTOM_PATCH_TOOL]}
    response = client.post(base_url + "/v1/responses", json=body)
    assert response.status_code == 200
    events = [orjson.loads(event.data) for event in SSEDecoder().feed(response.content)]
    assert events[-1]["type"] == "response.completed"
    return str(events[0]["response"]["id"])


def patch_call() -> ToolCalls:
    return ToolCalls([Call("apply_patch", orjson.dumps({"input": PATCH}).decode())], text="Adding the file.")


# --------------------------------------------------------------------------- the API


def test_the_api_lists_an_exchange_and_shows_its_four_sides(upstream: ChatUpstream) -> None:
    upstream.enqueue(patch_call())
    with observed_client(observed_config(upstream.base_url)) as (client, _):
        request_id = streamed_tool_call(client)
        listing = client.get("/ui/api/exchanges")
        detail = client.get(f"/ui/api/exchanges/{request_id}")
    assert listing.status_code == 200 and listing.headers["cache-control"] == "no-store"
    [summary] = listing.json()["data"]
    assert summary["request_id"] == request_id and summary["outcome"] == "completed"
    assert summary["tool_calls"] == [{"name": "apply_patch", "namespace": None, "type": "custom_tool_call"}]
    assert "custom apply_patch restored" in summary["conversions"]
    assert summary["time"].endswith("+00:00")
    record = detail.json()
    assert record["client_request"]["tools"] == [CUSTOM_PATCH_TOOL]
    assert record["upstream_request"]["messages"][-1] == {"role": "user", "content": "add hello.txt"}
    assert record["upstream_chunks"] and record["events"]
    assert listing.json()["kept"]["exchanges"] == 1


@pytest.mark.parametrize("backend", ["chat", "responses"])
def test_a_compaction_is_recorded_with_what_the_upstream_answered(
    backend: str, upstream: ChatUpstream, responses_upstream: ResponsesUpstream
) -> None:
    """``/v1/responses/compact``: the gateway's own (a Chat backend's whole answer, sealed)
    and a Responses backend's (its compaction object), each kept as the upstream's side."""
    config = observed_config(upstream.base_url)
    if backend == "chat":
        upstream.enqueue(Text("The user wants a fix."))
    else:
        config.upstreams[0] = UpstreamConfig(
            name="local", kind="responses", base_url=responses_upstream.base_url, supports_compaction=True,
            api_key_env=UPSTREAM_KEY_ENV, default=True,
        )  # fmt: skip
        responses_upstream.enqueue(Whole({"object": "response.compaction", "id": "theirs", "output": [], "created_at": 3}))
    with observed_client(config) as (client, _):
        compacted = client.post("/v1/responses/compact", json={"model": "m", "input": "hi"})
        record = client.get(f"/ui/api/exchanges/{compacted.json()['id']}").json()
    assert compacted.status_code == 200 and record["outcome"] == "completed"
    [answer] = record["upstream_chunks"]
    if backend == "chat":
        assert answer["choices"][0]["message"]["content"] == "The user wants a fix."
    else:
        assert answer["id"] == "theirs"


def test_an_exchange_no_longer_kept_is_a_404(upstream: ChatUpstream) -> None:
    with observed_client(observed_config(upstream.base_url)) as (client, _):
        response = client.get("/ui/api/exchanges/resp_gone")
    assert response.status_code == 404 and "resp_gone" in response.json()["error"]["message"]


def test_the_list_takes_a_limit(upstream: ChatUpstream) -> None:
    with observed_client(observed_config(upstream.base_url)) as (client, _):
        assert client.get("/ui/api/exchanges?limit=x").status_code == 400
        assert client.get("/ui/api/exchanges?limit=5").json()["data"] == []


def test_the_page_and_its_assets_are_served_without_a_build_step(upstream: ChatUpstream) -> None:
    with observed_client(observed_config(upstream.base_url)) as (client, _):
        page = client.get("/ui")  # redirected to /ui/
        script = client.get("/ui/inspector.js")
        style = client.get("/ui/inspector.css")
    assert page.status_code == 200 and page.url.path == "/ui/"
    assert page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert '<script src="/ui/inspector.js"' in page.text
    assert script.headers["content-type"].startswith("text/javascript") and "innerHTML" not in script.text
    assert style.headers["content-type"].startswith("text/css")


def test_with_the_inspector_off_its_page_says_how_to_turn_it_on(upstream: ChatUpstream) -> None:
    with observed_client(observed_config(upstream.base_url, inspector=False)) as (client, _):
        pages = [client.get(path) for path in ("/ui", "/ui/")]
    for page in pages:
        assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
        assert page.text == (
            "<!doctype html><title>toolwire inspector</title><p>The inspector is off. Start the gateway "
            "with <code>--inspector</code> (or <code>inspector = true</code> under <code>[server]</code>) "
            "to see each exchange here.</p>"
        )


def test_the_inspector_answers_only_get(upstream: ChatUpstream) -> None:
    with observed_client(observed_config(upstream.base_url)) as (client, _):
        refused = {path: client.post(path, follow_redirects=False).status_code
                   for path in ("/ui", "/ui/", "/ui/inspector.js", "/ui/api/exchanges")}
    assert refused == dict.fromkeys(refused, 405)


def test_with_client_keys_the_api_wants_one(upstream: ChatUpstream) -> None:
    keys = [b"client-key-alpha", b"client-key-beta"]
    with observed_client(observed_config(upstream.base_url), client_keys=keys) as (client, _):
        assert client.get("/ui/api/exchanges").status_code == 401
        assert client.get("/ui/api/exchanges", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/ui/api/exchanges/resp_x", headers={"Authorization": "Basic abc"}).status_code == 401
        ok = client.get("/ui/api/exchanges", headers={"Authorization": "Bearer client-key-beta"})
        assert ok.status_code == 200
        assert client.get("/ui/").status_code == 200  # the page itself holds nothing


def test_without_client_keys_only_loopback_clients_see_exchanges(upstream: ChatUpstream) -> None:
    with observed_client(observed_config(upstream.base_url), client_host="192.0.2.10") as (client, _):
        response = client.get("/ui/api/exchanges")
    assert response.status_code == 403 and "loopback" in response.json()["error"]["message"]


# --------------------------------------------------------------------------- the ring


def test_exchanges_in_progress_are_listed_first_as_pending() -> None:
    recent = RecentExchanges()
    recent.finished(exchange("resp_done"))
    running = Exchange("resp_running", b'{"model":"m","input":"x"}')
    recent.started(running)
    assert [(s["request_id"], s["outcome"]) for s in recent.summaries()] == [
        ("resp_running", "pending"),
        ("resp_done", "completed"),
    ]
    record = recent.record("resp_running")
    assert record is not None and orjson.loads(record)["traffic_omitted"] == "the exchange is still in progress"
    running.finish("completed")
    recent.finished(running)
    assert [s["request_id"] for s in recent.summaries()] == ["resp_running", "resp_done"]


def test_the_ring_keeps_the_newest_exchanges_by_count() -> None:
    recent = RecentExchanges(max_exchanges=3)
    for n in range(10):
        recent.finished(exchange(f"resp_{n}"))
    assert [s["request_id"] for s in recent.summaries()] == ["resp_9", "resp_8", "resp_7"]
    assert recent.record("resp_6") is None and recent.record("resp_7") is not None
    assert len(recent) == 3


def test_the_ring_is_bounded_in_bytes() -> None:
    recent = RecentExchanges(max_bytes=20_000)
    body = orjson.dumps({"model": "m", "input": "x" * 3000})
    for n in range(20):
        recent.finished(exchange(f"resp_{n}", client_request=body))
    assert recent.kept_bytes <= 20_000
    assert 3 <= len(recent) < 20
    assert recent.summaries()[0]["request_id"] == "resp_19"


def test_a_huge_record_is_kept_without_its_traffic() -> None:
    recent = RecentExchanges(max_bytes=40_000)  # records up to 10 000 bytes
    recent.finished(exchange("resp_small"))
    recent.finished(exchange("resp_huge", client_request=orjson.dumps({"model": "m", "input": "x" * 50_000})))
    huge = recent.record("resp_huge")
    assert huge is not None and len(huge) < 2000
    assert orjson.loads(huge)["traffic_omitted"].endswith("is larger than the inspector keeps (10000)")
    assert recent.record("resp_small") is not None


def test_the_ring_keeps_at_least_the_newest_exchange_and_refuses_bounds_of_nothing() -> None:
    tiny = RecentExchanges(max_bytes=1)
    for n in range(3):
        tiny.finished(exchange(f"resp_{n}"))
    assert [s["request_id"] for s in tiny.summaries()] == ["resp_2"]
    for bounds in ({"max_bytes": 0}, {"max_exchanges": 0}):
        with pytest.raises(ValueError, match="max_exchanges must be at least 1 and max_bytes positive"):
            RecentExchanges(**bounds)


def test_a_record_of_exactly_the_largest_size_is_kept_whole() -> None:
    made = exchange("resp_edge", client_request=orjson.dumps({"model": "m", "input": "x" * 5000}))
    size = len(RecentExchanges().encoder.plain(made))
    at_the_edge = RecentExchanges(max_record_bytes=size)
    at_the_edge.finished(made)
    assert at_the_edge.record("resp_edge") == at_the_edge.encoder.plain(made)
    over = RecentExchanges(max_record_bytes=size - 1)
    over.finished(made)
    record = over.record("resp_edge")
    assert record is not None and "larger than the inspector keeps" in orjson.loads(record)["traffic_omitted"]


def test_the_bytes_kept_are_those_of_the_exchanges_kept() -> None:
    one = RecentExchanges()
    one.finished(same_size("resp_0"))
    size = one.kept_bytes
    recent = RecentExchanges(max_exchanges=2)
    for n in range(5):
        recent.finished(same_size(f"resp_{n}"))
        assert recent.kept_bytes == min(n + 1, 2) * size
    exactly_two = RecentExchanges(max_bytes=2 * size)
    for n in range(3):
        exactly_two.finished(same_size(f"resp_{n}"))
    assert [s["request_id"] for s in exactly_two.summaries()] == ["resp_2", "resp_1"]
    assert exactly_two.kept_bytes == 2 * size


def test_summaries_carry_the_usage() -> None:
    usage = {"input_tokens": 12, "output_tokens": 5, "total_tokens": 17}
    recent = RecentExchanges()
    recent.finished(exchange("resp_used", usage=usage))
    assert recent.summaries()[0]["usage"] == usage


def test_an_exchange_kept_by_the_capture_and_the_inspector_is_encoded_once() -> None:
    from toolwire.server.observe._record import RecordEncoder
    from toolwire.server.observe._redact import Redactor

    encoder = RecordEncoder(Redactor())
    made = exchange("resp_shared")
    assert encoder.plain(made) is encoder.plain(made)
    assert encoder.plain(exchange("resp_other")) != encoder.plain(made)


def test_summaries_of_exchanges_in_progress_are_redacted() -> None:
    from toolwire.server.observe._record import RecordEncoder
    from toolwire.server.observe._redact import Redactor

    recent = RecentExchanges(encoder=RecordEncoder(Redactor(["s3cr3t-key-value"])))
    running = Exchange("resp_running", b'{"model":"m","input":"x"}')
    running.warnings = ["the upstream echoed s3cr3t-key-value"]
    recent.started(running)
    assert recent.summaries()[0]["warnings"] == ["the upstream echoed [redacted]"]
    record = recent.record("resp_running")
    assert record is not None and orjson.loads(record)["warnings"] == ["the upstream echoed [redacted]"]


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        (b'{"input": "no model"}', {"input": "no model"}),  # JSON, but no request: shown as JSON
        (b"\xff\xfe not JSON", "\ufffd\ufffd not JSON"),  # not even text: shown as text, what it can
    ],
)
def test_the_record_of_a_body_that_was_no_request_shows_what_came(body: bytes, shown: Any) -> None:
    refused = exchange("resp_refused", client_request=body, model=None, outcome="error", status=400)
    recent = RecentExchanges()
    recent.finished(refused)
    record = recent.record("resp_refused")
    assert record is not None and orjson.loads(record)["client_request"] == shown


def test_kept_records_are_redacted() -> None:
    from toolwire.server.observe._record import RecordEncoder
    from toolwire.server.observe._redact import Redactor

    recent = RecentExchanges(encoder=RecordEncoder(Redactor(["s3cr3t-key-value"])))
    recent.finished(exchange(client_request=b'{"model":"m","input":"use s3cr3t-key-value"}',
                             error="bad key s3cr3t-key-value", outcome="error", status=401, error_kind="UpstreamError"))
    record = recent.record("resp_1")
    assert record is not None and b"s3cr3t" not in record
    assert recent.summaries()[0]["error"] == "bad key [redacted]"


# --------------------------------------------------------------------------- the page, in Chromium


class LiveServer:
    """An ASGI app served by uvicorn on a free loopback port, in a background thread."""

    def __init__(self, app: Any) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        port = int(self.url.rsplit(":", 1)[1])
        config = uvicorn.Config(as_asgi3(app), host="127.0.0.1", port=port, log_level="warning", loop="asyncio", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the selenium package")
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--window-size=1680,1050",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_page_lists_the_exchange_and_shows_its_tool_call(
    browser: Any, upstream: ChatUpstream, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    upstream.enqueue(Text('Hi <img src=x onerror="document.title=\'pwned\'">'))
    upstream.enqueue(patch_call())
    app, _ = observed_app(observed_config(upstream.base_url))
    with LiveServer(app) as server, httpx.Client(timeout=30) as client:
        client.post(server.url + "/v1/responses", json={"model": "qwen3", "input": "say hi"})
        request_id = streamed_tool_call(client, server.url)

        browser.get(server.url + "/ui/")
        wait = WebDriverWait(browser, 15)
        row = wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, f'tr[data-id="{request_id}"]')))
        assert "apply_patch" in row.text
        assert len(browser.find_elements(By.CSS_SELECTOR, "#exchanges tbody tr")) == 2
        row.click()

        wait.until(ec.text_to_be_present_in_element((By.ID, "detail-title"), request_id))
        [chip] = browser.find_elements(By.CSS_SELECTOR, "#detail-tools .chip.tool-call")
        assert "apply_patch" in chip.text and chip.get_attribute("title") == "custom_tool_call"
        conversions = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#detail-conversions .chip.conversion")]
        assert "custom apply_patch restored" in conversions
        sides = browser.find_elements(By.CSS_SELECTOR, ".side")
        assert [side.get_attribute("data-side") for side in sides] == [
            "client_request", "upstream_request", "upstream_chunks", "sent",
        ]
        for side in sides:  # every side shows the call, highlighted
            assert side.find_elements(By.CSS_SELECTOR, ".block.tool"), side.get_attribute("data-side")
        marks = browser.find_elements(By.CSS_SELECTOR, '.side[data-side="sent"] .block.tool .mark')
        assert "custom apply_patch restored" in [mark.text for mark in marks]
        upstream_request = browser.find_element(By.CSS_SELECTOR, '.side[data-side="upstream_request"]')
        assert "apply_patch" in upstream_request.text

        screenshot = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path / "inspector.png")
        browser.save_screenshot(str(screenshot))

        # Model output is shown as text, never run as markup.
        browser.find_element(By.CSS_SELECTOR, f"#exchanges tbody tr:not([data-id='{request_id}'])").click()
        wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, '.side[data-side="sent"]'), "onerror"))
        assert browser.title == "toolwire inspector"
        assert not browser.find_elements(By.CSS_SELECTOR, ".side img")
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == []
