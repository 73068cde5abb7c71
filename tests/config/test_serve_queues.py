"""The worker commands docs/deployment.md gives: a plain `celery -A config worker` (no -Q,
as DESIGN.md's "celery -A config worker") consumes every queue, captures and analyses
included. The per-queue commands (`-Q …`) keep working: `manage.py serve` and
tests/support/worker.py start those, so every test with a real worker runs them."""

import subprocess
import sys
import time

import pytest
from django.conf import settings

from config import celery_app
from profiles.captures.tasks import analyze_capture, run_capture
from tests.support.worker import ROOT, worker_env

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _queues() -> list[str]:
    default = settings.CELERY_TASK_DEFAULT_QUEUE
    return [default, f"{default}.capture", f"{default}.analysis"]


def test_every_queue_is_declared_and_each_task_routes_to_its_own():
    assert sorted(celery_app.amqp.queues) == sorted(_queues())
    route = celery_app.amqp.router.route
    assert route({}, run_capture.name, (1,), {})["queue"].name == _queues()[1]
    assert route({}, analyze_capture.name, (1,), {})["queue"].name == _queues()[2]


def _succeeded(log: str, task: str, count: int = 1) -> bool:
    return sum(f"Task {task}[" in line and "succeeded" in line for line in log.splitlines()) >= (
        count
    )


def test_a_worker_started_without_queues_runs_captures_and_analyses(tmp_path):
    log_path = tmp_path / "plain.log"
    argv = [sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "info", "--pool",
            "solo", "-n", "plain@%h", "--without-gossip", "--without-mingle",
            "--without-heartbeat"]  # fmt: skip
    with open(log_path, "w") as log:
        worker = subprocess.Popen(argv, cwd=ROOT, env=worker_env(), stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while " ready." not in log_path.read_text() and time.monotonic() < deadline:
            assert worker.poll() is None, log_path.read_text()[-2000:]
            time.sleep(0.2)
        banner = log_path.read_text()
        for queue in _queues():
            assert f".> {queue} " in banner, banner  # consumed (the startup banner's list)
        # Ids with no capture: each task loads by id, finds none and returns.
        run_capture.delay(2**40)
        analyze_capture.delay(2**40)
        while time.monotonic() < deadline and not (
            _succeeded(log_path.read_text(), run_capture.name)
            and _succeeded(log_path.read_text(), analyze_capture.name)
        ):
            time.sleep(0.2)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    text = log_path.read_text()
    assert _succeeded(text, run_capture.name) and _succeeded(text, analyze_capture.name), text[
        -3000:
    ]
