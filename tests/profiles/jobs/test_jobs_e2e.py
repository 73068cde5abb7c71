"""A whole-job capture across two real sshd "hosts" on loopback, one of them down
from the start or dying mid-capture."""

import time

import pytest

from profiles.jobs import services as jobs
from profiles.models import Capture
from profiles.storage import files as capture_files
from runs.models import Host, Run, RunProcess
from tests.support.worker import WorkerProcess
from tests.support.workload import pyspy_running, start_workload

pytestmark = [pytest.mark.services, pytest.mark.sshd, pytest.mark.django_db(transaction=True)]


def _two_node_run(pids: tuple[int, int]) -> Run:
    """Each "node" samples a process of its own: both are this machine, and two py-spy
    on one PID interfere (see the fault matrix), which no real two-node job does."""
    py_spy = Host.objects.get(name="local").py_spy
    run = Run.objects.create(name="two-node", status="running")
    for name, pid in zip("ab", pids, strict=True):
        host = Host.objects.create(
            name=f"node-{name}", transport="ssh", address=f"node-{name}", py_spy=py_spy
        )
        RunProcess.objects.create(run=run, host=host, pid=pid, role=f"rank-{name}")
    return run


def _worker(tmp_path, config, retries: int) -> WorkerProcess:
    env = {
        "FLAMEDECK_SSH_CONFIG": str(config),
        "FLAMEDECK_CAPTURE_RETRIES": str(retries),
        "FLAMEDECK_RETRY_BACKOFF_S": "0",
    }
    return WorkerProcess(tmp_path / "w.log", env=env)


def _wait_while(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and condition():
        time.sleep(0.3)


def _by_host(group) -> dict[str, Capture]:
    return {c.host.name: c for c in Capture.objects.filter(group=group).select_related("host")}


@pytest.mark.parametrize(
    ("when", "retries", "cause", "says"),
    [
        ("before", 1, "unreachable", "cannot reach the host"),
        ("during", 0, "connection_lost", "SSH connection dropped"),
    ],
)
def test_a_host_going_down_leaves_the_group_partial_and_the_other_capture_intact(
    two_hosts, running_workload, tmp_path, when, retries, cause, says
):
    """node-b is down when the job capture starts, or dies with py-spy running on it."""
    (server_a, server_b), config = two_hosts
    rank_b = start_workload(threads=2)
    run = _two_node_run((running_workload.pid, rank_b.pid))
    worker = _worker(tmp_path, config, retries=retries)
    try:
        if when == "before":
            server_b.stop()
        group = jobs.capture_group_create(user=None, run=run, duration=4, rate=50)
        if when == "during":
            node_b = Capture.objects.filter(group=group, host__name="node-b")
            _wait_while(lambda: node_b.get().progress.get("elapsed_s", 0) < 1.5, timeout_s=30)
            assert node_b.get().status == "running", node_b.get().error
            server_b.crash()
        _wait_while(lambda: jobs.group_summary(group)["status"] == "running", timeout_s=60)
    finally:
        worker.stop()
        rank_b.stop()
    by_host = _by_host(group)
    assert by_host["node-a"].status == "done", by_host["node-a"].error
    assert by_host["node-a"].stats["total_samples"] > 100
    assert by_host["node-b"].status == "failed"
    assert by_host["node-b"].error_cause == cause
    assert says in by_host["node-b"].error
    assert jobs.group_summary(group)["status"] == "partial"
    if when == "during":
        # py-spy's words are kept
        assert "Sampling process" in capture_files.read_log(by_host["node-b"])
        _wait_while(lambda: pyspy_running(rank_b.pid), timeout_s=10)
        assert not pyspy_running(rank_b.pid), "node-b's py-spy outlived its connection"
