"""Under CI (`CI` set, as .ci/run sets it) no test may be skipped: CI provides every
part the suite needs, so a skip there hides a broken install or a missing service. A
skipped test's report is turned into a failure naming the skip's reason. Loaded by
tests/conftest.py (`pytest_plugins`)."""

import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not os.environ.get("CI") or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
    report.outcome = "failed"
    report.longrepr = f"skipped under CI, which must run every test: {reason}"
