"""``app_from_env``, the factory each worker of ``toolwire serve`` calls, run in this process:
the configuration and the ``--model`` override read from the environment, and the
garbage collector set for serving (``settle_garbage_collector``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV
from tests.support.served import chat_config, serving
from toolwire.server._factory import (
    MODEL_OVERRIDE_ENV,
    YOUNG_GENERATION_THRESHOLD,
    app_from_env,
    settle_garbage_collector,
)
from toolwire.server._settings import CONFIG_ENV
from toolwire.server._siblings import WorkerPlace


@pytest.fixture
def collector_restored() -> Iterator[None]:
    """The garbage collector as it was: a serving process sets it for good, a test must not."""
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.usefixtures("collector_restored")
def test_the_collector_is_set_for_serving() -> None:
    gc.set_threshold(700, 11, 12)
    settle_garbage_collector()
    assert gc.get_threshold() == (YOUNG_GENERATION_THRESHOLD, 11, 12)
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("collector_restored")
@pytest.mark.parametrize(("override", "sent"), [("forced-model", "forced-model"), ("", "asked")])
async def test_the_factory_reads_the_configuration_and_the_model_override(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch, override: str, sent: str
) -> None:
    monkeypatch.setenv(UPSTREAM_KEY_ENV, UPSTREAM_KEY)
    monkeypatch.setenv(CONFIG_ENV, chat_config(upstream.base_url).model_dump_json())
    monkeypatch.setenv(MODEL_OVERRIDE_ENV, override)  # empty: no --model
    upstream.enqueue(Text("hi"))
    app = app_from_env()
    assert gc.get_threshold()[0] == YOUNG_GENERATION_THRESHOLD
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.post("/v1/responses", json={"model": "asked", "input": "hi"})
    assert response.status_code == 200, response.text
    assert response.json()["model"] == "asked"
    assert [request["model"] for request in upstream.chat_requests] == [sent]


@pytest.mark.usefixtures("collector_restored")
async def test_a_worker_s_app_answers_for_its_siblings_too(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The factory of a worker of ``serve --workers 2`` joins its siblings: worker 0's
    /metrics holds the exchange worker 1 served (both built here as each worker builds
    its own, on the sockets of one directory)."""
    monkeypatch.setenv(UPSTREAM_KEY_ENV, UPSTREAM_KEY)
    monkeypatch.setenv(CONFIG_ENV, chat_config(upstream.base_url).model_dump_json())
    monkeypatch.setenv(MODEL_OVERRIDE_ENV, "")
    apps = []
    for index in range(2):
        for name, value in WorkerPlace(tmp_path, index, 2).environment().items():
            monkeypatch.setenv(name, value)
        apps.append(app_from_env())
    upstream.enqueue(Text("hi"))
    async with serving(apps[0]) as first, serving(apps[1]) as second, httpx.AsyncClient() as client:
        answered = await client.post(second + "/v1/responses", json={"model": "m", "input": "hi"})
        scraped = (await client.get(first + "/metrics")).text
    assert answered.status_code == 200, answered.text
    assert 'toolwire_requests_total{model="m",outcome="completed",status="200",upstream="local",worker="1"} 1.0' in scraped
