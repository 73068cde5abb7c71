"""Stopping py-spy: cancel, the wall-clock bound, and a worker or ssh client that dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from runs.remote import RecordSettings, RemoteError, record, record_script, wrap
from tests.support.procs import wait_until
from tests.support.workload import pyspy_running

ROOT = Path(__file__).resolve().parents[2]
LONG = RecordSettings(duration_s=30, rate=50)
TRANSPORTS = ["local", pytest.param("ssh", marks=pytest.mark.sshd)]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cancel_mid_capture_keeps_the_samples_and_leaves_no_pyspy(transport, request, workload):
    target = request.getfixturevalue(f"{transport}_target")
    sampling: list[float] = []  # when py-spy said it samples (it has attached)
    cancelled: list[float] = []

    def on_progress(line: str, elapsed_s: float) -> None:
        if line.startswith("py-spy> Sampling process"):
            sampling.append(time.monotonic())

    def should_cancel() -> bool:
        # A cancel 1.5 s into sampling, not 1.5 s after the call: on a loaded machine
        # the SSH connect and py-spy's attach alone can take that long.
        if sampling and time.monotonic() - sampling[0] > 1.5:
            cancelled.append(cancelled[0] if cancelled else time.monotonic())
            return True
        return False

    result = record(
        target, workload.pid, LONG, on_progress=on_progress, should_cancel=should_cancel
    )
    assert result.stopped_by == "cancel"
    assert time.monotonic() - cancelled[0] < 3.5  # stopped at once, not at 30 s
    assert "target-0" in result.raw.decode()
    assert "Wrote raw flamegraph data" in result.log
    assert not pyspy_running(workload.pid)


@pytest.mark.sshd
def test_killing_the_ssh_client_mid_capture_stops_the_remote_pyspy(ssh_target, workload):
    argv = wrap(ssh_target, ["sh", "-c", record_script(ssh_target, workload.pid, LONG)])
    client = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: pyspy_running(workload.pid), 10), "py-spy never started"
        client.send_signal(signal.SIGKILL)
        client.wait()
        assert wait_until(lambda: not pyspy_running(workload.pid), 5), "py-spy outlived ssh"
    finally:
        client.kill()
        client.wait()
        client.stdin.close()


WORKER = """
import json, sys
from runs.remote import RecordSettings, Target, record
target = Target(**json.loads(sys.argv[1]))
record(target, int(sys.argv[2]), RecordSettings(duration_s=30, rate=50))
"""


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_worker_killed_mid_capture_leaves_no_pyspy_behind(transport, request, workload):
    target = request.getfixturevalue(f"{transport}_target")
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, json.dumps(asdict(target)), str(workload.pid)], cwd=ROOT
    )
    try:
        assert wait_until(lambda: pyspy_running(workload.pid), 10), "py-spy never started"
        os.kill(worker.pid, signal.SIGKILL)
        assert wait_until(lambda: not pyspy_running(workload.pid), 5), "py-spy outlived worker"
    finally:
        worker.kill()
        worker.wait()


def _stubborn_pyspy(tmp_path: Path, tag: str) -> Path:
    """A stand-in py-spy that announces sampling, then ignores SIGINT."""
    fake = tmp_path / "py-spy"
    fake.write_text(
        "#!/bin/sh\ntrap '' INT\n"
        'echo "py-spy> Sampling process 100 times a second for 64 seconds."\n'
        f"exec sleep {tag}\n"
    )
    fake.chmod(0o755)
    return fake


def _sleeping(tag: str) -> bool:
    return subprocess.run(["pgrep", "-f", f"sleep {tag}"], capture_output=True).returncode == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_pyspy_ignoring_sigint_is_killed_at_duration_plus_margin(transport, request, tmp_path):
    tag = "27.18" + str(os.getpid() % 1000)
    target = replace(
        request.getfixturevalue(f"{transport}_target"), py_spy=str(_stubborn_pyspy(tmp_path, tag))
    )
    start = time.monotonic()
    with pytest.raises(RemoteError) as caught:
        record(target, os.getpid(), RecordSettings(duration_s=1, rate=50), margin_s=1.5)
    assert caught.value.cause == "bound_exceeded" and not caught.value.transient
    assert time.monotonic() - start < 1 + 1.5 + 2
    assert wait_until(lambda: not _sleeping(tag), 5), "the stubborn sampler survived"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_cancel_before_pyspy_is_ready_still_stops_it_cleanly(transport, request, workload):
    target = request.getfixturevalue(f"{transport}_target")
    result = record(target, workload.pid, LONG, margin_s=8, should_cancel=lambda: True)
    assert result.stopped_by == "cancel"
    # py-spy either wrote what it had or died of SIGINT before its handler was set.
    assert (result.exit_code, result.raw is None) in {(0, False), (130, True)}
    assert result.elapsed_s < 5
    assert not pyspy_running(workload.pid)
