"""A host check answers within its budget whatever the host does, and a check that ran
out of time names the step it was at and the fix. Real ssh, a real loopback listener
that accepts and never speaks, real hanging commands on this machine."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runs.models import Host
from runs.remote import Target, check_host
from runs.remote.model import CHECK_BUDGET_S

from .conftest import PY_SPY


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never says a word (no SSH greeting)."""
    listener = socket.create_server(("127.0.0.1", 0))
    yield listener.getsockname()[1]
    listener.close()


def _hangs(path: Path) -> str:
    path.write_text("#!/bin/sh\nsleep 60\n")
    path.chmod(0o755)
    return str(path)


def _timed(target: Target, **budget) -> tuple[float, object]:
    start = time.monotonic()
    check = check_host(target, **budget)
    return time.monotonic() - start, check


@pytest.mark.django_db
def test_a_host_whose_ssh_never_answers_is_checked_within_the_budget(owner_client, silent_port):
    # A capture's ssh may wait 10 s to connect; the check's button may not.
    host = Host.objects.create(name="mute", transport="ssh", address="127.0.0.1", port=silent_port)
    start = time.monotonic()
    response = owner_client.post(f"/api/hosts/{host.pk}/check/")
    took = time.monotonic() - start
    check = response.json()
    assert response.status_code == 200 and took < CHECK_BUDGET_S
    assert (check["ok"], check["ssh_ok"], check["cause"]) == (False, False, "unreachable")
    assert check["error"].startswith("cannot reach the host: check the address and port")
    assert "a check waits 4 s for ssh to connect, a capture 10 s" in check["error"]
    assert "timed out" in check["error_detail"]
    assert Host.objects.get(pk=host.pk).last_check["cause"] == "unreachable"


def test_a_py_spy_that_hangs_is_named_when_the_check_runs_out_of_time(tmp_path):
    took, check = _timed(Target("local", py_spy=_hangs(tmp_path / "py-spy")), budget_s=2)
    assert took < 2 and check.cause == "unknown" and check.ssh_ok
    assert "ran out of its 2 s while asking py-spy its version" in check.error
    assert "pip install -U py-spy" in check.error and check.py_spy_version is None


def test_a_ps_that_hangs_is_named_after_py_spy_and_ptrace_were_read(tmp_path):
    _hangs(tmp_path / "ps")
    prefix = f"env PATH={tmp_path}:{os.environ['PATH']}"
    took, check = _timed(Target("local", exec_prefix=prefix, py_spy=PY_SPY), budget_s=2)
    assert took < 2 and check.cause == "unknown"
    assert "while listing the processes" in check.error and "ps -ef" in check.error


def test_an_exec_prefix_that_never_starts_the_check_is_named(tmp_path):
    prefix = f"{_hangs(tmp_path / 'enter')} --"
    took, check = _timed(Target("local", exec_prefix=prefix, py_spy=PY_SPY), budget_s=2)
    assert took < 2 and check.cause == "exec_prefix"
    assert check.error.startswith("the exec prefix did not start the check within the 2 s")


def test_a_host_that_answers_is_checked_in_one_session_with_its_processes(local_target):
    took, check = _timed(local_target)
    assert took < CHECK_BUDGET_S and check.error is None and check.can_attach
    assert check.py_spy_version.startswith("py-spy 0.") and check.processes
