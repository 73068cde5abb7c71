"""flamedeck's own processes on the local host are for host admins only, non-blocking
by default: found from /proc (this process, this checkout's entry points and what
runs under them, the database and broker it uses), refused to operators with a 403
naming the reason on every path (one capture, a whole-job capture, a schedule, the
worker that would start py-spy), and nothing is saved when refused."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.conf import settings

from profiles.captures import pipeline
from profiles.jobs import services as jobs
from profiles.models import Capture, CaptureGroup
from runs import own_processes
from runs.models import Host, Run, RunProcess
from runs.permissions import OwnProcessRefused, refuse_own_process
from tests.support.procs import descendants, pids, wait_until

pytestmark = pytest.mark.django_db
BASE = Path(settings.BASE_DIR)
SLEEPER = "import os, subprocess, sys, time\n" + textwrap.dedent(
    """
    if "--child" not in sys.argv:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--child"])
    time.sleep(60)
    """
)


def _started(argv: list[str], cwd: Path) -> subprocess.Popen:
    proc = subprocess.Popen(argv, cwd=cwd, start_new_session=True)
    assert wait_until(lambda: descendants(proc.pid), 10), "its child never started"
    return proc


@pytest.fixture
def fake_entry_points(tmp_path):
    """Processes whose command lines are flamedeck's entry points, from this checkout
    (a worker, with a child) and from elsewhere (a manage.py of another project)."""
    celery = tmp_path / "bin" / "celery"
    celery.parent.mkdir()
    celery.write_text(f"#!{sys.executable}\n{SLEEPER}")
    celery.chmod(0o755)
    other = tmp_path / "other" / "manage.py"
    other.parent.mkdir()
    other.write_text(SLEEPER)
    procs = {
        "worker": _started([str(celery), "-A", "config", "worker", "-l", "info"], BASE),
        "worker elsewhere": _started([str(celery), "-A", "config", "worker"], tmp_path),
        "other manage.py": _started([sys.executable, str(other), "runserver"], other.parent),
        "training job": _started([sys.executable, "-c", SLEEPER], BASE),
    }
    yield procs
    for proc in procs.values():
        os.killpg(proc.pid, signal.SIGKILL)  # the process and its child, started here
        proc.wait()


def test_this_checkouts_entry_points_and_what_runs_under_them_are_own(fake_entry_points):
    worker = fake_entry_points["worker"].pid
    assert "flamedeck's worker" in own_processes.own_process(worker)
    (child,) = descendants(worker)
    assert own_processes.own_process(child).startswith("under flamedeck's worker")
    assert own_processes.own_process(os.getpid()).startswith("this flamedeck process")


def test_a_training_job_and_another_projects_processes_are_not(fake_entry_points):
    for name in ("worker elsewhere", "other manage.py", "training job"):
        pid = fake_entry_points[name].pid
        assert own_processes.own_process(pid) is None, name
        assert all(own_processes.own_process(p) is None for p in descendants(pid)), name


def _listener(port: int) -> int | None:
    inodes = {
        fields[9]
        for table in ("tcp", "tcp6")
        for fields in own_processes._rows(Path("/proc/net") / table)
        if fields[3] == "0A" and int(fields[1].rpartition(":")[2], 16) == port
    }
    for pid in pids():
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if link.startswith("socket:[") and link[8:-1] in inodes:
                        return pid
    return None


def test_the_database_and_broker_flamedeck_uses_here_are_own():
    services = own_processes.configured_services()
    if not services:
        pytest.skip("the embedded database and broker (SQLite, files) run in-process")
    for service in services:
        pid = _listener(service.port)
        if pid is None:
            continue
        assert own_processes.own_process(pid).startswith(service.label.split(",")[0])
        for below in descendants(pid)[:3]:  # PostgreSQL's backends
            assert own_processes.own_process(below).startswith("under "), below


def _post(client, body: dict):
    return client.post("/api/captures/", json.dumps(body), content_type="application/json")


def test_an_operator_gets_a_403_naming_the_reason_and_nothing_is_saved(
    owner_client, fake_entry_points
):
    local = Host.objects.get(name="local")
    before = Capture.objects.count()
    for pid in (fake_entry_points["worker"].pid, os.getpid()):
        response = _post(owner_client, {"host": "local", "pid": pid, "duration": 1})
        assert response.status_code == 403, response.content
        detail = response.json()["detail"]
        assert f"pid {pid} on {local.name} is" in detail and "flamedeck's own" in detail
        assert "-A config" not in detail  # command lines are for host admins only
    assert Capture.objects.count() == before


def test_a_host_admin_captures_one_non_blocking_unless_asking_otherwise(
    host_admin_client, fake_entry_points
):
    worker = fake_entry_points["worker"].pid
    made = _post(host_admin_client, {"host": "local", "pid": worker, "duration": 1})
    assert made.status_code == 201, made.content
    capture = Capture.objects.get(pk=made.json()["id"])
    assert capture.nonblocking and not capture.native
    Capture.objects.filter(pk=capture.pk).update(status=Capture.Status.CANCELLED)
    asked = {"host": "local", "pid": worker, "duration": 1, "nonblocking": False}
    blocking = Capture.objects.get(pk=_post(host_admin_client, asked).json()["id"])
    assert not blocking.nonblocking and blocking.native


def test_a_training_job_keeps_the_usual_defaults(owner_client, fake_entry_points):
    job = fake_entry_points["training job"].pid
    made = _post(owner_client, {"host": "local", "pid": job, "duration": 1})
    assert made.status_code == 201, made.content
    capture = Capture.objects.get(pk=made.json()["id"])
    assert capture.native and not capture.nonblocking


def test_a_whole_job_capture_holding_one_is_refused_whole(owner_client, fake_entry_points):
    run = Run.objects.create(name="with the server in it")
    local = Host.objects.get(name="local")
    RunProcess.objects.create(run=run, host=local, pid=fake_entry_points["training job"].pid)
    RunProcess.objects.create(run=run, host=local, pid=fake_entry_points["worker"].pid)
    response = owner_client.post(
        f"/api/runs/{run.pk}/capture/", json.dumps({"duration": 1}), content_type="application/json"
    )
    assert response.status_code == 403 and "flamedeck's own" in response.json()["detail"]
    assert not CaptureGroup.objects.exists() and not Capture.objects.exists()


def test_a_schedule_skips_it_and_goes_on_with_other_runs(fake_entry_points):
    local = Host.objects.get(name="local")
    run = Run.objects.create(name="scheduled", schedule_every_min=1)
    RunProcess.objects.create(run=run, host=local, pid=fake_entry_points["worker"].pid)
    assert jobs.scheduled_captures_due() == []
    assert not Capture.objects.exists()


def test_the_worker_refuses_one_that_got_past_the_request(owner, fake_entry_points):
    local = Host.objects.get(name="local")
    capture = Capture.objects.create(
        host=local, pid=fake_entry_points["worker"].pid, requested_by=owner, duration=1
    )
    assert pipeline.capture_execute(capture_id=capture.pk) == Capture.Status.FAILED
    capture.refresh_from_db()
    assert capture.error_cause == "own_process" and "flamedeck's own" in capture.error


def test_the_shell_command_and_host_admins_may_schedules_and_operators_not(owner, host_admin):
    local = Host.objects.get(name="local")
    args = {"host": local, "pid": 1234, "what": "flamedeck's worker"}
    refuse_own_process(user=None, **args)  # `manage.py capture`: the server's own shell
    refuse_own_process(user=host_admin, **args)
    for user, scheduled in ((owner, False), (None, True)):
        with pytest.raises(OwnProcessRefused):
            refuse_own_process(user=user, scheduled=scheduled, **args)
