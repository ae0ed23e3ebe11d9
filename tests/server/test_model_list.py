"""``GET /v1/models``: the OpenAI list, or, with ``client_version``, Codex's model catalog.

The real gateway with configured models: Codex's form carries, for each, the very entry
``toolwire codex-config`` writes into a catalog file.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support.chat_upstream import ChatUpstream
from tests.support.gateway import GatewayProcess
from toolwire.codex_config import DEFAULT_INSTRUCTIONS, CodexModel, model_entry


@pytest.fixture(scope="module")
def configured(_session_upstream: ChatUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    directory = tmp_path_factory.mktemp("models")
    config = directory / "toolwire.toml"
    config.write_text(
        f'[[upstreams]]\nname = "local"\nbase_url = "{_session_upstream.base_url}"\n\n'
        '[[models]]\nname = "qwen3-coder"\nupstream = "local"\n\n'
        '[[models]]\nname = "deepseek-r1"\nupstream = "local"\ncontext_window = 64000\nreasoning = true\n'
    )
    with GatewayProcess(None, directory / "gateway.log", "--config", str(config)) as gateway:
        yield gateway


def test_codex_asks_for_its_catalog(configured: GatewayProcess) -> None:
    answer = httpx.get(configured.base_url + "/models", params={"client_version": "0.171.0"}, timeout=10)
    assert answer.status_code == 200
    expected = [
        model_entry(CodexModel("qwen3-coder"), base_url=configured.base_url, instructions=DEFAULT_INSTRUCTIONS, priority=1),
        model_entry(CodexModel("deepseek-r1", context_window=64_000, reasoning=True),
                    base_url=configured.base_url, instructions=DEFAULT_INSTRUCTIONS, priority=2),
    ]
    assert answer.json() == {"models": expected}


def test_without_client_version_it_is_the_openai_list(configured: GatewayProcess) -> None:
    answer = httpx.get(configured.base_url + "/models", timeout=10).json()
    assert answer["object"] == "list"
    assert [(m["id"], m["object"], m["owned_by"]) for m in answer["data"]] == [
        ("qwen3-coder", "model", "local"),
        ("deepseek-r1", "model", "local"),
    ]
