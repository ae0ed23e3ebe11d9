"""Real Codex CLI request bodies parse, and every item and tool in them round-trips exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwire.protocol import (
    AdditionalToolsItem,
    ResponsesRequest,
    UnknownItem,
    dump_item,
    parse_item,
    parse_request,
)
from toolwire.protocol._items import ITEM_TYPES

from .codex_fixtures import (
    FIXTURE_DIR,
    FIXTURE_FILES,
    FIXTURES,
    HEADER_FILES,
    load,
    model_of,
    tool_specs,
)
from .helpers import parse_tool


def test_every_captured_fixture_is_there() -> None:
    expected = {path.relative_to(FIXTURE_DIR) for path in [*FIXTURE_FILES, *HEADER_FILES]}
    present = {path.relative_to(FIXTURE_DIR) for path in FIXTURE_DIR.glob("*/*.json")}
    assert sorted(map(str, expected - present)) == [], "missing: recapture with tests/fixtures/codex/capture.py"
    assert sorted(map(str, present - expected)) == [], "unexpected: add them to CAPTURED_TURNS"


@pytest.mark.parametrize("path", FIXTURES)
def test_request_parses_and_round_trips(path: Path) -> None:
    raw, body = load(path)
    request = parse_request(raw)
    assert isinstance(request, ResponsesRequest)
    assert request.model == body["model"]
    assert request.dump() == body


@pytest.mark.parametrize("path", FIXTURES)
def test_every_input_item_round_trips(path: Path) -> None:
    _, body = load(path)
    assert isinstance(body["input"], list) and body["input"]
    for index, item in enumerate(body["input"]):
        parsed = parse_item(item, where=f"input[{index}]")
        assert dump_item(parsed) == item, f"input[{index}]"
        if item.get("type", "message") in ITEM_TYPES:
            assert not isinstance(parsed, UnknownItem), f"input[{index}] is a known type"


@pytest.mark.parametrize("path", FIXTURES)
def test_every_tool_round_trips(path: Path) -> None:
    _, body = load(path)
    specs = list(tool_specs(body))
    assert specs, "a Codex request always declares tools"
    for where, spec in specs:
        assert parse_tool(spec).dump() == spec, where


@pytest.mark.parametrize("path", FIXTURES)
def test_tool_protocol_by_model(path: Path) -> None:
    _, body = load(path)
    request = parse_request(body)
    items = request.input_items()
    if model_of(path).startswith("gpt-5.6"):
        # V2 (Responses Lite): tools in input[0], no top-level tools.
        assert request.tools is None
        assert isinstance(items[0], AdditionalToolsItem)
        assert items[0].role == "developer"
        assert request.parallel_tool_calls is False
    else:
        # V1: top-level tools, no additional_tools item.
        assert request.tools
        assert not any(isinstance(item, AdditionalToolsItem) for item in items)
