"""Under CI=true no test may skip: a tool that `make test` installs and that is missing is a failure."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"a test skipped under CI=true (make test installs every tool): {report.longrepr}"
