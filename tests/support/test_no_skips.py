"""The no-skips plugin: with TOOLWIRE_CI=1 every kind of skip fails, and only then."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SKIPPING_TESTS = '''
import pytest

@pytest.fixture
def missing_part():
    pytest.skip("needs a part this machine lacks")

@pytest.mark.skip(reason="marked skip")
def test_marked():
    pass

@pytest.mark.skipif(True, reason="marked skipif")
def test_marked_if():
    pass

def test_skips_itself():
    pytest.skip("called skip")

def test_skips_in_fixture(missing_part):
    pass

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_expected_failure():
    assert False

def test_passes():
    pass
'''

SKIPPED_MODULE = '''
import pytest
pytest.skip("the whole module", allow_module_level=True)

def test_never_collected():
    pass
'''


def run_pytest(tmp_path: Path, source: str, ci: str | None) -> tuple[int, str]:
    (tmp_path / "test_case.py").write_text(source)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {key: value for key, value in os.environ.items() if key != "TOOLWIRE_CI"}
    env["PYTHONPATH"] = str(ROOT)
    if ci is not None:
        env["TOOLWIRE_CI"] = ci
    finished = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.support.no_skips", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    return finished.returncode, finished.stdout


def summary(output: str) -> str:
    return output.splitlines()[-1].strip("= ").split(" in ")[0]


@pytest.mark.parametrize("ci", [None, "", "0"])
def test_outside_ci_skips_stay_skips(tmp_path: Path, ci: str | None) -> None:
    code, output = run_pytest(tmp_path, SKIPPING_TESTS, ci)
    assert (code, summary(output)) == (0, "1 passed, 4 skipped, 1 xfailed"), output
    code, output = run_pytest(tmp_path, SKIPPED_MODULE, ci)
    assert (code, summary(output)) == (5, "1 skipped"), output  # 5: no test ran


def test_under_ci_every_skip_fails_and_names_its_reason(tmp_path: Path) -> None:
    code, output = run_pytest(tmp_path, SKIPPING_TESTS, "1")
    assert (code, summary(output)) == (1, "1 failed, 1 passed, 1 xfailed, 3 errors"), output
    for reason in ("marked skip", "marked skipif", "called skip", "needs a part this machine lacks"):
        assert f"skipped under TOOLWIRE_CI=1, where nothing may skip: {reason}" in output, reason


def test_under_ci_a_skipped_module_is_an_error(tmp_path: Path) -> None:
    code, output = run_pytest(tmp_path, SKIPPED_MODULE, "1")
    assert (code, summary(output)) == (2, "1 error"), output
    assert "skipped under TOOLWIRE_CI=1, where nothing may skip: the whole module" in output
