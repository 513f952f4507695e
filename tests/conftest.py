"""Under CI=true no test may skip: a tool that `make test` installs and that is missing is a failure. Each
test of a suite make test-more runs is marked with its suite's name and ``more`` (tests/suites.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.suites import SUITES, suite_of


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"a test skipped under CI=true (make test installs every tool): {report.longrepr}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "more: a test make test leaves to make test-more (tests/suites.py)")
    for name in SUITES:
        config.addinivalue_line("markers", f"{name}: the make test-{name} suite (tests/suites.py)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        suite = suite_of(item.nodeid)
        if suite is not None:
            item.add_marker(pytest.mark.more)
            item.add_marker(getattr(pytest.mark, suite))
