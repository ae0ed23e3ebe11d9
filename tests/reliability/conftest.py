"""Fixtures for the reliability tests: gateways started with the flags a test needs.

Every gateway started here has its log checked for the upstream key when it stops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.gateway import GatewayProcess

from .helpers import leaked

StartGateway = Callable[..., GatewayProcess]


def pytest_configure(config: pytest.Config) -> None:
    # Also registered in pyproject.toml once the owner adds it; registering twice is harmless.
    config.addinivalue_line("markers", "soak: minutes-long load run (deselect with -m 'not soak')")


def _gateway_factory(directory: Path) -> Iterator[StartGateway]:
    started: list[GatewayProcess] = []

    def start(
        upstream_url: str, *args: str, env: dict[str, str] | None = None, open_files: int | None = None
    ) -> GatewayProcess:
        log_path = directory / f"gateway-{len(started)}.log"
        gateway = GatewayProcess(upstream_url, log_path, *args, env=env, open_files=open_files)
        started.append(gateway)
        return gateway.start()

    yield start
    for gateway in started:
        gateway.stop()
    for gateway in started:
        if gateway.log_path.exists():
            assert leaked(gateway.log()) == [], f"the upstream key is in {gateway.log_path}"


@pytest.fixture
def start_gateway(tmp_path: Path) -> Iterator[StartGateway]:
    """Start a ``toolwire serve`` with extra flags; stopped (and its log checked) after the test."""
    yield from _gateway_factory(tmp_path)


@pytest.fixture(scope="module")
def start_module_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartGateway]:
    """Like ``start_gateway``, for gateways a whole module shares."""
    yield from _gateway_factory(tmp_path_factory.mktemp("gateways"))
