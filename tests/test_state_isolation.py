"""The test run keeps its state apart from the user's (tests/conftest.py)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from toolwire.store._open import default_sqlite_path


def test_the_default_store_is_the_test_run_s_own() -> None:
    state = Path(os.environ["XDG_STATE_HOME"])
    assert state.is_relative_to(tempfile.gettempdir()) and state.name.startswith("toolwire-test-state-")
    assert default_sqlite_path().is_relative_to(state)
    assert not default_sqlite_path().is_relative_to(Path.home() / ".local" / "state")
