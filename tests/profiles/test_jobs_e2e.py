"""A whole-job capture across two real sshd "hosts" on loopback, one of them down."""

import time

import pytest

from profiles import jobs
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


def test_a_group_over_two_hosts_with_one_down_is_partial_and_keeps_the_other(
    two_hosts, running_workload, tmp_path
):
    (server_a, server_b), config = two_hosts
    py_spy = Host.objects.get(name="local").py_spy
    run = Run.objects.create(name="two-node", status="running")
    for name in "ab":
        host = Host.objects.create(
            name=f"node-{name}", transport="ssh", address=f"node-{name}", py_spy=py_spy
        )
        RunProcess.objects.create(run=run, host=host, pid=running_workload.pid, role=f"rank-{name}")
    env = {
        "FLAMEDECK_SSH_CONFIG": str(config),
        "FLAMEDECK_CAPTURE_RETRIES": "1",
        "FLAMEDECK_RETRY_BACKOFF_S": "0",
    }
    worker = WorkerProcess(tmp_path / "w.log", env=env)
    try:
        server_b.stop()  # node-b goes down as the job capture starts
        group = jobs.capture_group_create(user=None, run=run, duration=2, rate=50)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and jobs.group_summary(group)["status"] == "running":
            time.sleep(0.3)
    finally:
        worker.stop()
    by_host = {c.host.name: c for c in Capture.objects.filter(group=group).select_related("host")}
    assert by_host["node-a"].status == "done", by_host["node-a"].error
    assert by_host["node-a"].stats["total_samples"] > 20
    assert by_host["node-b"].status == "failed"
    assert by_host["node-b"].error_cause == "unreachable"
    assert "cannot reach the host" in by_host["node-b"].error
    assert jobs.group_summary(group)["status"] == "partial"
