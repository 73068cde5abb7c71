"""Shared fixtures: personas, and a real Celery worker process on the test database."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Group

from runs.permissions import OPERATORS_GROUP

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def owner(django_user_model):
    """An operator: may launch captures and edit hosts."""
    user = django_user_model.objects.create_user("owner", password="owner-pass")
    user.groups.add(Group.objects.get(name=OPERATORS_GROUP))
    return user


@pytest.fixture
def teammate(django_user_model):
    """A logged-in viewer: sees everything, comments, launches nothing."""
    return django_user_model.objects.create_user("teammate", password="teammate-pass")


@pytest.fixture
def owner_client(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def teammate_client(client, teammate):
    client.force_login(teammate)
    return client


def worker_env() -> dict[str, str]:
    """Environment for a worker process that shares this test run's database."""
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        url = f"sqlite:///{db['NAME']}"
    else:
        url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=url,
        FLAMEDECK_VAR_DIR=str(settings.VAR_DIR),
        MEDIA_ROOT=str(settings.MEDIA_ROOT),
        PYTHONUNBUFFERED="1",
    )
    return env


class WorkerProcess:
    """`celery -A config worker` as a child process; stopped (or killed) by the test."""

    def __init__(
        self,
        log_path: Path,
        concurrency: int = 2,
        name: str = "w1",
        env: dict | None = None,
        beat: bool = False,
    ) -> None:
        self.log_path = log_path
        self.log = open(log_path, "w")  # noqa: SIM115 — closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "-l",
                "info",
                "--concurrency",
                str(concurrency),
                "--pool",
                "prefork",
                "-n",
                f"{name}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                *(["--beat", "--schedule", str(log_path.with_suffix(".beat"))] if beat else []),
            ],
            cwd=ROOT,
            env={**worker_env(), **(env or {})},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait_ready()

    def _wait_ready(self, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited: {self.log_path.read_text()[-2000:]}")
            if " ready." in self.log_path.read_text():
                return
            time.sleep(0.2)
        raise RuntimeError(f"celery worker not ready: {self.log_path.read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and pool children)."""
        os.killpg(self.proc.pid, 9)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        self.log.close()


@pytest.fixture
def celery_worker_process(tmp_path, transactional_db):
    """A real worker on the real broker (Redis when it answers) and the test DB."""
    worker = WorkerProcess(tmp_path / "worker.log")
    yield worker
    worker.stop()


@pytest.fixture(scope="session")
def sshd():
    """A real OpenSSH sshd on 127.0.0.1 with generated keys, shared by the session
    (tests must not stop or re-key it; tests/runs has `own_sshd` for that)."""
    from tests.support.sshd import SSHD, SSHServer

    if not SSHD.exists():
        pytest.skip(f"OpenSSH's sshd is not at {SSHD}")
    server = SSHServer().start()
    yield server
    server.cleanup()


@pytest.fixture
def running_workload():
    """A real Python process with threads target-0, target-1 and waiter."""
    from tests.support.workload import start_workload

    with start_workload(threads=2) as workload:
        yield workload
