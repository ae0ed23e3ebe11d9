"""``observability(config)``: which observers and routes a configuration turns on."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route
from starlette.testclient import TestClient

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV
from tests.support.observed import exchange, observed_client, observed_config
from toolwire.config import ServerConfig
from toolwire.server._siblings import LocalSiblings
from toolwire.server.observe import observability
from toolwire.server.observe._capture import CaptureObserver
from toolwire.server.observe._inspector import RecentExchanges
from toolwire.server.observe._log import LogObserver
from toolwire.server.observe._metrics import MetricsObserver


def paths(routes: Sequence[BaseRoute]) -> list[str]:
    return [route.path for route in routes if isinstance(route, Route)]


def test_the_inspector_is_off_by_default() -> None:
    assert ServerConfig().inspector is False


def test_logs_metrics_and_the_inspector_when_it_is_on() -> None:
    observed = observability(observed_config("http://127.0.0.1:9/v1"), environ={})
    assert [type(o) for o in observed.observers] == [LogObserver, MetricsObserver, RecentExchanges]
    assert "/metrics" in paths(observed.routes) and "/ui/api/exchanges" in paths(observed.routes)


def test_the_inspector_is_bounded_as_the_server_section_says() -> None:
    config = observed_config("http://127.0.0.1:9/v1", inspector_max_exchanges=7, inspector_max_bytes=70_000)
    [recent] = [o for o in observability(config, environ={}).observers if isinstance(o, RecentExchanges)]
    assert (recent.max_exchanges, recent.max_bytes) == (7, 70_000)


def test_an_inspector_on_a_gateway_whose_store_holds_keys_wants_an_admin_key(upstream: ChatUpstream) -> None:
    """Keys of the store do not open the inspector (it shows every key's traffic)."""

    async def store_holds_keys() -> bool:
        return True

    app_routes = observability(observed_config(upstream.base_url), requires_key=store_holds_keys, environ={}).routes
    app = Starlette(routes=app_routes)
    with TestClient(app, client=("127.0.0.1", 50000)) as client:
        refused = client.get("/ui/api/exchanges")
    assert refused.status_code == 401 and "--admin-key-env" in refused.json()["error"]["message"]


def test_without_capture_or_inspector_no_observer_records_traffic() -> None:
    observed = observability(observed_config("http://127.0.0.1:9/v1", inspector=False), environ={})
    assert [type(o) for o in observed.observers] == [LogObserver, MetricsObserver]
    assert not any(observer.wants_traffic for observer in observed.observers)
    assert paths(observed.routes) == ["/metrics", "/ui", "/ui/"]  # the "inspector is off" page


def test_capture_is_configured_from_the_server_section(tmp_path: Path) -> None:
    config = observed_config("http://127.0.0.1:9/v1", capture_dir=str(tmp_path), capture_max_bytes=1234, capture_keep=4)
    [capture] = [o for o in observability(config, environ={}).observers if isinstance(o, CaptureObserver)]
    assert (capture.directory, capture.max_bytes, capture.keep) == (tmp_path, 1234, 4)


def test_every_observer_redacts_the_upstream_and_client_keys() -> None:
    config = observed_config("http://127.0.0.1:9/v1")
    observed = observability(config, client_keys=[b"client-key-alpha"], environ={UPSTREAM_KEY_ENV: UPSTREAM_KEY})
    log = observed.observers[0]
    assert isinstance(log, LogObserver)
    assert log.redactor.text(f"{UPSTREAM_KEY} client-key-alpha") == "[redacted] [redacted]"


def test_the_routes_are_served_by_the_app(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("hi"))
    with observed_client(observed_config(upstream.base_url)) as (client, _):
        client.post("/v1/responses", json={"model": "m", "input": "hi"})
        assert client.get("/metrics").status_code == 200
        assert client.get("/ui/").status_code == 200
        assert len(client.get("/ui/api/exchanges").json()["data"]) == 1
        assert client.get("/healthz").status_code == 200


def test_the_inspector_and_the_capture_hide_keys_of_any_shape(tmp_path: Path) -> None:
    config = observed_config("http://127.0.0.1:9/v1", capture_dir=str(tmp_path))
    observed = observability(config, client_keys=[b"plain-client-key"], environ={UPSTREAM_KEY_ENV: "plain-upstream-key"})
    recent = next(o for o in observed.observers if isinstance(o, RecentExchanges))
    capture = next(o for o in observed.observers if isinstance(o, CaptureObserver))
    leaky = exchange("resp_1", client_request=b'{"model":"m","input":"plain-upstream-key and plain-client-key"}')
    recent.finished(leaky)
    capture.finished(leaky)
    capture.close()
    shown = recent.record("resp_1")
    written = b"".join(path.read_bytes() for path in tmp_path.glob("exchanges-*.jsonl"))
    for record in (shown, written):
        assert record is not None and b"[redacted] and [redacted]" in record
        assert b"plain-upstream-key" not in record and b"plain-client-key" not in record


def test_with_other_workers_the_metrics_and_the_inspector_show_theirs_too() -> None:
    """The gateway's siblings reach both routes: a scrape of one worker and its inspector's
    list hold what the other worker served."""
    config = observed_config("http://127.0.0.1:9/v1")
    workers = [observability(config, environ={}, siblings=sibling) for sibling in LocalSiblings.group(2)]
    for observer in workers[1].observers:
        observer.finished(exchange("resp_elsewhere"))
    with TestClient(Starlette(routes=workers[0].routes), client=("127.0.0.1", 50000)) as client:
        scraped = client.get("/metrics").text
        listed = client.get("/ui/api/exchanges").json()
    assert 'toolwire_requests_total{model="m",outcome="completed",status="200",upstream="local",worker="1"} 1.0' in scraped
    assert [summary["request_id"] for summary in listed["data"]] == ["resp_elsewhere"]
