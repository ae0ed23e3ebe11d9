"""Model routing: configured models, the default upstream, and unknown models."""

from __future__ import annotations

import pytest

from toolwire.config import GatewayConfig, parse_config
from toolwire.errors import NotFoundError
from toolwire.server import build_router
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
