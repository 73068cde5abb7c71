"""`manage.py serve` for real: web server, worker and beat as child processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from config.env import local_port_answers
from tests.support.procs import alive, command_line, descendants, wait_until
from tests.support.sshd import free_port
from tests.support.worker import ROOT, worker_env

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _web_answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


class Serve:
    """`manage.py serve` as a child process, with its output in a file."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.log = tmp_path / "serve.log"
        self.out = open(self.log, "w")  # noqa: SIM115 — closed in close()
        env = {**worker_env(), "FLAMEDECK_REAP_EVERY_S": "2"}
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", *args],
            cwd=ROOT, env=env, stdout=self.out, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def text(self) -> str:
        return self.log.read_text()

    def pids(self, name: str) -> list[int]:
        return [int(p) for p in re.findall(rf"started {name} pid (\d+)", self.text())]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in descendants(self.proc.pid):
            os.kill(pid, signal.SIGKILL)
        self.out.close()


@pytest.fixture
def serve(tmp_path):
    started: list[Serve] = []

    def start(*args: str) -> Serve:
        started.append(Serve(tmp_path, *args))
        return started[-1]

    yield start
    for one in started:
        one.close()


def test_serve_restarts_a_killed_worker_keeps_the_web_up_and_leaves_nothing_on_stop(serve, capsys):
    port = free_port()
    app = serve("--port", str(port))
    workers = 2  # the threads worker (default + capture queues) and the analysis worker
    ready = lambda: app.text().count(" ready.")  # noqa: E731
    assert wait_until(lambda: _web_answers(port) and ready() >= workers, 60), app.text()
    (worker,) = app.pids("worker-capture")
    (beat,) = app.pids("beat")
    assert "beat" in command_line(beat) and "worker" in command_line(worker)
    os.kill(worker, signal.SIGKILL)
    killed_at = time.monotonic()
    web_down_while_restarting = probes = 0
    deadline = time.monotonic() + 60
    while len(app.pids("worker-capture")) < 2 or ready() < workers + 1:
        assert time.monotonic() < deadline, app.text()
        web_down_while_restarting += not _web_answers(port)
        probes += 1
        time.sleep(0.2)
    with capsys.disabled():
        print(
            f"\nworker ready again {time.monotonic() - killed_at:.1f} s after SIGKILL; "
            f"web answered {probes - web_down_while_restarting}/{probes} probes meanwhile"
        )
    restarted = app.pids("worker-capture")[-1]
    assert restarted != worker and alive(restarted) and alive(beat)
    assert web_down_while_restarting == 0
    assert "exited (-9); restarting in 1 s" in app.text()
    tree = descendants(app.proc.pid)
    assert len(tree) >= 4  # web, worker (+ its pool), beat
    app.proc.send_signal(signal.SIGTERM)
    assert app.proc.wait(timeout=30) == 0
    assert wait_until(lambda: not any(alive(pid) for pid in tree), 5), [
        command_line(pid) for pid in tree if alive(pid)
    ]
    assert not local_port_answers(port)


def test_workers_only_runs_no_web_server_and_a_killed_supervisor_takes_its_children_along(
    serve,
):
    port = free_port()
    app = serve("--workers-only", "--port", str(port))
    assert wait_until(lambda: " ready." in app.text() and app.pids("beat"), 60), app.text()
    assert not app.pids("web") and not local_port_answers(port)
    tree = descendants(app.proc.pid)
    app.proc.kill()  # no chance to clean up: the kernel's parent-death signal does it
    app.proc.wait()
    assert wait_until(lambda: not any(alive(pid) for pid in tree), 20), [
        command_line(pid) for pid in tree if alive(pid)
    ]
