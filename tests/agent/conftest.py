"""Fixtures for the agent tests: the scripted Responses server (``server``), a tool context."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.responses_upstream import ResponsesUpstream
from toolwire.agent import Policy, Sandbox, ToolContext


@pytest.fixture
def server(responses_upstream: ResponsesUpstream) -> ResponsesUpstream:
    return responses_upstream


@pytest.fixture
def full_access(tmp_path: Path) -> ToolContext:
    """Tools may do anything, in a fresh directory."""
    return ToolContext(tmp_path, Policy(sandbox=Sandbox.DANGER_FULL_ACCESS))
