"""Model routing: configured models, the default upstream, and unknown models."""

from __future__ import annotations

import pytest

from toolwire.config import parse_config
from toolwire.errors import NotFoundError
from toolwire.server import build_router

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
