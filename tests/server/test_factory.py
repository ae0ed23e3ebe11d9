"""``app_from_env``, the factory each worker of ``toolwire serve`` calls, run in this process:
the configuration and the ``--model`` override read from the environment, and the
garbage collector set for serving (``settle_garbage_collector``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

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
