"""Fixtures for the agent tests: one scripted Responses server, reset for each test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.responses_upstream import ResponsesUpstream
from toolwire.agent import Policy, Sandbox, ToolContext


@pytest.fixture(scope="session")
def _session_server() -> Iterator[ResponsesUpstream]:
    with ResponsesUpstream() as server:
        yield server


@pytest.fixture
def server(_session_server: ResponsesUpstream) -> Iterator[ResponsesUpstream]:
    _session_server.reset()
    yield _session_server
    _session_server.reset()


@pytest.fixture
def full_access(tmp_path: Path) -> ToolContext:
    """Tools may do anything, in a fresh directory."""
    return ToolContext(tmp_path, Policy(sandbox=Sandbox.DANGER_FULL_ACCESS))
