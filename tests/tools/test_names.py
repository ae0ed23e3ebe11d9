"""ToolName: a hashable identity in which the namespace counts."""

from __future__ import annotations

import dataclasses

import pytest

from toolwire.tools import ToolName


def test_namespace_is_part_of_identity() -> None:
    assert ToolName("collaboration", "list_agents") != ToolName(None, "list_agents")
    assert ToolName("a", "x") != ToolName("b", "x")
    assert ToolName("a", "x") == ToolName("a", "x")
    assert ToolName.plain("exec_command") == ToolName(None, "exec_command")


def test_hashable_and_usable_as_key() -> None:
    names = {ToolName("a", "x"), ToolName("a", "x"), ToolName(None, "x"), ToolName("b", "x")}
    assert len(names) == 3
    table = {ToolName("functions", "exec"): 1}
    assert table[ToolName("functions", "exec")] == 1
    assert ToolName(None, "exec") not in table


def test_empty_namespace_is_no_namespace() -> None:
    assert ToolName("", "exec_command") == ToolName(None, "exec_command")
    assert hash(ToolName("", "exec_command")) == hash(ToolName(None, "exec_command"))
    assert ToolName("", "exec_command").namespace is None


def test_frozen() -> None:
    name = ToolName("a", "x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        name.name = "y"  # type: ignore[misc]


def test_str_is_only_for_messages() -> None:
    assert str(ToolName(None, "exec_command")) == "exec_command"
    assert str(ToolName("collaboration", "list_agents")) == "collaboration.list_agents"


def test_sorting_mixes_plain_and_namespaced() -> None:
    names = [ToolName("b", "a"), ToolName(None, "z"), ToolName("a", "b"), ToolName(None, "y")]
    assert sorted(names) == [ToolName(None, "y"), ToolName(None, "z"), ToolName("a", "b"), ToolName("b", "a")]
    assert ToolName(None, "z") < ToolName("a", "a") <= ToolName("a", "a")
    assert not ToolName("a", "a") < ToolName("a", "a")
    assert not ToolName(None, "y") < ToolName(None, "y")
