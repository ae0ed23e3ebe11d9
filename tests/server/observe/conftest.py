"""Fixtures of the observability tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


@pytest.fixture
def stack_room() -> Iterator[None]:
    """Room for the redactor's walk of a value nested as deep as orjson writes (255), also
    when mutation testing runs it: mutmut's trampolines put three more frames under every
    call of a mutated function, and the walk recurses once per level."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 5000))
    yield
    sys.setrecursionlimit(limit)
