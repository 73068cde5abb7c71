"""A real `celery -A config worker` as a child process, sharing the caller's database.

Used by the tests (on the test database) and by bench/bench_capture.py.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


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
