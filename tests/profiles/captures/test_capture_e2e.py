"""End to end with real parts: API request → Celery worker (Redis, PostgreSQL when
they answer) → ssh / local → py-spy on a real process → stored stats."""

import subprocess
import time

import pytest

from profiles.captures import services
from profiles.models import Capture
from runs.models import Host
from runs.tokens import api_token_create
from tests.support.sshd import ALIAS
from tests.support.workload import pyspy_running

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _wait_for(capture_id: int, statuses: set[str], timeout_s: float = 60) -> Capture:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        capture = Capture.objects.get(pk=capture_id)
        if capture.status in statuses:
            return capture
        time.sleep(0.2)
    raise AssertionError(f"capture {capture_id} stayed {capture.status}: {capture.error}")


def _until(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _sampling(capture_id: int, pid: int, seconds: float) -> bool:
    """py-spy is attached and the capture has been sampling for `seconds`."""
    progress = Capture.objects.get(pk=capture_id).progress
    return (
        pyspy_running(pid)
        and progress.get("sampling") is True
        and progress.get("elapsed_s", 0) >= seconds
    )


def _api(client, user):
    _, key = api_token_create(user=user)
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {key}"
    return client


def _request_capture(client, **body) -> int:
    response = client.post("/api/captures/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def test_a_capture_requested_through_the_api_runs_on_a_real_worker_and_stores_stats(
    client, owner, running_workload, celery_worker_process
):
    api = _api(client, owner)
    capture_id = _request_capture(api, host="local", pid=running_workload.pid, duration=2, rate=50)
    capture = _wait_for(capture_id, {"done", "failed"})
    assert capture.status == "done", capture.error
    body = api.get(f"/api/captures/{capture_id}/").json()
    stats = body["stats"]
    assert stats["total_samples"] > 20
    assert {"target-0", "target-1"} <= {t["name"] for t in stats["threads"]}
    assert any("matmul_like" in f["frame"] for f in stats["top_self"])
    assert stats["lag"]["requested_rate"] == 50
    assert capture.worker and capture.started_at and capture.finished_at
    assert (
        api.get(f"/api/captures/{capture_id}/flamegraph/").json()["value"] == stats["total_samples"]
    )


def test_a_capture_runs_over_ssh_through_an_exec_prefix(
    client, owner, running_workload, sshd, tmp_path
):
    from tests.support.worker import WorkerProcess

    wrapper = tmp_path / "fake-pct"
    marker = tmp_path / "wrapped"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {marker}\nshift 3\nexec "$@"\n')
    wrapper.chmod(0o755)
    Host.objects.create(
        name="gpu-node",
        transport="ssh",
        address=ALIAS,
        exec_prefix=f"{wrapper} exec 200 --",
        py_spy=Host.objects.get(name="local").py_spy,
    )
    worker = WorkerProcess(tmp_path / "w.log", env={"FLAMEDECK_SSH_CONFIG": str(sshd.config)})
    try:
        api = _api(client, owner)
        capture_id = _request_capture(
            api, host="gpu-node", pid=running_workload.pid, duration=2, rate=50
        )
        capture = _wait_for(capture_id, {"done", "failed"})
    finally:
        worker.stop()
    assert capture.status == "done", capture.error
    assert capture.stats["total_samples"] > 20
    assert marker.read_text().startswith("exec 200 -- ")


def test_a_dead_pid_fails_at_once_with_its_cause(client, owner, celery_worker_process):
    dead = subprocess.Popen(["true"])
    dead.wait()
    api = _api(client, owner)
    capture_id = _request_capture(api, host="local", pid=dead.pid, duration=2, rate=50)
    capture = _wait_for(capture_id, {"done", "failed"})
    assert capture.status == "failed"
    assert capture.error_cause == "no_such_pid"
    assert "pick a running process" in capture.error


def test_cancel_stops_py_spy_keeps_the_samples_and_leaves_no_sampler(
    client, owner, running_workload, celery_worker_process
):
    api = _api(client, owner)
    capture_id = _request_capture(api, host="local", pid=running_workload.pid, duration=30, rate=50)
    _wait_for(capture_id, {"running"})
    assert _until(lambda: _sampling(capture_id, running_workload.pid, 2.5), timeout_s=30)
    assert api.post(f"/api/captures/{capture_id}/cancel/").status_code == 200
    capture = _wait_for(capture_id, {"cancelled", "failed", "done"}, timeout_s=20)
    assert capture.status == "cancelled", capture.error
    assert capture.stats["total_samples"] > 10
    assert capture.wall_s < 15
    assert not pyspy_running(running_workload.pid)


def test_a_killed_worker_leaves_a_capture_marked_lost_and_no_sampler(
    client, owner, running_workload, tmp_path, transactional_db
):
    from tests.support.worker import WorkerProcess

    worker = WorkerProcess(tmp_path / "doomed.log")
    api = _api(client, owner)
    capture_id = _request_capture(api, host="local", pid=running_workload.pid, duration=60, rate=50)
    _wait_for(capture_id, {"running"})
    assert _until(lambda: _sampling(capture_id, running_workload.pid, 2), timeout_s=30)
    worker.kill()
    assert _until(lambda: not pyspy_running(running_workload.pid), timeout_s=10), (
        "py-spy outlived its worker"
    )
    time.sleep(3.5)
    assert services.reap_lost_captures(timeout_s=3) == 1
    capture = Capture.objects.get(pk=capture_id)
    assert capture.status == "failed" and capture.error_cause == "worker_lost"
