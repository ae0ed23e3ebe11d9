"""Under CI (``TOOLWIRE_CI=1``) a skipped test fails: CI has every outside part.

A test may skip for a reason a user's machine could have (no npm, no Chromium, no
``redis-server``); CI installs all of them (``scripts/test.sh``), so there a skip can only
hide a failure. With ``TOOLWIRE_CI`` set to anything but ``""`` or ``0``, this plugin turns
every skip into a failure that names the skip's reason: a skip in a test fails it, one in
its setup (a ``skip``/``skipif`` mark, ``pytest.skip()`` in a fixture) is an error, and a
skipped module is a collection error. ``xfail`` is left alone.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

CI_VARIABLE = "TOOLWIRE_CI"


def skips_fail() -> bool:
    return os.environ.get(CI_VARIABLE, "") not in ("", "0")


def _reason(longrepr: Any) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr).removeprefix("Skipped: ")


def _fail(report: pytest.TestReport | pytest.CollectReport) -> None:
    report.outcome = "failed"
    report.longrepr = f"skipped under {CI_VARIABLE}=1, where nothing may skip: {_reason(report.longrepr)}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report: pytest.TestReport = yield
    if report.skipped and not hasattr(report, "wasxfail") and skips_fail():
        _fail(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    report: pytest.CollectReport = yield
    if report.skipped and skips_fail():
        _fail(report)
    return report
