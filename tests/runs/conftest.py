"""Fixtures for the remote seam: a real loopback sshd and a real Python workload."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runs.remote import Target
from tests.support.requirements import missing_reason, require_sshd
from tests.support.sshd import ALIAS, SSHD, SSHServer
from tests.support.workload import Workload, start_workload

PY_SPY = str(Path(sys.executable).with_name("py-spy"))
# Locally a missing sshd skips its tests; under CI the fixtures fail them instead.
_NO_SSHD = missing_reason(SSHD, "OpenSSH's sshd", "apt-get install openssh-server")
needs_sshd = pytest.mark.skipif(bool(_NO_SSHD and not os.environ.get("CI")), reason=str(_NO_SSHD))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("sshd"):
            item.add_marker(needs_sshd)


@pytest.fixture
def own_sshd() -> Iterator[SSHServer]:
    """A private sshd a test may stop or re-key."""
    require_sshd()
    server = SSHServer().start()
    yield server
    server.cleanup()


@pytest.fixture
def workload() -> Iterator[Workload]:
    """A running workload with threads target-0, target-1 and waiter."""
    with start_workload(threads=2) as running:
        yield running


@pytest.fixture
def local_target() -> Target:
    return Target(transport="local", py_spy=PY_SPY)


@pytest.fixture
def ssh_target(sshd: SSHServer) -> Target:
    """The loopback sshd reached through its ssh_config Host alias."""
    return Target(transport="ssh", address=ALIAS, py_spy=PY_SPY, ssh_config=str(sshd.config))


@pytest.fixture
def sleeper():
    """A real process that runs until the test ends."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def dead_pid():
    """A PID that belonged to a process that has exited (and was reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid
