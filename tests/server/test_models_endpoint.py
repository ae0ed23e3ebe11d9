"""``GET /v1/models`` on the real gateway: the configured models, with the upstream each
is on; the default upstream and the mock add none; errors are OpenAI-shaped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import GatewayProcess

CONFIG = """
[[upstreams]]
name = "local"
base_url = "{chat_url}"

[[upstreams]]
name = "toy"
kind = "mock"

[[models]]
name = "deepseek-v4"
upstream = "local"
upstream_model = "deepseek-chat"

[[models]]
name = "toy-model"
upstream = "toy"
"""
LISTED = [("deepseek-v4", "local"), ("toy-model", "toy")]


def write_config(directory: Path, chat_url: str) -> Path:
    path = directory / "toolwire.toml"
    path.write_text(CONFIG.format(chat_url=chat_url))
    return path


def without_flag_upstream(process: GatewayProcess) -> GatewayProcess:
    """The same gateway with no ``--upstream`` flag: the file's upstreams only, no default."""
    for flag in ("--upstream", "--upstream-key-env"):
        at = process.args.index(flag)
        del process.args[at : at + 2]
    return process


@pytest.fixture(scope="module")
def configured(_session_upstream: ChatUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """The file's models, and the ``--upstream`` flag's upstream as the default."""
    directory = tmp_path_factory.mktemp("models")
    config = write_config(directory, _session_upstream.base_url)
    with GatewayProcess(_session_upstream.base_url, directory / "gateway.log", "--config", str(config)) as process:
        yield process


def listing(gateway: GatewayProcess, **kwargs: Any) -> httpx.Response:
    return httpx.get(gateway.base_url + "/models", timeout=30, **kwargs)


def test_the_configured_models_are_listed_with_their_upstreams(configured: GatewayProcess) -> None:
    response = listing(configured)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "list"
    assert [(model["id"], model["owned_by"]) for model in body["data"]] == LISTED
    assert all(model["object"] == "model" and isinstance(model["created"], int) for model in body["data"])


def test_the_openai_sdk_reads_the_list_in_strict_mode(configured: GatewayProcess) -> None:
    # Closed, not left to the collector: its socket, collected during another test, fails
    # that one (an unclosed socket's ResourceWarning is raised there).
    with openai.OpenAI(base_url=configured.base_url, api_key="unused", _strict_response_validation=True) as client:
        assert [(model.id, model.owned_by) for model in client.models.list()] == LISTED


def test_a_listed_model_reaches_its_upstream_and_others_the_default(
    configured: GatewayProcess, upstream: ChatUpstream
) -> None:
    upstream.enqueue(Text("from deepseek-chat"), Text("from the default"))
    for model in ("deepseek-v4", "not-listed"):
        response = httpx.post(configured.base_url + "/responses", json={"model": model, "input": "hi"}, timeout=30)
        assert response.status_code == 200, response.text
    assert [request["model"] for request in upstream.chat_requests] == ["deepseek-chat", "not-listed"]
    assert "not-listed" not in [model["id"] for model in listing(configured).json()["data"]]


def test_without_a_default_an_unknown_model_is_a_404_naming_the_listed_ones(
    _session_upstream: ChatUpstream, tmp_path: Path
) -> None:
    config = write_config(tmp_path, _session_upstream.base_url)
    with without_flag_upstream(GatewayProcess(_session_upstream.base_url, tmp_path / "gateway.log", "--config", str(config))) as gateway:
        listed = [model["id"] for model in listing(gateway).json()["data"]]
        assert listed == [name for name, _ in LISTED]
        response = httpx.post(gateway.base_url + "/responses", json={"model": "gpt-5.5", "input": "hi"}, timeout=30)
    assert response.status_code == 404
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("model_not_found", "model")
    assert all(name in error["message"] for name in listed), error


def test_the_mock_upstream_lists_no_model_and_answers_any(tmp_path: Path) -> None:
    with GatewayProcess("mock", tmp_path / "gateway.log") as gateway:
        assert listing(gateway).json() == {"object": "list", "data": []}
        response = httpx.post(gateway.base_url + "/responses", json={"model": "anything", "input": "hi"}, timeout=30)
        assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [("POST", "/models", 405, "method_not_allowed"), ("GET", "/models/deepseek-v4", 404, None)],
)
def test_other_requests_on_models_get_openai_errors(
    configured: GatewayProcess, method: str, path: str, status: int, code: str | None
) -> None:
    response = httpx.request(method, configured.base_url + path, timeout=30)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code and path in error["message"], error


def test_with_client_keys_the_list_needs_one(_session_upstream: ChatUpstream, tmp_path: Path) -> None:
    config = write_config(tmp_path, _session_upstream.base_url)
    with GatewayProcess(
        _session_upstream.base_url, tmp_path / "gateway.log", "--config", str(config),
        "--api-key-env", "TW_MODELS_KEYS", env={"TW_MODELS_KEYS": "key-one"},
    ) as gateway:
        assert listing(gateway).status_code == 401
        assert listing(gateway, headers={"Authorization": "Bearer key-two"}).status_code == 401
        allowed = listing(gateway, headers={"Authorization": "Bearer key-one"})
    assert [model["id"] for model in allowed.json()["data"]] == [name for name, _ in LISTED]
