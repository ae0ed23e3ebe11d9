"""How many connections and streams one process takes, from its open-files limit (pure),
and lifting the soft limit to the hard one (this process's own limit, put back after)."""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest

from toolwire.server._capacity import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_STREAMS,
    RESERVED_FILES,
    Capacity,
    capacity,
    open_files_limit,
    overflow_for,
    raise_open_files_limit,
)


@pytest.mark.parametrize(
    ("open_files", "connections", "streams", "overflow"),
    [
        (1024, 675, 240, 42),
        (256, 135, 48, 8),
        (70, 1, 1, 4),
        (1 << 20, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_STREAMS, 64),
        (4096 + 4096, 4096, 1024, 64),
    ],
)
def test_the_caps_derived_from_the_open_files_limit(open_files: int, connections: int, streams: int, overflow: int) -> None:
    caps = capacity(None, None, open_files)
    assert caps == Capacity(connections, streams, overflow)
    assert caps.files_needed == connections + overflow + streams + RESERVED_FILES <= open_files


def test_caps_that_are_set_are_kept_when_they_fit() -> None:
    assert capacity(100, 10, 1024) == Capacity(100, 10, 6)
    assert capacity(None, 10, 1024) == Capacity(891, 10, 55)  # 891 + 55 + 10 + 64 = 1020 files
    assert capacity(50, None, 1024) == Capacity(50, 240, 4)


def test_caps_that_do_not_fit_say_what_to_change() -> None:
    with pytest.raises(ValueError) as refused:
        capacity(2000, 100, 1024)
    assert str(refused.value) == (
        "2000 connections (max_connections) and 100 streams (max_streams) need 2228 open files, and this "
        "process may open 1024 (ulimit -n): raise the limit, or set lower caps."
    )
    with pytest.raises(ValueError, match="0 connections"):
        capacity(None, None, 69)  # nothing left for a single connection
    assert capacity(1, 1, 70) == Capacity(1, 1, 4)


def test_the_overflow_is_a_sixteenth_between_4_and_64() -> None:
    assert [overflow_for(n) for n in (1, 64, 65, 160, 1024, 1040, 100_000)] == [4, 4, 4, 10, 64, 64, 64]


@pytest.fixture
def restored_limit() -> Iterator[tuple[int, int]]:
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield limits
    resource.setrlimit(resource.RLIMIT_NOFILE, limits)


def test_the_soft_limit_is_lifted_to_the_hard_one(restored_limit: tuple[int, int]) -> None:
    soft, hard = restored_limit
    if hard == resource.RLIM_INFINITY:
        hard = 1 << 20
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, hard), hard))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    assert open_files_limit() == 256
    assert raise_open_files_limit() == hard == open_files_limit()
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    assert raise_open_files_limit() == hard  # already there: nothing to do


@pytest.mark.parametrize("refusal", [ValueError("not below the hard limit"), OSError(1, "Operation not permitted")])
def test_a_kernel_that_refuses_the_hard_limit_leaves_the_soft_one(
    restored_limit: tuple[int, int], monkeypatch: pytest.MonkeyPatch, refusal: Exception
) -> None:
    """Some kernels refuse an infinite hard limit as a soft one (ValueError or EPERM):
    serving goes on with the soft limit. The kernel's refusal is simulated: as root on
    Linux, with a finite hard limit, it never refuses."""
    hard = restored_limit[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))

    def refuse(which: int, limits: tuple[int, int]) -> None:
        raise refusal

    monkeypatch.setattr(resource, "setrlimit", refuse)
    assert raise_open_files_limit() == min(256, hard) == open_files_limit()


def test_an_unlimited_open_files_limit_counts_as_a_million(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linux never reports RLIMIT_NOFILE as unlimited, other systems may: the caps are then
    derived from 2**20 files (the largest Linux allows by default), not from -1."""
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert open_files_limit() == 1 << 20 == 1_048_576
