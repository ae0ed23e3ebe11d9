"""The captured Codex CLI request bodies in ``tests/fixtures/codex/<model>/turn-<n>.json``.

``FIXTURE_FILES`` names every file ``capture.py`` writes (its scenarios' turns), whether
it exists or not: a missing file makes each test parametrized over it fail, never vanish,
and ``test_every_captured_fixture_is_there`` says which files are missing or unexpected.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

FIXTURE_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "codex"

# model -> the turns of its capture scenario (tests/fixtures/codex/README.md).
CAPTURED_TURNS = {"gpt-5.4": 2, "gpt-5.5": 2, "gpt-5.6-terra": 3}

FIXTURE_FILES = [
    FIXTURE_DIR / model / f"turn-{turn}.json" for model, turns in CAPTURED_TURNS.items() for turn in range(1, turns + 1)
]
HEADER_FILES = [FIXTURE_DIR / model / "headers.json" for model in CAPTURED_TURNS]

FIXTURES = [pytest.param(path, id=f"{path.parent.name}/{path.stem}") for path in FIXTURE_FILES]


def model_of(path: Path) -> str:
    return path.parent.name


def load(path: Path) -> tuple[bytes, dict[str, Any]]:
    raw = path.read_bytes()
    body = orjson.loads(raw)
    assert isinstance(body, dict)
    return raw, body


def tool_specs(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every tool JSON the body declares, with its path, namespaces' tools included."""
    pending: list[tuple[str, Any]] = [(f"tools[{i}]", tool) for i, tool in enumerate(body.get("tools") or [])]
    for index, item in enumerate(body.get("input") or []):
        if isinstance(item, dict) and isinstance(item.get("tools"), list):
            pending += [(f"input[{index}].tools[{i}]", tool) for i, tool in enumerate(item["tools"])]
    while pending:
        path, tool = pending.pop(0)
        yield path, tool
        if tool.get("type") == "namespace":
            pending += [(f"{path}.tools[{i}]", inner) for i, inner in enumerate(tool["tools"])]
