"""Liveness of a whole job: one bounded `ps` per host, hosts asked at once, a host
that cannot be asked reported without holding up the others."""

import subprocess
import sys
import time

import pytest

from runs import services
from runs.models import Host, Run, RunProcess
from tests.support.sshd import ALIAS, free_port

pytestmark = [pytest.mark.django_db, pytest.mark.sshd]


@pytest.fixture
def sleepers():
    procs = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]) for _ in range(8)
    ]
    yield [p.pid for p in procs]
    for proc in procs:
        proc.kill()
        proc.wait()


def test_64_processes_on_8_ssh_hosts_are_checked_in_one_bounded_round(
    sshd, settings, sleepers, capsys
):
    settings.FLAMEDECK_SSH_CONFIG = str(sshd.config)
    run = Run.objects.create(name="job-64")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    for n in range(8):
        host = Host.objects.create(name=f"node-{n}", transport="ssh", address=ALIAS)
        pids = [*sleepers[:7], gone.pid] if n == 0 else sleepers
        for rank, pid in enumerate(pids):
            RunProcess.objects.create(run=run, host=host, pid=pid, role=f"rank-{8 * n + rank}")
    down = Host.objects.create(name="down", transport="ssh", address="127.0.0.1", port=free_port())
    RunProcess.objects.create(run=run, host=down, pid=sleepers[0], role="rank-64", alive=True)
    processes = list(run.processes.select_related("host"))
    start = time.monotonic()
    errors = services.run_processes_check(processes=processes)
    elapsed = time.monotonic() - start
    with capsys.disabled():
        print(f"\nliveness of {len(processes)} processes on 9 ssh hosts (1 down): {elapsed:.2f} s")
    assert list(errors) == [down.pk] and "could not check" in errors[down.pk]
    states = dict(run.processes.values_list("role", "alive"))
    assert states["rank-7"] is False and states["rank-0"] is True and states["rank-63"] is True
    assert states["rank-64"] is True  # unknown now: the last known state stays
    assert sum(1 for alive in states.values() if alive) == 64
    assert elapsed < 6
