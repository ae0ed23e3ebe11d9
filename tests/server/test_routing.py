"""Model routing: configured models, the default upstream, and unknown models."""

from __future__ import annotations

import httpx
import orjson
import pytest

from tests.support.chat_upstream import ChatUpstream, Raw, Text
from tests.support.gateway import UPSTREAM_KEY_ENV
from tests.support.served import chat_config, gateway_client, serving, sse_events, tripped_here
from toolwire.config import GatewayConfig, parse_config
from toolwire.errors import NotFoundError, UpstreamError
from toolwire.server import GatewaySettings, build_router, create_app
from toolwire.server._limits import count_limit
from toolwire.server._routing import upstream_limits

CONFIG = """\
[[upstreams]]
name = "deepseek"
base_url = "http://127.0.0.1:9/v1"
preset = "deepseek"

[[upstreams]]
name = "play"
kind = "mock"

[[models]]
name = "deepseek-v4"
upstream = "deepseek"
upstream_model = "deepseek-chat"

[[models]]
name = "toy"
upstream = "play"
"""


def test_configured_models_route_to_their_upstream_and_model() -> None:
    router = build_router(parse_config(CONFIG))
    route = router.resolve("deepseek-v4")
    profile = route.backend.profile  # type: ignore[attr-defined]
    assert (route.upstream_name, route.upstream_model, profile.name) == ("deepseek", "deepseek-chat", "deepseek")
    assert router.resolve("toy").upstream_model == "toy"


def test_unknown_model_is_a_404_listing_the_known_ones() -> None:
    router = build_router(parse_config(CONFIG))
    with pytest.raises(NotFoundError) as caught:
        router.resolve("gpt-5.5")
    assert caught.value.status == 404
    assert "deepseek-v4" in caught.value.message and "toy" in caught.value.message
    bare = build_router(parse_config('[[upstreams]]\nname = "play"\nkind = "mock"\n'))  # no models, no default
    with pytest.raises(NotFoundError) as caught:
        bare.resolve("gpt-5.5")
    assert caught.value.message == "The model 'gpt-5.5' does not exist on this gateway. Known models: none."


def test_a_default_upstream_passes_other_models_through() -> None:
    router = build_router(parse_config(CONFIG.replace('kind = "mock"', 'kind = "mock"\ndefault = true')))
    route = router.resolve("gpt-5.5")
    assert (route.upstream_name, route.upstream_model) == ("play", "gpt-5.5")
    overridden = build_router(parse_config(CONFIG.replace('kind = "mock"', 'kind = "mock"\ndefault = true')), default_model="qwen3")
    assert overridden.resolve("gpt-5.5").upstream_model == "qwen3"
    assert overridden.resolve("deepseek-v4").upstream_model == "deepseek-chat"


def test_the_upstream_limits_come_from_the_server_section() -> None:
    config = GatewayConfig.model_validate(
        {"server": {"upstream_max_line_bytes": 2001, "upstream_max_event_bytes": 3002,
                    "upstream_max_body_bytes": 4003, "upstream_max_stream_bytes": 5004}}
    )  # fmt: skip
    limits = upstream_limits(config)
    assert (limits.max_line_bytes, limits.max_event_bytes, limits.max_body_bytes, limits.max_stream_bytes) == (
        2001, 3002, 4003, 5004,
    )  # fmt: skip
    assert limits.tripped is count_limit  # every trip counted in /metrics


async def test_a_gateway_bounds_its_upstream_as_the_server_section_says(upstream: ChatUpstream) -> None:
    """The configured limit, not the default, cuts a long line, and the trip is counted."""
    chunk = {"choices": [{"index": 0, "delta": {"content": "x" * 3000}}]}
    upstream.enqueue(Raw([b"data: " + orjson.dumps(chunk) + b"\n\n", b"data: [DONE]\n\n"]))
    before = tripped_here("upstream_max_line_bytes")
    async with gateway_client(chat_config(upstream.base_url, upstream_max_line_bytes=2048)) as client:
        streamed = await client.post("/v1/responses", json={"model": "m", "input": "hi", "stream": True})
    final = sse_events(streamed.content)[-1]
    assert final["type"] == "response.failed"
    assert "upstream_max_line_bytes" in final["response"]["error"]["message"]
    assert tripped_here("upstream_max_line_bytes") - before == 1


async def test_upstream_keys_are_read_from_the_environment_given(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(UPSTREAM_KEY_ENV, "the-process-environment-key")
    upstream.enqueue(Text("hello"))
    router = build_router(chat_config(upstream.base_url), environ={UPSTREAM_KEY_ENV: "the-given-environment-key"})
    async with serving(create_app(router, GatewaySettings())) as url, httpx.AsyncClient(base_url=url) as client:
        answer = await client.post("/v1/responses", json={"model": "m", "input": "hi"})
    assert answer.status_code == 200, answer.text
    assert upstream.requests[0].headers["authorization"] == "Bearer the-given-environment-key"


async def test_the_upstreams_that_do_not_answer_are_named_with_why(upstream: ChatUpstream) -> None:
    """Asked together (``toolwire serve`` asks before serving): a live upstream, whatever its
    status (the scripted one has no ``/models``), and a mock answer; a refused one is named."""
    config = parse_config(
        CONFIG.replace("http://127.0.0.1:9/v1", "http://127.0.0.1:1/v1")
        + f'\n[[upstreams]]\nname = "live"\nbase_url = "{upstream.base_url}"\n'
    )
    router = build_router(config)
    try:
        troubles = await router.troubles()
    finally:
        await router.aclose()
    assert list(troubles) == ["deepseek"]
    assert isinstance(troubles["deepseek"], UpstreamError)
    assert troubles["deepseek"].message == (
        "Cannot reach the upstream at http://127.0.0.1:1/v1: no connection to 127.0.0.1:1 (Connection refused)."
    )
    assert upstream.requests[-1].path == "/v1/models"
