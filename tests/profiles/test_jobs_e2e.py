"""A whole-job capture across two real sshd "hosts" on loopback, one of them down
from the start or dying mid-capture."""

import subprocess
import time

import pytest

from profiles import jobs, pipeline
from profiles.models import Capture
from runs.models import Host, Run, RunProcess
from tests.support.worker import WorkerProcess

pytestmark = [pytest.mark.services, pytest.mark.sshd, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def two_hosts(tmp_path):
    from tests.support.requirements import require_sshd
    from tests.support.sshd import SSHServer

    require_sshd()
    servers = [SSHServer().start(), SSHServer().start()]
    config, known = tmp_path / "ssh_config", tmp_path / "known_hosts"
    known.write_text("".join(s.known_hosts.read_text() for s in servers))
    config.write_text(
        "".join(
            f"Host node-{name}\n  HostName 127.0.0.1\n  Port {s.port}\n  User root\n"
            f"  IdentityFile {s.client_key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
            "  StrictHostKeyChecking yes\n  LogLevel ERROR\n"
            for name, s in zip("ab", servers, strict=True)
        )
    )
    yield servers, config
    for server in servers:
        server.cleanup()


def _two_node_run(pid: int) -> Run:
    py_spy = Host.objects.get(name="local").py_spy
    run = Run.objects.create(name="two-node", status="running")
    for name in "ab":
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


def _pyspy_running(pid: int) -> bool:
    return subprocess.run(["pgrep", "-f", f"py-spy record --pid {pid} "]).returncode == 0


def test_a_group_over_two_hosts_with_one_down_is_partial_and_keeps_the_other(
    two_hosts, running_workload, tmp_path
):
    (server_a, server_b), config = two_hosts
    run = _two_node_run(running_workload.pid)
    worker = _worker(tmp_path, config, retries=1)
    try:
        server_b.stop()  # node-b is down as the job capture starts
        group = jobs.capture_group_create(user=None, run=run, duration=2, rate=50)
        _wait_while(lambda: jobs.group_summary(group)["status"] == "running", timeout_s=60)
    finally:
        worker.stop()
    by_host = _by_host(group)
    assert by_host["node-a"].status == "done", by_host["node-a"].error
    assert by_host["node-a"].stats["total_samples"] > 20
    assert by_host["node-b"].status == "failed"
    assert by_host["node-b"].error_cause == "unreachable"
    assert "cannot reach the host" in by_host["node-b"].error
    assert jobs.group_summary(group)["status"] == "partial"


def test_a_host_that_dies_mid_capture_fails_its_capture_and_leaves_the_others_intact(
    two_hosts, running_workload, tmp_path
):
    (server_a, server_b), config = two_hosts
    run = _two_node_run(running_workload.pid)
    worker = _worker(tmp_path, config, retries=0)
    try:
        group = jobs.capture_group_create(user=None, run=run, duration=6, rate=50)

        def b_not_sampling_yet() -> bool:
            return (
                Capture.objects.get(group=group, host__name="node-b").progress.get("elapsed_s", 0)
                < 1.5
            )

        _wait_while(b_not_sampling_yet, timeout_s=30)
        assert not b_not_sampling_yet(), "node-b's capture never started sampling"
        server_b.crash()  # the machine dies with py-spy running on it
        _wait_while(lambda: jobs.group_summary(group)["status"] == "running", timeout_s=60)
    finally:
        worker.stop()
    by_host = _by_host(group)
    assert by_host["node-a"].status == "done", by_host["node-a"].error
    assert by_host["node-a"].stats["total_samples"] > 100
    node_b = by_host["node-b"]
    assert node_b.status == "failed"
    assert node_b.error_cause == "connection_lost"
    assert "SSH connection dropped" in node_b.error
    assert "Sampling process" in pipeline.read_log(node_b)  # what py-spy said is kept
    assert jobs.group_summary(group)["status"] == "partial"
    _wait_while(lambda: _pyspy_running(running_workload.pid), timeout_s=10)
    assert not _pyspy_running(running_workload.pid), "node-b's py-spy outlived its connection"
