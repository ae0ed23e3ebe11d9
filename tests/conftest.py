"""Shared fixtures: one scripted Chat upstream, one scripted Messages API, and a real
gateway process in front of each, per session; one scripted Responses server.

Under CI (``TOOLWIRE_CI=1``) every skip fails (``tests/support/no_skips.py``).
Each test gets the upstream reset (empty script, nothing recorded, OpenAI style), so
tests stay independent while the processes are started once.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.support.chat_upstream import ChatUpstream
from tests.support.gateway import GatewayProcess
from tests.support.messages_upstream import MessagesUpstream
from tests.support.responses_upstream import ResponsesUpstream

# A state directory of the test run's own, for this process and every one it starts: a
# gateway's default store (sqlite://) and the keys CLI's are then never the user's file,
# whatever a test (or a mutant of the code under test) does with them.
_STATE_HOME = tempfile.mkdtemp(prefix="toolwire-test-state-")
os.environ["XDG_STATE_HOME"] = _STATE_HOME
atexit.register(shutil.rmtree, _STATE_HOME, ignore_errors=True)

# No time limit per example: a deadline is a timing assertion, and this machine is shared.
settings.register_profile("toolwire", deadline=None)
settings.load_profile("toolwire")

# Under CI (TOOLWIRE_CI=1), a skip is a failure.
pytest_plugins = ["tests.support.no_skips"]


@pytest.fixture(scope="session")
def _session_upstream() -> Iterator[ChatUpstream]:
    with ChatUpstream() as upstream:
        yield upstream


@pytest.fixture
def upstream(_session_upstream: ChatUpstream) -> Iterator[ChatUpstream]:
    _session_upstream.reset()
    _session_upstream.style = "openai"
    _session_upstream.reasoning_field = None
    yield _session_upstream
    _session_upstream.reset()


@pytest.fixture(scope="session")
def _session_responses_upstream() -> Iterator[ResponsesUpstream]:
    with ResponsesUpstream() as server:
        yield server


@pytest.fixture
def responses_upstream(_session_responses_upstream: ResponsesUpstream) -> Iterator[ResponsesUpstream]:
    """The scripted Responses server (a backend, or the model the agent talks to), reset."""
    _session_responses_upstream.reset()
    yield _session_responses_upstream
    _session_responses_upstream.reset()


@pytest.fixture(scope="session")
def gateway(_session_upstream: ChatUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    log_path = tmp_path_factory.mktemp("gateway") / "gateway.log"
    with GatewayProcess(_session_upstream.base_url, log_path, "--upstream-retries", "2") as process:
        yield process


# ---------------------------------------------------------------- an Anthropic Messages backend


@pytest.fixture(scope="session")
def _session_messages_upstream() -> Iterator[MessagesUpstream]:
    with MessagesUpstream() as upstream:
        yield upstream


@pytest.fixture
def messages_upstream(_session_messages_upstream: MessagesUpstream) -> Iterator[MessagesUpstream]:
    """The scripted Messages API, reset (x-api-key auth, empty script) for each test."""
    _session_messages_upstream.reset()
    yield _session_messages_upstream
    _session_messages_upstream.reset()


@pytest.fixture(scope="session")
def anthropic_gateway(
    _session_messages_upstream: MessagesUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """A gateway whose default upstream is the scripted Messages API (kind anthropic)."""
    log_path = tmp_path_factory.mktemp("anthropic-gateway") / "gateway.log"
    with GatewayProcess(
        _session_messages_upstream.base_url, log_path, "--preset", "anthropic", "--upstream-retries", "2"
    ) as process:
        yield process
