"""The captured Codex CLI request bodies in ``tests/fixtures/codex/<model>/turn-<n>.json``.

``FIXTURES`` parametrizes over whatever files exist; when none do, it holds one skipped
case that says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

FIXTURE_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
FIXTURE_FILES = sorted(FIXTURE_DIR.glob("*/turn-*.json"))

FIXTURES = [
    pytest.param(path, id=f"{path.parent.name}/{path.stem}") for path in FIXTURE_FILES
] or [
    pytest.param(
        None,
        id="no-fixtures",
        marks=pytest.mark.skip(reason=f"no captured Codex request bodies in {FIXTURE_DIR}/<model>/turn-<n>.json"),
    )
]


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
